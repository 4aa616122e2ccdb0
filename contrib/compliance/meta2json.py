#!/usr/bin/env python3
"""Writes the per-ruleset facts log-check needs besides the rules, from MLCommons' mlperf-logging
package, as data (man 5 trainkit-compliance, "RULESET FILE" and "RCP FILES"):

  share/compliance/training-X.Y.Z/ruleset.json   the round's benchmarks: result files per set and
                                                 how many the olympic mean drops (result_summarizer,
                                                 benchmark_meta), how rcp_checker reads the point of
                                                 convergence from a log, and its RCP file
  share/compliance/training-X.Y.Z/rcp/NAME.json  the reference convergence points (rcp_checker's
                                                 rcps_NAME.json, converted; equal files stored once)

    python3 contrib/compliance/meta2json.py PKG_DIR OUT_DIR VERSION...
    e.g. PKG_DIR=$(python3 -c 'import mlperf_logging,os;print(os.path.dirname(mlperf_logging.__file__))')

What the official tools hard-code in Python is written here as data, each with the line it comes
from, so log-check's C code names no benchmark:
  result_summarizer._compute_strong_score_standalone: max_dropped_scores = 4 if unet3d else 1
  rcp_checker.read_submission_file: stable_diffusion joins FID and CLIP per evaluation point
      ("step_num" in 3.1.0, else "samples_count") and converges at the first point with
      FID <= 90.0 and CLIP >= 0.15; a fixed set of benchmarks converge at the samples_count of
      their last evaluation; all others at round(epoch_num, 3) of the last evaluation
  rcp_checker._process_raw_rcp_data: llama2_70b_lora and flux1 list "samples to converge"
  rcp_checker._eval_submission_record: from 5.0.0, llama31_405b's Max Speedup is
      RCP Mean / (Min Epochs - 46080)
"""
import json, os, sys, importlib.util

FMT_SET, FMT_RCP = 'trainkit-ruleset/1', 'trainkit-rcp/1'


def load(pkg, mod):
    spec = importlib.util.spec_from_file_location(mod, os.path.join(pkg, *mod.split('.')) + '.py')
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def vtuple(v): return tuple(int(x) for x in v.split('.'))


# rcp_checker.read_submission_file: benchmarks whose convergence is the samples_count of the last eval
SAMPLES_COUNT = {"llama2_70b_lora", "flux1", "llama31_405b", "llama31_8b", "gpt_oss_20b", "deepseekv3_671b",
                 "qwen35_397b_grpo", "dlrmv4"}


def convergence(bench, ver):
    if bench == 'stable_diffusion':
        return {'aggregate': 'step_num' if ver == '3.1.0' else 'samples_count', 'metric': 'metric',
                'converged': "v['FID'] <= 90.0 and v['CLIP'] >= 0.15"}
    if bench in SAMPLES_COUNT:
        return {'metadata': 'samples_count'}
    return {'metadata': 'epoch_num', 'round': 3}


def main(pkg, out, versions):
    meta = load(pkg, 'benchmark_meta')
    rcpmod = load(pkg, 'rcp_checker.rcp_checker')
    counts = meta.get_result_file_counts('training')
    try:
        import importlib.metadata
        version = 'mlperf-logging ' + importlib.metadata.version('mlperf-logging')
    except Exception:
        version = 'mlperf-logging'
    stored = {} # canonical RCP content -> stored name
    for ver in versions:
        od = f'{out}/training-{ver}'
        os.makedirs(f'{od}/rcp', exist_ok=True)
        for old in os.listdir(f'{od}/rcp'): os.remove(f'{od}/rcp/{old}')
        benches = {}
        allowed = set(meta.get_allowed_benchmarks('training', ver))
        # rcp_checker also judges benchmarks the round no longer has, where it still ships RCPs
        # (5.1.0: bert): those are listed with "rcp_only"
        rcp_only = {f[len('rcps_'):-len('.json')] for f in os.listdir(f'{pkg}/rcp_checker/training_{ver}')
                    if f.startswith('rcps_')} - allowed
        for b in sorted(allowed | rcp_only):
            e = {'runs': counts[b], 'drop': 4 if b == 'unet3d' else 1}
            if b in rcp_only: e['rcp_only'] = True
            src = f'{pkg}/rcp_checker/training_{ver}/rcps_{b}.json'
            # rcp_checker stops with a KeyError for a benchmark it has no run count for (dlrm,
            # whose RCP files it still ships): those have no usable RCPs
            if os.path.exists(src) and b in rcpmod.submission_runs['training']:
                assert rcpmod.submission_runs['training'][b] == counts[b], b
                raw = json.load(open(src))
                unit = 'samples to converge' if b in ('llama2_70b_lora', 'flux1') else 'Epochs to converge'
                pts = []
                names = {r['Benchmark'] for r in raw.values()} # 3.1.0's stable diffusion RCPs say 'sd'
                assert len(names) == 1, src
                for name, r in raw.items():
                    pts.append({'name': name, 'bs': r['BS'], 'converge': r[unit]})
                # compute_rcp_stats and _eval_submission_record: 4 if record['Benchmark'] == 'unet3d' else 1
                doc = {'format': FMT_RCP, 'source': f'mlcommons/logging rcp_checker/training_{ver}/rcps_{b}.json',
                       'benchmark': b, 'drop': 4 if names == {'unet3d'} else 1, 'points': pts}
                canon = json.dumps({k: v for k, v in doc.items() if k != 'source'}, sort_keys=True)
                if (b, canon) in stored:
                    doc = {'format': FMT_RCP, 'source': doc['source'], 'same_as': stored[(b, canon)]}
                else:
                    stored[(b, canon)] = f'training-{ver}/rcp/{b}'
                open(f'{od}/rcp/{b}.json', 'w').write(json.dumps(doc, indent=1) + '\n')
                e['rcp'] = b
                if b == 'llama31_405b' and vtuple(ver) >= (5, 0, 0):
                    e['rcp_min_offset'] = 46080
            e['convergence'] = convergence(b, ver)
            benches[b] = e
        if not os.listdir(f'{od}/rcp'): os.rmdir(f'{od}/rcp')
        doc = {'format': FMT_SET, 'source': f'{version}: benchmark_meta.py, result_summarizer.py, rcp_checker',
               'usage': 'training', 'version': ver, 'benchmarks': benches,
               'convergence_default': convergence(None, ver)}
        open(f'{od}/ruleset.json', 'w').write(json.dumps(doc, indent=1) + '\n')
        print(od, len(benches), 'benchmarks,', sum('rcp' in e for e in benches.values()), 'with RCPs')


if __name__ == '__main__':
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
