#!/usr/bin/env python3
"""Converts the rule YAML files of MLCommons' compliance checker (package mlperf-logging) into
trainkit's JSON rule format (man 5 trainkit-compliance), which log-check reads from share/compliance.

    python3 contrib/compliance/yaml2json.py SRC_DIR OUT_DIR VERSION...
    e.g. SRC_DIR=$(python3 -c 'import mlperf_logging,os;print(os.path.dirname(mlperf_logging.__file__))')/compliance_checker
         python3 contrib/compliance/yaml2json.py $SRC_DIR share/compliance 1.0.0 1.1.0
         python3 contrib/compliance/yaml2json.py $SRC_DIR share/compliance 2.0.0 2.1.0 3.0.0 3.1.0 4.0.0 4.1.0 5.0.0 5.1.0 6.0.0 6.1.0
    (contrib/compliance/regen.sh runs both and the RCP conversion.)

Rulesets 1.0.0 and 1.1.0 are converted by text substitution, as they were first made (the files
are unchanged since). Rulesets from 2.0.0 on are converted through Python's own parser (ast): each
CHECK/POST/BEGIN is parsed and written out in trainkit's expression language, and a construct the
language lacks stops the script with an assertion, so nothing is silently dropped or changed.
Those rulesets include their division and benchmark files by name relative to the ruleset being
checked ("closed_{value}"), so a file whose rules are the same in several rounds (or under several
names) is stored once; the others are {"same_as": "training-2.0.0/open_bert"} pointers.
Needs PyYAML (a test-time tool only).
"""
import ast, glob, json, os, re, sys, yaml

FMT = 'trainkit-compliance/1'


# ---- rulesets 1.0.0 and 1.1.0 (the original text conversion) -----------------------------------

def legacy(SRC, OUT, ver):
    def expr(x):
        x = ' '.join(x.strip().split()) if '\n' in x.strip() and 'sorted' not in x else x.strip()
        x = x.replace('ll.timestamp', 'ts').replace('math.log2(', 'log2(').replace("float('inf')", 'inf')
        x = re.sub(r"isinstance\((.*), int\)", r"is_int(\1)", x)
        x = re.sub(r'\bTrue\b', 'true', x); x = re.sub(r'\bFalse\b', 'false', x); x = re.sub(r'\bNone\b', 'null', x)
        return x
    def lst(v): return v if isinstance(v, list) else [v]
    d = f'{SRC}/training_{ver}'
    od = f'{OUT}/training-{ver}'; os.makedirs(od, exist_ok=True)
    for f in sorted(glob.glob(d + '/*.yaml')):
        name = os.path.basename(f)[:-5]
        c = yaml.load(open(f), Loader=yaml.BaseLoader) or []
        out = {'format': FMT, 'source': f'mlcommons/logging training_{ver}/{name}.yaml'}
        keys = []; end = []
        weights = any(list(r)[0] == 'END' for r in c)
        for rec in c:
            (t, b), = rec.items()
            if t == 'BEGIN':
                code = b['CODE'].strip(); assert code.startswith('s.update('); code = code[len('s.update('):-1]
                code = code.replace("'", '"').replace('False', 'false').replace('True', 'true')
                code = re.sub(r',(\s*)\}', r'\1}', code)
                out['state'] = json.loads(code)
            elif t == 'KEY':
                k = {'name': b['NAME']}
                req = b.get('REQ')
                if req:
                    m = re.match(r'AT_LEAST_ONE_OR\((.*)\)', req)
                    if m: k['req'] = 'at_least_one_or'; k['or'] = [s.strip() for s in m.group(1).split(',')]
                    else: k['req'] = {'EXACTLY_ONE': 'exactly_one', 'AT_LEAST_ONE': 'at_least_one', 'OPTIONAL': 'optional'}[req]
                if 'CHECK' in b: k['check'] = [expr(x) for x in lst(b['CHECK'])]
                if 'POST' in b:
                    p = b['POST'].strip()
                    m = re.match(r"enqueue_config\('training_(.*)/(.*)\{\}(.*)\.yaml'\.format\(v\['value'\]\)\)$", p)
                    if m: k['include'] = f'training-{m.group(1)}/{m.group(2)}{{value}}{m.group(3)}'
                    else: k['post'] = [expr(s) for s in p.split(';')]
                if 'ATLEAST_ONE_CHECK' in b: k['at_least_one_check'] = expr(b['ATLEAST_ONE_CHECK'])
                for extra in b:
                    assert extra in ('NAME', 'REQ', 'CHECK', 'POST', 'ATLEAST_ONE_CHECK'), (f, extra)
                if weights and k['name'] == 'weights_initialization': k['strict_only'] = 'WEIGHTS_INIT'
                keys.append(k)
            elif t == 'END':
                chk = b['CHECK'].strip()
                m = re.match(r"sorted\(s\['initialized_tensors'\]\) == sorted\((\[.*\])\)$", chk, re.S)
                assert m, f
                out.setdefault('const', {})['tensors'] = eval(m.group(1))
                end.append({'name': 'initialized_tensors', 'check': "sorted(s['initialized_tensors']) == sorted(tensors)",
                            'diff': ["s['initialized_tensors']", 'tensors'], 'strict_only': 'WEIGHTS_INIT'})
            else: raise Exception(t)
        const = out.pop('const', None)
        out['keys'] = keys
        if const: out['const'] = const
        if end: out['end'] = end
        open(f'{od}/{name}.json', 'w').write(json.dumps(out, indent=1) + '\n')
        print(od, name, len(keys))


