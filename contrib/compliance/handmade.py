#!/usr/bin/env python3
"""Makes tests/data/logcheck-newer/handmade.tar.gz and handmade-expected.jsonl: logs of rounds
2.0-6.1 that are not in the shared corpus, each with the verdict of MLCommons' compliance checker
(the pinned mlperf-logging), so that log-check is tested on logs it was not developed against.
Test-time tool; the tarball is byte-for-byte reproducible (gzip and tar times are zero).

    python3 contrib/compliance/handmade.py CORPUS_DIR OUT_DIR

Bases: for rounds 2.0-5.1, a real passing log of the corpus, condensed (records of keys no rule
of the round names are dropped, long runs of a key keep their first and last two); for 6.0 and
6.1, which the corpus lacks, logs written here from the rules. Every base must pass the official
checker. Each base is then mutated (a required key removed, a hyperparameter changed, the seed
made a string or repeated, the last line cut, the accuracy missed, run_stop aborted, ...), and
every file is checked with
    python3 -m mlperf_logging.compliance_checker --usage training --ruleset X.Y.Z FILE
from an empty directory. handmade-expected.jsonl: file, ruleset, benchmark, mutation, source, verdict
(pass / fail / crash: a Python traceback) and the last 3 lines of the checker's output.
"""
import copy, glob, gzip, io, json, math, os, re, subprocess, sys, tarfile, tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
SHARE = os.path.join(HERE, '..', '..', 'share', 'compliance')

# (round, benchmark, corpus file) of the condensed real bases
REAL = [
    ('2.0.0', 'dlrm', 'v2.0/NVIDIA/results/dgxa100_ngc22.04_merlin_hugectr/dlrm/result_4.txt'),
    ('2.0.0', 'maskrcnn', 'v2.0/Google/results/cloud-tpu-v4-2048-TF/maskrcnn/result_1.txt'),
    ('2.1.0', 'bert', 'v2.1/MosaicML/results/8xA100_80GB-baseline/bert/result_8.txt'),
    ('2.1.0', 'rnnt', 'v2.1/NVIDIA/results/dgxa100_ngc22.04_pytorch/rnnt/result_8.txt'),
    ('3.0.0', 'gpt3', 'v3.0/Intel-HabanaLabs/results/HLS-Gaudi2-N32-PT/gpt3/result_0.txt'),
    ('3.0.0', 'ssd', 'v3.0/Intel/results/16-nodes-SPR-pytorch/ssd/result_2.txt'),
    ('3.1.0', 'stable_diffusion', 'v3.1/NVIDIA/results/eos_n8_ngc23.09_nemo_mm/stable_diffusion/result_4.txt'),
    ('3.1.0', 'dlrm_dcnv2', 'v3.1/NVIDIA/results/eos_ngc23.09_merlin_hugectr/dlrm_dcnv2/result_6.txt'),
    ('4.0.0', 'llama2_70b_lora', 'v4.0/Intel-HabanaLabs/results/HLS-Gaudi2-PT/llama2_70b_lora/result_1.txt'),
    ('4.0.0', 'resnet', 'v4.0/tinycorp/results/tinybox_red/resnet/result_3.txt'),
    ('4.1.0', 'gnn', 'v4.1/Dell/results/XE9680x8H200-SXM-141GB/gnn/result_5.txt'),
    ('4.1.0', 'stable_diffusion', 'v4.1/Google/results/cloud-tpu-v5p-128-maxdiffusion/stable_diffusion/result_1.txt'),
    ('5.0.0', 'retinanet', 'v5.0/tinycorp/results/tinybox_green/retinanet/result_1.txt'),
    ('5.0.0', 'rgat', 'v5.0/Dell/results/XE9680x8H200-SXM-141GB/rgat/result_5.txt'),
    ('5.1.0', 'llama31_8b', 'v5.1/AMD/results/MI350X_EPYC_9575F_pytorch/llama31_8b/result_9.txt'),
    ('5.1.0', 'dlrm_dcnv2', 'v5.1/University-of-Florida/results/hpg.dgxb200x8.n1/dlrm_dcnv2/result_4.txt'),
]


