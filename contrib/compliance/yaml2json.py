#!/usr/bin/env python3
"""Converts the rule YAML files of MLCommons' compliance checker (package mlperf-logging) into
trainkit's JSON rule format (man 5 trainkit-compliance), which log-check reads from share/compliance.

    python3 contrib/compliance/yaml2json.py SRC_DIR OUT_DIR VERSION...
    e.g. SRC_DIR=$(python3 -c 'import mlperf_logging,os;print(os.path.dirname(mlperf_logging.__file__))')/compliance_checker
         python3 contrib/compliance/yaml2json.py $SRC_DIR share/compliance 1.0.0 1.1.0

This is how share/compliance/training-{1.0.0,1.1.0} were made. A new ruleset is added the same
way and then checked against logs of that round; constructs this script does not know stop it
with an assertion, so nothing is silently dropped. Needs PyYAML (a test-time tool only).
"""
import yaml, json, glob, os, re, sys
if len(sys.argv) < 4:
    sys.exit(__doc__)
SRC, OUT, VERSIONS = sys.argv[1], sys.argv[2], sys.argv[3:]
def expr(x):
    x=' '.join(x.strip().split()) if '\n' in x.strip() and 'sorted' not in x else x.strip()
    x=x.replace('ll.timestamp','ts').replace('math.log2(','log2(').replace("float('inf')",'inf')
    x=re.sub(r"isinstance\((.*), int\)", r"is_int(\1)", x)
    x=re.sub(r'\bTrue\b','true',x); x=re.sub(r'\bFalse\b','false',x); x=re.sub(r'\bNone\b','null',x)
    return x
def lst(v): return v if isinstance(v,list) else [v]
for ver in VERSIONS:
    d=f'{SRC}/training_{ver}'
    od=f'{OUT}/training-{ver}'; os.makedirs(od,exist_ok=True)
    for f in sorted(glob.glob(d+'/*.yaml')):
        name=os.path.basename(f)[:-5]
        c=yaml.load(open(f),Loader=yaml.BaseLoader) or []
        out={'format':'trainkit-compliance/1','source':f'mlcommons/logging training_{ver}/{name}.yaml'}
        keys=[]; end=[]
        weights = any(list(r)[0]=='END' for r in c)
        for rec in c:
            (t,b),=rec.items()
            if t=='BEGIN':
                code=b['CODE'].strip(); assert code.startswith('s.update(') ; code=code[len('s.update('):-1]
                code=code.replace("'",'"').replace('False','false').replace('True','true')
                code=re.sub(r',(\s*)\}', r'\1}', code)
                out['state']=json.loads(code)
            elif t=='KEY':
                k={'name':b['NAME']}
                req=b.get('REQ')
                if req:
                    m=re.match(r'AT_LEAST_ONE_OR\((.*)\)',req)
                    if m: k['req']='at_least_one_or'; k['or']=[s.strip() for s in m.group(1).split(',')]
                    else: k['req']={'EXACTLY_ONE':'exactly_one','AT_LEAST_ONE':'at_least_one','OPTIONAL':'optional'}[req]
                if 'CHECK' in b: k['check']=[expr(x) for x in lst(b['CHECK'])]
                if 'POST' in b:
                    p=b['POST'].strip()
                    m=re.match(r"enqueue_config\('training_(.*)/(.*)\{\}(.*)\.yaml'\.format\(v\['value'\]\)\)$",p)
                    if m: k['include']=f'training-{m.group(1)}/{m.group(2)}{{value}}{m.group(3)}'
                    else: k['post']=[expr(s) for s in p.split(';')]
                if 'ATLEAST_ONE_CHECK' in b: k['at_least_one_check']=expr(b['ATLEAST_ONE_CHECK'])
                for extra in b:
                    assert extra in ('NAME','REQ','CHECK','POST','ATLEAST_ONE_CHECK'), (f,extra)
                if weights and k['name']=='weights_initialization': k['strict_only']='WEIGHTS_INIT'
                keys.append(k)
            elif t=='END':
                chk=b['CHECK'].strip()
                m=re.match(r"sorted\(s\['initialized_tensors'\]\) == sorted\((\[.*\])\)$",chk,re.S)
                assert m, f
                lst_=eval(m.group(1))
                out.setdefault('const',{})['tensors']=lst_
                end.append({'name':'initialized_tensors','check':"sorted(s['initialized_tensors']) == sorted(tensors)", 'diff': ["s['initialized_tensors']", 'tensors'],
                            'strict_only':'WEIGHTS_INIT'})
            else: raise Exception(t)
        const=out.pop('const',None)
        out['keys']=keys
        if const: out['const']=const
        if end: out['end']=end
        s=json.dumps(out,indent=1)
        open(f'{od}/{name}.json','w').write(s+'\n')
        print(od,name,len(keys))