# ---- rulesets from 2.0.0 on: Python source -> trainkit expressions ------------------------------

# Precedence levels of trainkit's (= Python's) grammar, lowest first.
IFEXP, OR, AND, NOT, CMP, BOR, ADD, MUL, UNARY, POW, ATOM = range(11)
CMPOPS = {ast.Eq: '==', ast.NotEq: '!=', ast.Lt: '<', ast.LtE: '<=', ast.Gt: '>', ast.GtE: '>=',
          ast.In: 'in', ast.NotIn: 'not in', ast.Is: 'is', ast.IsNot: 'is not'}
BINOPS = {ast.Add: ('+', ADD), ast.Sub: ('-', ADD), ast.Mult: ('*', MUL), ast.Div: ('/', MUL),
          ast.Mod: ('%', MUL), ast.BitOr: ('|', BOR)}
FUNCS = {'min': 'min', 'max': 'max', 'abs': 'abs', 'int': 'int', 'len': 'len', 'sorted': 'sorted',
         'is_integer': 'is_integer'}
MATH = {'log2': 'log2', 'ceil': 'ceil', 'floor': 'floor'}
NUM = re.compile(r'^[0-9]*\.?[0-9]*([eE][-+]?[0-9]+)?$')


class Conv:
    def __init__(self, src, where):
        self.src, self.where = src, where

    def fail(self, node, why):
        raise AssertionError(f'{self.where}: {why}: {ast.get_source_segment(self.src, node) or ast.dump(node)}')

    def lit(self, n):
        v = n.value
        if v is None: return 'null'
        if v is True: return 'true'
        if v is False: return 'false'
        if isinstance(v, str):
            if not all(32 <= ord(c) < 127 for c in v): self.fail(n, 'non-ASCII string literal')
            return "'" + v.replace('\\', '\\\\').replace("'", "\\'") + "'"
        if isinstance(v, (int, float)):
            txt = ast.get_source_segment(self.src, n)
            if txt is None or not NUM.match(txt) or float(txt) != v or (isinstance(v, int) and not txt.isdigit()):
                txt = repr(v)
            assert NUM.match(txt) and float(txt) == v, (self.where, txt)
            return txt
        self.fail(n, 'literal of an unknown type')

    def ex(self, n, ctx=IFEXP):
        s, p = self.ex1(n)
        return f'({s})' if p < ctx else s

    def ex1(self, n):
        if isinstance(n, ast.Constant): return self.lit(n), ATOM
        if isinstance(n, ast.Name):
            if n.id in ('v', 's'): return n.id, ATOM
            self.fail(n, 'unknown name')
        if isinstance(n, ast.Attribute):
            if isinstance(n.value, ast.Name) and n.value.id == 'll' and n.attr == 'timestamp': return 'ts', ATOM
            self.fail(n, 'unknown attribute')
        if isinstance(n, ast.Subscript):
            return f'{self.ex(n.value, ATOM)}[{self.ex(n.slice)}]', ATOM
        if isinstance(n, ast.List):
            return '[' + ', '.join(self.ex(e) for e in n.elts) + ']', ATOM
        if isinstance(n, ast.Call):
            f, args = n.func, n.args
            if n.keywords: self.fail(n, 'keyword arguments')
            if isinstance(f, ast.Name) and f.id == 'isinstance' and len(args) == 2 and \
                    isinstance(args[1], ast.Name) and args[1].id == 'int':
                return f'is_int({self.ex(args[0])})', ATOM
            if isinstance(f, ast.Name) and f.id == 'float' and len(args) == 1 and isinstance(args[0], ast.Constant) and \
                    args[0].value == 'inf':
                return 'inf', ATOM
            if isinstance(f, ast.Name) and f.id in FUNCS: name = FUNCS[f.id]
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == 'math' and f.attr in MATH:
                name = MATH[f.attr]
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == 's' and f.attr == 'get' \
                    and len(args) == 1:
                return f'get(s, {self.ex(args[0])})', ATOM
            else: self.fail(n, 'unknown function')
            return f'{name}(' + ', '.join(self.ex(a) for a in args) + ')', ATOM
        if isinstance(n, ast.UnaryOp):
            if isinstance(n.op, ast.Not): return 'not ' + self.ex(n.operand, NOT), NOT
            if isinstance(n.op, ast.USub): return '-' + self.ex(n.operand, UNARY), UNARY
            self.fail(n, 'unknown unary operator')
        if isinstance(n, ast.BinOp):
            if isinstance(n.op, ast.Pow): # right-associative; the exponent may be a unary minus
                return f'{self.ex(n.left, ATOM)} ** {self.ex(n.right, UNARY)}', POW
            if type(n.op) not in BINOPS: self.fail(n, 'unknown operator')
            op, p = BINOPS[type(n.op)]
            return f'{self.ex(n.left, p)} {op} {self.ex(n.right, p + 1)}', p
        if isinstance(n, ast.BoolOp):
            op, p = ('and', AND) if isinstance(n.op, ast.And) else ('or', OR)
            return f' {op} '.join(self.ex(x, p + 1) for x in n.values), p
        if isinstance(n, ast.Compare):
            parts = [self.ex(n.left, BOR)]
            for op, c in zip(n.ops, n.comparators):
                if isinstance(op, (ast.Is, ast.IsNot)) and not (isinstance(c, ast.Constant) and c.value is None):
                    self.fail(n, "'is' other than with None")
                parts += [CMPOPS[type(op)], self.ex(c, BOR)]
            return ' '.join(parts), CMP
        if isinstance(n, ast.IfExp):
            return f'{self.ex(n.body, OR)} if {self.ex(n.test, OR)} else {self.ex(n.orelse, IFEXP)}', IFEXP
        self.fail(n, 'unknown construct')

    def stmt(self, n):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and self.is_state(n.targets[0]):
            return f'{self.ex(n.targets[0])} = {self.ex(n.value)}'
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and self.is_state(n.target):
            return f'{self.ex(n.target)} += {self.ex(n.value)}'
        if isinstance(n, ast.If) and not n.orelse and len(n.body) == 1:
            return f'if {self.ex(n.test)}: {self.stmt(n.body[0])}'
        self.fail(n, 'unknown statement')

    @staticmethod
    def is_state(t):
        return isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == 's'


