#!/usr/bin/env bash
# Why is torch.compile slower than eager for BERT-large at all-512 (issue 34, item 1)? Runs
# contrib/peers/bert_perf.py at batch 32, 512 real tokens, 76 masked positions, in a matrix of
# modes (eager, compile, autotune = max-autotune-no-cudagraphs) and attention dropout (0.1, 0),
# with dynamo's counters (graph breaks, graphs) and the top CUDA kernels of a profiled step;
# every JSON line into $OUT (default /tmp/bert-peer), then a table: mode, attn dropout, seqs/s,
# ms/step, compile s, graph breaks, unique graphs.
#   contrib/bench/bert_peer.sh [MODES="eager compile autotune"] [DROPS="0.1 0"] [BATCH=32]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
OUT=${OUT:-/tmp/bert-peer}
mkdir -p "$OUT"
PY=${PY:-python3}
for drop in ${DROPS:-0.1 0}; do
    for mode in ${MODES:-eager compile autotune}; do
        "$PY" contrib/peers/bert_perf.py --mode "$mode" --batch "${BATCH:-32}" --seq 512 --max-pred 76 \
            --attn-dropout "$drop" --explain --trace 12 >"$OUT/$mode-$drop.json" 2>"$OUT/$mode-$drop.err" ||
            echo "bert_perf.py --mode $mode --attn-dropout $drop failed: $(tail -3 "$OUT/$mode-$drop.err")" >&2
    done
done
"$PY" - "$OUT" <<'P'
import glob, json, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    try:
        r = json.loads(open(f).read().strip().splitlines()[-1])
    except Exception:
        continue
    d = r.get("dynamo", {})
    gb = sum(d.get("graph_break", {}).values()) if d else "-"
    ug = d.get("stats", {}).get("unique_graphs", "-") if d else "-"
    rows.append((r["impl"], r["attn_dropout"], r["seqs_per_s"], r["ms_per_iter_median"], r["compile_s"], gb, ug))
    print("top kernels of", r["impl"], "attn_dropout", r["attn_dropout"])
    for k in r.get("top_kernels", []):
        print("   %8.2f ms/step %5d calls  %s" % (k[2], k[1], k[0]))
print("%-16s %5s %9s %9s %9s %6s %6s" % ("impl", "adrop", "seqs/s", "ms/step", "compile_s", "breaks", "graphs"))
for r in rows:
    print("%-16s %5.2f %9.1f %9.2f %9.1f %6s %6s" % r)
P
