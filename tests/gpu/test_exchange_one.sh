#!/usr/bin/env bash
# The several-ranks step on ONE GPU (train-step --force-exchange: a communicator of world size 1,
# the all-to-alls are copies, the all-reduces identities), so that its code and the hybrid
# embedding's run on a machine with one GPU, graphs included. TAP. Checks:
#   1. --force-exchange (graphs, and --no-graphs) gives the one-rank step's losses and AUCs bit for
#      bit (the same sums in the same order: only where the vectors sit differs);
#   2. --hybrid-embedding with it: the fixed exchange in CUDA graphs, eager, and the exact exchange
#      (--hybrid-capacity 0) identical; within 1e-5 of the one-rank step over the first 28 steps
#      (the replicated rows' gradients are summed in another order; later, at this learning rate,
#      such differences grow step by step, as between the backends);
#   3. the capacity chosen from one statistics batch grows (the graphs are made again): identical
#      to the exact exchange with the same replicated rows;
#   4. bf16 (the production path): hybrid graphs = eager, bit for bit; finite losses that go down;
#   5. cuda against the cpu reference, hybrid, fp32, 28 steps: within 1e-4.
# Run by tests/gpu/run with BUILD set; skips without a GPU. TK_TEST_BACKEND=cpu: a dry run.
set -u
cd "$(dirname "$0")/../.." || exit 4
BIN=$PWD/${BUILD:-build}/bin
. tests/gpu/lib.sh
GPU=${TK_TEST_BACKEND:-cuda}
skip_without_gpu
W=$(mktemp -d)
trap "rm -rf $W" EXIT
echo "1..5"
small_data "$W" 60000 7 20000
cfg=$PWD/share/workloads/dlrm/tiny.json
# lib.sh's ts, and at least 8 losses/AUCs (a run cut short would compare too little)
ts_full() {
    ts "$@" || return 1
    [ "$(wc -l <"$W/$1.vals")" -ge 8 ] || { echo "# $1: only $(wc -l <"$W/$1.vals") losses/AUCs"; return 1; }
}
same() { cmp -s "$W/$1.vals" "$W/$2.vals" || { diff "$W/$1.vals" "$W/$2.vals" | head -4 | sed "s/^/# $1 vs $2: /"; return 1; }; }
# the largest relative difference of two runs' values (same steps) up to step $3 (default all),
# or "x" when the steps differ
worst() {
    paste -d' ' "$W/$1.vals" "$W/$2.vals" | awk -v last="${3:-1e18}" '$2 > last {next} $2 != $5 {bad = 1}
        {d = $3 - $6; if (d < 0) d = -d;
        r = d / ($3 < 0 ? -$3 : $3); if (r > m) m = r} END {if (bad || NR == 0) print "x"; else printf "%.3g", m + 0}'
}
within() { [ "$1" != x ] && awk -v w="$1" -v t="$2" 'BEGIN {exit !(w <= t)}'; }
hyfield() { # name key: the result's hybrid_embedding.key
    sed -n 's/.*"type":"result".*"hybrid_embedding":{\([^}]*\)}.*/\1/p' "$W/$1.jsonl" | tr ',' '\n' |
        sed -n "s/^\"$2\":\\(.*\\)/\\1/p"
}

P=--no-hybrid-embedding # the plain step (the hybrid embedding is the default)
if ts_full one "$GPU" $P && ts_full fx "$GPU" --force-exchange $P && ts_full fxeager "$GPU" --force-exchange --no-graphs $P &&
    same one fx && same one fxeager; then
    echo "ok 1 - --force-exchange (graphs, eager) = the one-rank step: $(wc -l <"$W/one.vals") losses/AUCs identical"
else
    echo "not ok 1 - --force-exchange differs from the one-rank step"
fi

H=(--force-exchange --hybrid-embedding)
if ts_full hy "$GPU" "${H[@]}" && ts_full hyeager "$GPU" "${H[@]}" --no-graphs && ts_full hyexact "$GPU" "${H[@]}" --hybrid-capacity 0 &&
    same hy hyeager && same hy hyexact; then
    w=$(worst one hy 28)
    fixed=$(hyfield hy fixed_batches) batches=$(hyfield hy batches)
    if within "$w" 1e-5 && [ "${fixed:-0}" -gt 0 ] && [ "$fixed" = "$batches" ] && [ "$(hyfield hyexact fixed_batches)" = 0 ]; then
        echo "ok 2 - hybrid: fixed in graphs = eager = exact ($fixed of $batches batches fixed); vs one rank $w (28 steps)"
    else
        echo "not ok 2 - hybrid vs one rank $w over 28 steps (<= 1e-5?), fixed batches ${fixed:-?} of ${batches:-?}"
    fi
else
    echo "not ok 2 - hybrid: graphs, eager and exact differ (or a run failed)"
fi

if ts_full grow "$GPU" "${H[@]}" --hybrid-stat-batches 1 &&
    ts_full growexact "$GPU" "${H[@]}" --hybrid-stat-batches 1 --hybrid-capacity 0 && same grow growexact; then
    g=$(hyfield grow capacity_growths)
    if [ "${g:-0}" -gt 0 ]; then
        echo "ok 3 - capacity from 1 statistics batch grew $g time(s): identical to the exact exchange"
    else
        echo "not ok 3 - the capacity did not grow (growths '${g:-}'): the case does not test growth"
    fi
else
    echo "not ok 3 - a growing capacity differs from the exact exchange (or the run failed)"
fi

if [ "$GPU" = cpu ]; then echo "ok 4 # SKIP bf16 is cuda only"; elif ts_full hybf "$GPU" "${H[@]}" --precision bf16 &&
    ts_full hybfeager "$GPU" "${H[@]}" --precision bf16 --no-graphs && same hybf hybfeager; then
    if fl=$(loss_falls hybf); then
        echo "ok 4 - hybrid bf16: graphs = eager; loss $fl"
    else
        echo "not ok 4 - hybrid bf16 loss $fl"
    fi
else
    echo "not ok 4 - hybrid bf16: graphs and eager differ (or a run failed)"
fi

if ts_full hycpu cpu "${H[@]}" --max-steps 28 --log-every 4 && ts_full hycuda "$GPU" "${H[@]}" --max-steps 28 --log-every 4; then
    w=$(worst hycpu hycuda)
    if within "$w" 1e-4; then echo "ok 5 - hybrid cuda vs cpu fp32, 28 steps: max rel diff $w"
    else echo "not ok 5 - hybrid cuda vs cpu fp32, 28 steps: max rel diff $w > 1e-4"; fi
    echo "# table exchange step on one GPU: = one-rank step (identical); hybrid fixed = eager = exact; vs one rank $(worst one hy 28) (28 steps); cuda vs cpu $w"
else
    echo "not ok 5 - a 28-step hybrid run failed"
fi