def expr(code, where):
    code = code.strip()
    return Conv(code, where).ex(ast.parse(code, mode='eval').body)


def post(code, ver, where):
    """POST code -> (include or None, [statements]). enqueue_config() must come first."""
    code = code.strip()
    c = Conv(code, where)
    include, stmts = None, []
    for i, n in enumerate(ast.parse(code).body):
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and getattr(n.value.func, 'id', '') == 'enqueue_config':
            assert i == 0, (where, 'enqueue_config after other statements')
            arg = n.value.args[0]
            ok = isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == 'format' and \
                isinstance(arg.func.value, ast.Constant) and len(arg.args) == 1 and \
                ast.get_source_segment(code, arg.args[0]) == "v['value']"
            assert ok, (where, code)
            m = re.match(r'training_(\d+\.\d+\.\d+)/([a-z_]*)\{\}([a-z_]*)\.yaml$', arg.func.value.value)
            assert m, (where, code)
            # relative to the ruleset being checked; a file of another round (4.0.0's resnet takes
            # 3.1.0's closed_resnet_lars) is named with its ruleset
            include = ('' if m.group(1) == ver else f'training-{m.group(1)}/') + f'{m.group(2)}{{value}}{m.group(3)}'
        else:
            stmts.append(c.stmt(n))
    return include, stmts