def rule_keys(ver):
    """Every key a rule of the ruleset names (from the converted rules in share/compliance)."""
    keys = set()
    for f in glob.glob(f'{SHARE}/training-{ver}/*.json'):
        d = json.load(open(f))
        if 'same_as' in d:
            d = json.load(open(f"{SHARE}/{d['same_as']}.json"))
        keys |= {k['name'] for k in d.get('keys', [])} | {x['from'] for x in d.get('derive', [])}
    return keys


def read_records(path):
    recs = []
    for line in open(path, encoding='latin-1'):
        if ':::MLLOG ' not in line:
            continue
        recs.append(json.loads(re.sub('.*:::MLLOG ', '', line).strip()))
    return recs


def condense(recs, keys):
    """Keeps records of rule keys; of a key seen more than 6 times, the first and last two."""
    recs = [r for r in recs if r['key'] in keys]
    # stable diffusion logs FID and CLIP as separate records joined per evaluation: keep them all
    whole = {'eval_accuracy'} if any('metric' in r['metadata'] for r in recs if r['key'] == 'eval_accuracy') else set()
    idx = {}
    for i, r in enumerate(recs):
        idx.setdefault(r['key'], []).append(i)
    drop = set()
    for k, ix in idx.items():
        if k in whole:
            continue
        if len(ix) > 6 and k not in ('weights_initialization', 'eval_accuracy'):
            drop |= set(ix[2:-2])
        if len(ix) > 6 and k == 'eval_accuracy': # keep the end, where the target is reached
            drop |= set(ix[2:-6])
    return [r for i, r in enumerate(recs) if i not in drop]


def rec(t, key, value, **md):
    return {'namespace': '', 'time_ms': t, 'event_type': 'POINT_IN_TIME', 'key': key, 'value': value,
            'metadata': {'file': 'handmade.py', 'lineno': 1, **md}}


def synth(ver, bench, hparams, evals, org='trainkit'):
    """A log from the rules: submission keys, hyperparameters, three evaluations, run_stop."""
    t = 1761000000000
    out = []
    def add(key, value, **md):
        nonlocal t
        out.append(rec(t, key, value, **md))
        t += 1000
    for k, v in [('submission_benchmark', bench), ('submission_org', org), ('submission_division', 'closed'),
                 ('submission_status', 'onprem'), ('submission_platform', '8xGPU'), ('cache_clear', True)]:
        add(k, v)
    add('init_start', None)
    if ver == '6.1.0': # mandatory disclosure from 6.1
        for k, v in [('lowest_numerical_precision_in_linear', 'bfloat16'), ('lowest_numerical_precision_in_attn', 'bfloat16'),
                     ('lowest_numerical_precision_in_comm', 'bfloat16'), ('tensor_parallelism', 1),
                     ('pipeline_parallelism', 1), ('context_parallelism', 1), ('expert_parallelism', 1),
                     ('micro_batch_size', 1), ('config_filename', 'handmade.yaml')]:
            add(k, v)
    add('seed', 1234)
    for k, v in hparams:
        add(k, v)
    add('init_stop', None)
    add('run_start', None)
    for i, (samples, acc) in enumerate(evals):
        add('block_start', None, samples_count=samples - 1, epoch_count=1, first_epoch_num=0)
        add('eval_start', None, samples_count=samples)
        add('eval_accuracy', acc, samples_count=samples, epoch_num=i + 1)
        add('eval_stop', None, samples_count=samples)
        add('block_stop', None, samples_count=samples, first_epoch_num=0)
    add('run_stop', None, status='success', samples_count=evals[-1][0])
    return out


