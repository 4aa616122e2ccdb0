#!/usr/bin/env bash
# The device measurements behind contrib/bench/NOTES.md, in one invocation on the GPU
# machine (builds nothing: make BUILD=... all first):
#   1. make check-gpu's suite (tests/gpu/run);
#   2. the DLRM step alone (test_dlrm_step step_throughput_bench: one batch resident on the GPU,
#      no loader) at the capped shape (global batch 65,536, tables capped at 4,000,000 rows, bf16
#      tables), fp32, tf32 and bf16 (--precision), graph and eager, with the non-GEMM ops timed alone; then at
#      the full table sizes (187.8 M rows) in tf32;
#   3. train-step end to end (loader included) at the capped shape on 2.7 M synthetic rows:
#      tf32 with graphs and 8 loader threads (the default), 1 loader thread, tf32 --no-graphs,
#      fp32; samples/s of the last 10 steps.
#   BUILD=build-gpu2 [PARTS="check step full e2e"] tests/gpu/bench-dlrm.sh
set -u
cd "$(dirname "$0")/../.." || exit 4
B=${BUILD:-build}
BIN=$PWD/$B/bin
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
PARTS=${PARTS:-check step full e2e}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [[ " $PARTS " == *" check "* ]]; then
    echo "== check-gpu"
    BUILD=$B tests/gpu/run | grep -vE '^    (ok|#|1\.\.)' | tail -n 60
fi
if [[ " $PARTS " == *" step "* ]]; then
    echo "== step alone, capped"
    TK_BENCH=1 "$B"/tests/gpu/test_dlrm_step step_throughput_bench | grep -E 'table|not ok'
fi
if [[ " $PARTS " == *" full "* ]]; then
    echo "== step alone, full tables, tf32"
    t0=$(date +%s)
    TK_BENCH=1 TK_BENCH_CAP=40000000 TK_BENCH_PRECISION=tf32 "$B"/tests/gpu/test_dlrm_step step_throughput_bench |
        grep -E 'table|not ok'
    echo "(took $(($(date +%s) - t0)) s with the host-side initialization of 24 G table entries)"
fi
[[ " $PARTS " == *" e2e "* ]] || exit 0
echo "== train-step end to end, capped"
t0=$(date +%s)
"$BIN"/prep synth criteo --days 1 --rows-per-day 2700000 --seed 1 -o "$W/raw" >/dev/null &&
    "$BIN"/prep criteo --max-ind-range 4000000 -o "$W/train.tks" "$W/raw/day_0" &&
    "$BIN"/prep synth criteo --days 1 --rows-per-day 100000 --seed 2 -o "$W/rawe" >/dev/null &&
    "$BIN"/prep criteo --max-ind-range 4000000 -o "$W/eval.tks" "$W/rawe/day_0" || exit 1
echo "(data: $(($(date +%s) - t0)) s)"
for mode in "tf32" "tf32 --loader-threads 1" "tf32 --no-graphs" "fp32"; do
    # shellcheck disable=SC2086 # mode is words on purpose
    "$BIN"/train-step -c share/workloads/dlrm/config.json -t "$W/train.tks" -e "$W/eval.tks" -b cuda \
        --set model.max_table_rows=4000000 --set train.global_batch_size=65536 --set model.table_dtype=bf16 \
        --set model.interaction_width=480 --precision $mode --max-steps 40 --log-every 10 \
        --eval-every 1000000000000 --no-hybrid-embedding >"$W/out" 2>"$W/err"
    echo "train-step --precision $mode: exit $? $(grep '"progress"' "$W/out" | tail -1 | grep -o '"samples_per_s":[0-9.]*')" \
        "$(grep '"progress"' "$W/out" | tail -1 | grep -o '"loss":[^,]*')"
    grep -v '^$' "$W/err" | tail -3
done
