#!/usr/bin/env python3
"""Expectations for log-check --rcp from MLCommons' own RCP checker (mlperf-logging, the version
pinned in contrib/setup-deps.sh). Test-time tool; tests/data/logcheck-newer/README.md says how the
committed files were made.

  python3 contrib/compliance/rcp_oracle.py sets CORPUS_DIR > rcp-expected.jsonl
      For every set of the corpus (a directory of result_*.txt listed in CORPUS_DIR/scores.jsonl),
      runs rcp_checker.check_directory exactly as `python3 -m mlperf_logging.rcp_checker
      --rcp_usage training --rcp_version X.Y.Z DIR` does (pruned RCPs, no --bert_train_samples),
      each set in a fresh interpreter, and writes {"set", "ruleset", "verdict": pass|fail|crash,
      "message", "norm_factor"} (null for NaN; for a crash: the exception instead of message and factor).
  python3 contrib/compliance/rcp_oracle.py stats > rcp-stats.jsonl
      For every ruleset and benchmark with RCPs: each point's RCP Mean, RCP Stdev, Min Epochs and
      Max Speedup as RCP_Checker computes them, and which points survive the pruning.
"""
import json, os, subprocess, sys

ONE = r'''
import json, sys, logging
logging.disable(logging.CRITICAL)
from mlperf_logging.rcp_checker import rcp_checker as r
d, v = sys.argv[1], sys.argv[2]
try:
    ok, msg, norm = r.check_directory(d, 'training', v, False, False, rcp_file=None, rcp_pass='pruned_rcps')
    norm = float(norm)
    print(json.dumps({"verdict": "pass" if ok else "fail", "message": msg, "norm_factor": norm if norm == norm else None}))
except BaseException as e:
    print(json.dumps({"verdict": "crash", "exception": f"{type(e).__name__}: {e}"}))
'''


def sets(corpus):
    for line in open(os.path.join(corpus, 'scores.jsonl')):
        s = json.loads(line)
        out = subprocess.run([sys.executable, '-c', ONE, os.path.join(corpus, s['set']), s['ruleset']],
                             capture_output=True, text=True, cwd='/tmp')
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps({'set': s['set'], 'ruleset': s['ruleset'], **res}), flush=True)


def stats():
    import logging
    logging.disable(logging.CRITICAL)
    from mlperf_logging.rcp_checker import rcp_checker as r
    base = os.path.dirname(r.__file__)
    dirs = [d for d in os.listdir(base) if d.startswith('training_')]
    for d in sorted(dirs, key=lambda x: [int(p) for p in x.split('_')[1].split('.')]):
        ver = d.split('_')[1]
        for f in sorted(os.listdir(os.path.join(base, d))):
            bench = f[len('rcps_'):-len('.json')]
            if bench not in r.submission_runs['training']:
                continue # the checker stops with a KeyError (dlrm)
            c = r.RCP_Checker('training', ver, bench, False)
            pruned = set(c.pruned_rcp_data)
            for name, rec in c.rcp_data.items():
                print(json.dumps({'ruleset': ver, 'benchmark': bench, 'name': name, 'bs': rec['BS'],
                                  'mean': float(rec['RCP Mean']), 'stdev': float(rec['RCP Stdev']),
                                  'min_epochs': float(rec['Min Epochs']), 'max_speedup': float(rec['Max Speedup']),
                                  'pruned': name not in pruned}))


if __name__ == '__main__':
    if len(sys.argv) >= 3 and sys.argv[1] == 'sets':
        sets(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == 'stats':
        stats()
    else:
        sys.exit(__doc__)