# BEGIN blocks other than s.update(): the stable diffusion aggregation of FID and CLIP results,
# which appends a derived record per evaluation point to the log. Matched against its template.
AGG = '''from dataclasses import replace
agg_eval_lines = {}
for line in loglines:
    if line.key == "eval_accuracy" and 'metric' in line.value['metadata']:
        G = line.value['metadata']['G']
        if G not in agg_eval_lines:
            new_line = replace(line) # Make a copy
            new_line.key = "aggregated_eval_accuracy"
            new_line.full_string = "" # Not needed
            new_line.lineno = -1      # Not needed
            new_line.value = {'value': {'G': G}, 'metadata':{}}
            agg_eval_lines[G] = new_line

        agg_eval_lines[G].timestamp = max(line.timestamp, agg_eval_lines[G].timestamp)
        agg_eval_lines[G].value['value'][line.value['metadata']['metric']] = line.value['value']
loglines.extend(agg_eval_lines.values())'''


def begin(code, where):
    code = code.strip()
    if code.startswith('s.update('):
        tree = ast.parse(code, mode='eval').body
        assert isinstance(tree, ast.Call) and len(tree.args) == 1, where
        return {'state': ast.literal_eval(tree.args[0])}
    m = re.search(r"line\.value\['metadata'\]\['(\w+)'\]\n", code)
    assert m and ' '.join(code.split()) == ' '.join(AGG.replace("'G'", repr(m.group(1))).replace('G', m.group(1)).split()), \
        (where, 'unknown BEGIN code')
    g = m.group(1)
    return {'derive': [{'name': 'aggregated_eval_accuracy', 'from': 'eval_accuracy', 'when': "'metric' in v['metadata']",
                        'group': f"v['metadata']['{g}']", 'group_name': g, 'field': "v['metadata']['metric']"}]}


def tensors_end(chk, where):
    m = re.match(r"sorted\(s\['initialized_tensors'\]\) == sorted\((\[.*\])\)$", chk.strip(), re.S)
    assert m, where
    return ast.literal_eval(m.group(1))


