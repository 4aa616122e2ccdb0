#!/usr/bin/env bash
# What the several-ranks step costs on ONE GPU, without any traffic: the one-rank step against
# train-step --force-exchange (the exchange step over a communicator of world size 1: the
# all-to-alls become device copies) and against --force-exchange --hybrid-embedding (the plan,
# the packed lookups, the replica and its update, the scatter/gather around the exchange).
# The difference is the compute the 2-GPU step adds besides the transfers themselves.
# Usage: BUILD=build contrib/bench/exchange_one.sh [OUTDIR]
# Env: B (batch, default 65536), STEPS (default 60), TABLE_ROWS (default 4000000: run.sh's mlperf
# table cap), PREC (default bf16). Prints one '# table' line per run, then the profile lines.
set -u
cd "$(dirname "$0")/../.." || exit 4
BIN=$PWD/${BUILD:-build}/bin
B=${B:-65536}
STEPS=${STEPS:-60}
ROWS=${TABLE_ROWS:-4000000}
PREC=${PREC:-bf16}
W=${1:-$(mktemp -d)}
mkdir -p "$W"
rows=$(((STEPS + 2) * B))
"$BIN/prep" synth criteo --days 1 --rows-per-day "$rows" --seed 5 -o "$W/raw" >/dev/null &&
    "$BIN/prep" criteo --max-ind-range "$ROWS" -o "$W/train.tks" "$W/raw/day_0" >/dev/null &&
    "$BIN/prep" synth criteo --days 1 --rows-per-day 60000 --seed 6 -o "$W/rawe" >/dev/null &&
    "$BIN/prep" criteo --max-ind-range "$ROWS" -o "$W/eval.tks" "$W/rawe/day_0" >/dev/null || {
    echo "prep failed" >&2
    exit 3
}
rm -rf "$W/raw" "$W/rawe"
cfg=$PWD/share/workloads/dlrm/synth-mlperf.json
run() { # name args...
    local name=$1
    shift
    "$BIN/train-step" -c "$cfg" -t "$W/train.tks" -e "$W/eval.tks" --set target.auc=0.9999 \
        --set model.table_sizes=data --set model.max_table_rows="$ROWS" --precision "$PREC" \
        --set train.global_batch_size="$B" --max-steps "$STEPS" --log-every 10 --eval-every 1000000000 \
        "$@" >"$W/$name.jsonl" 2>"$W/$name.err"
    local rc=$?
    [ "$rc" -le 1 ] || { echo "# $name: exit $rc: $(tail -2 "$W/$name.err" | tr '\n' ' ')"; return 1; }
}
# the median samples/s of the progress lines after the first (which includes the capture)
rate() {
    sed -n 's/^{"type":"progress".*"samples_per_s":\([0-9.e+]*\).*/\1/p' "$W/$1.jsonl" | tail -n +2 | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else printf "%.0f", v[int((NR + 1) / 2)] }'
}
H=(--force-exchange --hybrid-embedding)
P=--no-hybrid-embedding # the plain step (the hybrid embedding is train-step's default)
run one $P && run fx --force-exchange $P && run hy "${H[@]}" || exit 1
run one_p --profile --max-steps 30 $P && run fx_p --force-exchange --profile --max-steps 30 $P &&
    run hy_p "${H[@]}" --profile --max-steps 30 || exit 1
r1=$(rate one)
for n in one fx hy; do
    r=$(rate $n)
    echo "# table exchange_one $n ($PREC, batch $B, tables <= $ROWS rows): $r samples/s, $(awk -v a="$r1" -v b="$r" \
        'BEGIN { printf "%.3f", b / a }') of the one-rank step"
done
sed -n 's/^{"type":"result".*"hybrid_embedding":{\([^}]*\)}.*/# hybrid: \1/p' "$W/hy.jsonl"
for n in one_p fx_p hy_p; do echo "# profile $n: $(grep '"type":"profile"' "$W/$n.jsonl")"; done