def synth_bases():
    gbs = 16384
    ds = [('global_batch_size', gbs), ('max_sequence_length', 4096), ('opt_name', 'adamw'),
          ('opt_base_learning_rate', 2.4e-05 * (gbs / 16384) ** 0.5), ('max_steps', 12000),
          ('opt_learning_rate_warmup_steps', 4), ('opt_learning_rate_decay_steps', 11996),
          ('opt_learning_rate_decay_schedule', 'cosine with linear warmup'), ('opt_adamw_beta_1', 0.9),
          ('opt_adamw_beta_2', 0.95), ('opt_adamw_epsilon', 1e-08), ('opt_adamw_weight_decay', 0.1),
          ('opt_gradient_clip_norm', 1.0), ('moe_aux_loss_coeff', 0.01), ('gradient_accumulation_steps', 1),
          ('eval_samples', 1024), ('train_samples', 196608000)]
    first = gbs * (42 + 24576 // gbs) # 6.1.0: the first eval's samples_count
    gpt_oss = [('global_batch_size', 256), ('max_sequence_length', 8192), ('opt_name', 'adamw'),
               ('opt_base_learning_rate', 4e-4), ('opt_end_learning_rate', 4e-5), ('opt_learning_rate_warmup_steps', 100),
               ('opt_learning_rate_decay_steps', 1199900), ('opt_learning_rate_decay_schedule', 'cosine with linear warmup'),
               ('opt_adamw_beta_1', 0.9), ('opt_adamw_beta_2', 0.95), ('opt_adamw_epsilon', 1e-05),
               ('opt_adamw_weight_decay', 0.1), ('opt_gradient_clip_norm', 1.0), ('gradient_accumulation_steps', 1),
               ('eval_samples', 1024), ('max_steps', 1200000), ('train_samples', 307200000)]
    g4 = 8192
    interval = max(1, -(-int(0.001 * 2290835423) // g4)) * g4
    first4 = -(-((4480 * g4 + 135331840) // 3) // interval) * interval
    dlrmv4 = [('global_batch_size', g4), ('train_samples', 2290835423), ('eval_samples', 2058204),
              ('max_sequence_length', 4096), ('opt_name', 'Adam'), ('opt_base_learning_rate', 1e-6),
              ('opt_adam_beta_1', 0.95), ('opt_adam_beta_2', 0.999), ('opt_adam_epsilon', 1e-8),
              ('opt_weight_decay', 0.0), ('opt_gradient_clip_norm', 1.0), ('opt_sparse_name', 'RowWiseAdagrad'),
              ('opt_sparse_base_learning_rate', 1e-6), ('opt_learning_rate_warmup_steps', 24000),
              ('opt_learning_rate_warmup_start_lr', 0.0), ('eval_every_data_pct', 0.001), ('gradient_accumulation_steps', 1)]
    qg = 256
    qwen = [('global_batch_size', qg), ('max_sequence_length', 65536), ('eval_samples', 251), ('init_checkpoint_step', 0),
            ('max_steps', 100), ('opt_name', 'adamw'), ('opt_base_learning_rate', 1.0e-6 * (qg / 256) ** 0.5),
            ('opt_adamw_beta_1', 0.9), ('opt_adamw_beta_2', 0.999), ('opt_adamw_epsilon', 1e-8),
            ('opt_adamw_weight_decay', 0.0), ('opt_gradient_clip_norm', 0.125 * (256 / qg) ** 0.5),
            ('opt_learning_rate_warmup_steps', 0), ('opt_learning_rate_decay_schedule', 'constant'),
            ('generation_training_rollout_temperature', 1.0),
            ('generation_training_rollout_top_p', 1.0), ('generation_validation_rollout_temperature', 0.1),
            ('generation_validation_rollout_top_p', 0.95), ('num_prompts_per_step', 16), ('num_generations_per_prompt', 16),
            ('gradient_accumulation_steps', 1), ('train_samples', 25600)]
    qstart = qg * math.ceil(2.5 + 3840 / qg) # validation starts here and repeats every global batch
    return [
        ('6.0.0', 'deepseekv3_671b', ds, [(gbs * 40, 3.9), (gbs * 44, 3.7), (gbs * 48, 3.55)]),
        ('6.1.0', 'deepseekv3_671b', ds, [(first, 3.9), (first + gbs * 4, 3.7), (first + gbs * 8, 3.55)]),
        ('6.0.0', 'gpt_oss_20b', gpt_oss, [(256000, 3.6), (512000, 3.4), (768000, 3.3)]),
        ('6.1.0', 'gpt_oss_20b', gpt_oss, [(256000, 3.6), (512000, 3.4), (768000, 3.3)]),
        ('6.1.0', 'dlrmv4', dlrmv4, [(first4, 0.70), (first4 + interval, 0.74), (first4 + 2 * interval, 0.752)]),
        ('6.1.0', 'qwen35_397b_grpo', qwen, [(qstart, 0.6), (qstart + qg, 0.68), (qstart + 2 * qg, 0.70)]),
    ]


def dump(recs, path, crlf=False):
    nl = '\r\n' if crlf else '\n'
    with open(path, 'w', encoding='latin-1', newline='') as f:
        for r in recs:
            f.write(':::MLLOG ' + json.dumps(r) + nl)


def first_idx(recs, key):
    return next((i for i, r in enumerate(recs) if r['key'] == key), None)


def bench_keys(ver, bench):
    """The benchmark file's keys with an equality check on a number or a string (hyperparameters)."""
    f = f'{SHARE}/training-{ver}/closed_{bench}.json'
    d = json.load(open(f))
    if 'same_as' in d:
        d = json.load(open(f"{SHARE}/{d['same_as']}.json"))
    return [k['name'] for k in d['keys'] if k.get('req') == 'exactly_one' and
            any(re.fullmatch(r"v\['value'\] == ('[^']*'|[-0-9.e]+)", c) for c in k.get('check', []))]


def mutations(ver, bench, recs):
    """(name, records or text) pairs; every mutation is one a submitter could make by mistake."""
    out = []
    hp = [k for k in bench_keys(ver, bench) if first_idx(recs, k) is not None]
    if hp:
        k = hp[0]
        out.append((f'removed_{k}', [r for r in recs if r['key'] != k]))
        m = copy.deepcopy(recs)
        v = m[first_idx(m, k)]['value']
        m[first_idx(m, k)]['value'] = v * 2 if isinstance(v, (int, float)) and not isinstance(v, bool) and v else (
            v + 'x' if isinstance(v, str) else 3)
        out.append((f'changed_{k}', m))
    if len(hp) > 1: # the same key twice with different values
        k = hp[-1]
        m = copy.deepcopy(recs)
        i = first_idx(m, k)
        d = copy.deepcopy(m[i])
        d['value'] = d['value'] * 3 if isinstance(d['value'], (int, float)) and not isinstance(d['value'], bool) else 'other'
        m.insert(i + 1, d)
        out.append((f'repeated_{k}_other_value', m))
    i = first_idx(recs, 'seed')
    if i is not None:
        m = copy.deepcopy(recs)
        m[i]['value'] = str(m[i]['value'])
        out.append(('seed_as_string', m))
        m = copy.deepcopy(recs)
        d = copy.deepcopy(m[i])
        d['value'] = 7
        m.insert(i + 1, d)
        out.append(('seed_twice', m))
    out.append(('truncated_last_line', None))
    m = copy.deepcopy(recs)
    for r in m:
        if r['key'] == 'eval_accuracy':
            r['value'] = -1.0 if not isinstance(r['value'], dict) else {k: -1.0 for k in r['value']}
    out.append(('accuracy_never_reached', m))
    m = copy.deepcopy(recs)
    for r in m:
        if r['key'] == 'run_stop':
            r['metadata']['status'] = 'aborted'
    out.append(('run_stop_aborted', m))
    m = copy.deepcopy(recs)
    i, j = first_idx(m, 'init_start'), first_idx(m, 'init_stop')
    if i is not None and j is not None: # init takes 31 minutes: beyond the closed division's 30
        shift = m[i]['time_ms'] + 31 * 60 * 1000 - m[j]['time_ms']
        for r in m[j:]:
            r['time_ms'] += shift
        out.append(('init_31_minutes', m))
    m = copy.deepcopy(recs)
    i = first_idx(m, 'global_batch_size')
    if i is not None:
        m[i]['value'] = float(m[i]['value'])
        out.append(('global_batch_size_float', m))
    m = copy.deepcopy(recs)
    ev = [n for n, r in enumerate(m) if r['key'] == 'eval_accuracy']
    if ev:
        del m[ev[-1]]['metadata']
        out.append(('last_eval_without_metadata', m))
    m = copy.deepcopy(recs)
    i = first_idx(m, 'submission_division')
    m[i]['value'] = 'open'
    out.append(('open_division', m))
    m = copy.deepcopy(recs)
    i = first_idx(m, 'eval_accuracy')
    if i is not None and isinstance(m[i]['metadata'].get('samples_count'), int): # off the evaluation grid
        m[i]['metadata']['samples_count'] += 1
        out.append(('first_eval_samples_plus_one', m))
    clip = [n for n, r in enumerate(recs) if r['key'] == 'eval_accuracy' and r['metadata'].get('metric') == 'CLIP']
    if clip: # stable diffusion: an evaluation with FID but no CLIP
        out.append(('one_clip_missing', [r for n, r in enumerate(recs) if n != clip[0]]))
    out.append(('crlf', ('crlf', recs)))
    return out


def official(path, ver):
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([sys.executable, '-m', 'mlperf_logging.compliance_checker', '--usage', 'training',
                            '--ruleset', ver, '--log_output', os.path.join(d, 'cc.log'), os.path.abspath(path)],
                           capture_output=True, text=True, cwd=d)
    text = p.stdout + p.stderr
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith('** Logging output also at')]
    verdict = 'pass' if p.returncode == 0 else 'crash' if 'Traceback (most recent call last)' in text else 'fail'
    tail = [] if verdict == 'pass' else [l.replace(os.path.dirname(os.path.dirname(__import__('mlperf_logging').__file__)),
                                                    '<site-packages>') for l in lines[-3:]]
    return verdict, tail


def main(corpus, dest):
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory() as out:
        run(corpus, out, dest)


def run(corpus, out, dest):
    bases = []
    for ver, bench, src in REAL:
        bases.append((ver, bench, src, condense(read_records(os.path.join(corpus, src)), rule_keys(ver))))
    for ver, bench, hp, evals in synth_bases():
        bases.append((ver, bench, 'written from the rules', synth(ver, bench, hp, evals)))
    jobs = []
    for ver, bench, src, recs in bases:
        stem = f"{ver.replace('.', '')}_{bench}"
        base = f'{out}/{stem}__base.txt'
        dump(recs, base)
        jobs.append((base, ver, bench, 'base', src))
        for name, m in mutations(ver, bench, recs):
            path = f'{out}/{stem}__{name}.txt'
            if name == 'truncated_last_line':
                text = open(base, encoding='latin-1').read().rstrip('\n')
                open(path, 'w', encoding='latin-1', newline='').write(text[:len(text) - 40] + '\n')
            elif name == 'crlf':
                dump(recs, path, crlf=True)
            else:
                dump(m, path)
            jobs.append((path, ver, bench, name, src))
    with ThreadPoolExecutor(2) as ex:
        res = list(ex.map(lambda j: official(j[0], j[1]), jobs))
    bad = [j[0] for j, r in zip(jobs, res) if j[3] == 'base' and r[0] != 'pass']
    assert not bad, f'bases the official checker does not pass: {bad} {[r for j, r in zip(jobs, res) if j[0] in bad]}'
    with open(f'{dest}/handmade-expected.jsonl', 'w') as f:
        for (path, ver, bench, name, src), (verdict, tail) in zip(jobs, res):
            f.write(json.dumps({'file': os.path.basename(path), 'ruleset': ver, 'benchmark': bench, 'mutation': name,
                                'source': src, 'verdict': verdict, 'checker_tail': tail}) + '\n')
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode='w', format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted(j[0] for j in jobs):
            ti = tarfile.TarInfo('handmade/' + os.path.basename(path))
            data = open(path, 'rb').read()
            ti.size, ti.mtime, ti.mode = len(data), 0, 0o644
            tar.addfile(ti, io.BytesIO(data))
    with open(f'{dest}/handmade.tar.gz', 'wb') as f:
        f.write(gzip.compress(raw.getvalue(), compresslevel=9, mtime=0))
    print(len(jobs), 'files', {v: sum(r[0] == v for r in res) for v in ('pass', 'fail', 'crash')})


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