def convert(path, ver, name):
    where = f'training_{ver}/{name}.yaml'
    c = yaml.load(open(path), Loader=yaml.BaseLoader) or []
    out = {'format': FMT, 'source': f'mlcommons/logging training_{ver}/{name}.yaml'}
    keys, order = {}, []
    for rec in c:
        (t, b), = rec.items()
        if t == 'BEGIN':
            assert set(b) == {'CODE'} and 'state' not in out and 'derive' not in out, where
            out.update(begin(b['CODE'], where))
        elif t == 'KEY':
            for extra in b:
                assert extra in ('NAME', 'REQ', 'CHECK', 'POST', 'ATLEAST_ONE_CHECK', 'FIRST_CHECK'), (where, extra)
            k = {'name': b['NAME']}
            req = b.get('REQ')
            if req:
                m = re.match(r'AT_LEAST_ONE_OR\((.*)\)$', req)
                n = re.match(r'AT_LEAST\((\d+)\)$', req)
                if m: k['req'] = 'at_least_one_or'; k['or'] = [s.strip() for s in m.group(1).split(',')]
                elif n: k['req'] = f'at_least({int(n.group(1))})'
                else: k['req'] = {'EXACTLY_ONE': 'exactly_one', 'AT_LEAST_ONE': 'at_least_one', 'OPTIONAL': 'optional'}[req]
            lst = lambda v: v if isinstance(v, list) else [v]
            if 'CHECK' in b: k['check'] = [expr(x, where) for x in lst(b['CHECK'])]
            if 'POST' in b:
                inc, st = post(b['POST'], ver, where)
                if inc: k['include'] = inc
                if st: k['post'] = st
            if 'ATLEAST_ONE_CHECK' in b: k['at_least_one_check'] = expr(b['ATLEAST_ONE_CHECK'], where)
            if 'FIRST_CHECK' in b: k['first_check'] = [expr(x, where) for x in lst(b['FIRST_CHECK'])]
            if k['name'] not in keys: order.append(k['name'])
            keys[k['name']] = k # as the checker's dict: a later rule for a key replaces the earlier
        elif t == 'END':
            assert set(b) == {'CHECK'} and 'const' not in out, where
            out['const'] = {'tensors': tensors_end(b['CHECK'], where)}
            out['end'] = [{'name': 'initialized_tensors', 'check': "sorted(s['initialized_tensors']) == sorted(tensors)",
                           'diff': ["s['initialized_tensors']", 'tensors']}]
        else:
            raise AssertionError((where, t))
    out['keys'] = [keys[n] for n in order]
    for k in out['keys']: # the checker looks alternatives up among this file's rules (a KeyError otherwise)
        for alt in k.get('or', []): assert alt in keys, (where, alt)
    for m in ('const', 'end'): # keep the member order of man 5: state, derive, keys, const, end
        if m in out: out[m] = out.pop(m)
    return out


def modern(SRC, OUT, versions):
    stored = {} # canonical text -> "training-X/name" of the stored copy
    for ver in versions:
        od = f'{OUT}/training-{ver}'
        os.makedirs(od, exist_ok=True)
        for old in glob.glob(od + '/*.json'):
            if os.path.basename(old) != 'ruleset.json': os.remove(old)
        for f in sorted(glob.glob(f'{SRC}/training_{ver}/*.yaml')):
            name = os.path.basename(f)[:-5]
            out = convert(f, ver, name)
            canon = json.dumps({k: v for k, v in out.items() if k != 'source'}, sort_keys=True)
            if canon in stored:
                out = {'format': FMT, 'source': out['source'], 'same_as': stored[canon]}
            else:
                stored[canon] = f'training-{ver}/{name}'
            open(f'{od}/{name}.json', 'w').write(json.dumps(out, indent=1) + '\n')
        print(od, len(glob.glob(od + '/*.json')), 'files')


if __name__ == '__main__':
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    SRC, OUT, VERSIONS = sys.argv[1], sys.argv[2], sys.argv[3:]
    old = [v for v in VERSIONS if v in ('1.0.0', '1.1.0')]
    for v in old: legacy(SRC, OUT, v)
    new = [v for v in VERSIONS if v not in old]
    assert new == sorted(new, key=lambda v: tuple(map(int, v.split('.')))), 'give the versions oldest first'
    if new: modern(SRC, OUT, new)
