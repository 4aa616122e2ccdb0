#!/usr/bin/env bash
# train-step with the BERT tiny config end to end on the cuda backend, TAP. Checks:
#   1. graphs and --no-graphs give the same losses and accuracies, bit for bit;
#   2. cuda (fp32) against the cpu reference over 16 steps: the losses agree to 1e-3 relative
#      (dropout on: both backends draw the same masks);
#   3. --precision bf16 trains to the tiny config's target (masked-LM accuracy 0.72 in one epoch);
#   4. --profile prints the step's phases.
# Data: contrib/synth/bert_tks.py (python3, numpy, zstd), or the .tks files in $TK_BERT_DATA
# (train.tks, eval.tks) when set. Run by tests/gpu/run with BUILD set; skips without a GPU.
set -u
cd "$(dirname "$0")/../.." || exit 4
BIN=$PWD/${BUILD:-build}/bin
. tests/gpu/lib.sh
GPU=${TK_TEST_BACKEND:-cuda}
skip_without_gpu
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
echo "1..4"
if [ -n "${TK_BERT_DATA:-}" ]; then
    cp "$TK_BERT_DATA/train.tks" "$TK_BERT_DATA/eval.tks" "$W/"
else
    g="contrib/synth/bert_tks.py --seq-len 24 --max-pred 4 --vocab 32 --topic-prob 0.9"
    python3 $g -o "$W/train.tks" --records 16384 --seed 1 && python3 $g -o "$W/eval.tks" --records 512 --seed 2 ||
        { echo "Bail out! contrib/synth/bert_tks.py failed (python3, numpy, zstd)"; exit 1; }
fi
cfg=$PWD/share/workloads/bert/tiny.json

# bt NAME BACKEND ARGS...: one run; $W/NAME.vals holds "progress STEP LOSS" and "eval STEP ACC".
bt() {
    local name=$1 be=$2
    shift 2
    "$BIN/train-step" -c "$cfg" -t "$W/train.tks" -e "$W/eval.tks" --backend "$be" --log-every 8 "$@" \
        >"$W/$name.jsonl" 2>"$W/$name.err"
    local rc=$?
    if [ "$rc" -gt 1 ]; then
        echo "# $name: train-step exit $rc: $(tail -3 "$W/$name.err" | tr '\n' ' ')"
        return 1
    fi
    sed -n 's/^{"type":"progress".*"step":\([0-9]*\).*"loss":\([^,}]*\).*/progress \1 \2/p;
            s/^{"type":"eval".*"step":\([0-9]*\).*"mlm_accuracy":\([^,}]*\).*/eval \1 \2/p' "$W/$name.jsonl" >"$W/$name.vals"
    return 0
}

never="--set target.mlm_accuracy=0.9999"
if bt graphs "$GPU" $never && bt eager "$GPU" $never --no-graphs && cmp -s "$W/graphs.vals" "$W/eager.vals" &&
    [ "$(wc -l <"$W/graphs.vals")" -ge 40 ]; then
    echo "ok 1 - graphs and no graphs: $(wc -l <"$W/graphs.vals") losses/accuracies identical"
else
    echo "not ok 1 - graphs vs no graphs differ"
    diff "$W/graphs.vals" "$W/eager.vals" 2>&1 | head -5 | sed 's/^/# /'
fi

if bt cpu cpu $never --max-steps 16 --threads 4 && bt cuda16 "$GPU" $never --max-steps 16 &&
    [ "$(grep -c progress "$W/cpu.vals")" = 2 ]; then
    worst=$(paste -d' ' "$W/cpu.vals" "$W/cuda16.vals" |
        awk '{d = $3 - $6; if (d < 0) d = -d; r = d / ($3 < 0 ? -$3 : $3); if (r > m) m = r} END {printf "%.3g", m + 0}')
    if awk -v w="$worst" 'BEGIN {exit !(w <= 1e-3)}'; then
        echo "ok 2 - cuda vs cpu fp32, 16 steps: max rel diff of the losses and the accuracy $worst"
    else
        echo "not ok 2 - cuda vs cpu fp32, 16 steps: max rel diff $worst > 1e-3"
        paste -d' ' "$W/cpu.vals" "$W/cuda16.vals" | sed 's/^/# /'
    fi
    echo "# table bert train-step e2e: graphs = eager (identical); cuda vs cpu rel $worst"
else
    echo "not ok 2 - a 16-step run failed"
fi

if [ "$GPU" = cpu ]; then echo "ok 3 # SKIP bf16 is cuda only"; elif bt bf16 cuda --precision bf16; then
    acc=$(awk '$1 == "eval" {v = $3} END {print v}' "$W/bf16.vals")
    if grep -q '"type":"result","workload":"bert","reached":true' "$W/bf16.jsonl"; then
        echo "ok 3 - bf16 reaches the tiny target: accuracy $acc, loss $(loss_falls bf16)"
    else
        echo "not ok 3 - bf16 did not reach the tiny target: accuracy $acc"
    fi
else
    echo "not ok 3 - bf16 run failed"
fi

if bt prof "$GPU" --max-steps 6 --profile $never && grep -q '"type":"profile".*"attention_fwd".*"optimizer"' "$W/prof.jsonl"; then
    echo "ok 4 - --profile: $(grep '"type":"profile"' "$W/prof.jsonl" | cut -c1-200)"
else
    echo "not ok 4 - no profile line with the step's phases"
fi
