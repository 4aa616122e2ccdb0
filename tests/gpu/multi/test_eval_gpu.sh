#!/usr/bin/env bash
# Evaluation on a dedicated GPU (the layout of NVIDIA's Mask R-CNN and 3D U-Net submissions), TAP:
# train-step on GPU 0 writes a checkpoint at each eval point into a directory and reads the
# results back; `evaluate --follow` on GPU 1 evaluates each new checkpoint and writes its result;
# training stops when a result reaches the target. Checks:
#   1. the run reaches the target through the evaluator, both processes end by themselves (STOP),
#      and every checkpoint was evaluated;
#   2. the MLLOG file passes log-check (ruleset 1.1.0) with the evaluator's accuracies in it;
#   3. the evaluator's AUC for a checkpoint equals an in-process evaluation of the same
#      checkpoint (evaluate --checkpoint on GPU 0).
# BUILD=dir tests/gpu/multi/test_eval_gpu.sh (tests/gpu/multi/run.sh runs it). Skips with < 2 GPUs.
set -u
cd "$(dirname "$0")/../../.." || exit 4
BIN=$PWD/${BUILD:-build}/bin
. tests/gpu/lib.sh
GPU=${TK_TEST_BACKEND:-cuda} # cpu: a dry run of the plumbing
need_gpus 2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
echo "1..3"
small_data "$W" 100000 1 65536
mkdir -p "$W/ev"
CUDA_VISIBLE_DEVICES=1 timeout -k 5 300 "$BIN/evaluate" --follow "$W/ev" --eval "$W/eval.tks" -b "$GPU" \
    --target 0.8025 --poll 0.05 >"$W/follow.jsonl" 2>"$W/follow.err" &
epid=$!
CUDA_VISIBLE_DEVICES=0 timeout -k 5 300 "$BIN/train-step" -c share/workloads/dlrm/tiny.json -t "$W/train.tks" \
    --eval-dir "$W/ev" -b "$GPU" --mllog "$W/dlrm.mllog" --log-every 0 >"$W/train.jsonl" 2>"$W/train.err"
trc=$?
wait "$epid"
erc=$?
nck=$(ls "$W"/ev/step-*.safetensors 2>/dev/null | wc -l)
nres=$(ls "$W"/ev/step-*.eval.json 2>/dev/null | wc -l)
if [ "$trc" = 0 ] && [ "$erc" = 0 ] && grep -q '"reached":true' "$W/train.jsonl" && [ "$nck" -gt 0 ] &&
    [ "$nck" = "$nres" ]; then
    echo "ok 1 - target reached through the evaluator on GPU 1: $nck checkpoints, $nres results, both exited 0"
else
    echo "not ok 1 - train-step exit $trc, evaluate exit $erc, $nck checkpoints, $nres results"
    tail -3 "$W/train.err" "$W/follow.err" | sed 's/^/# /'
fi
if TRAINKIT_SHARE=${TRAINKIT_SHARE:-$PWD/share} "$BIN/log-check" --ruleset 1.1.0 "$W/dlrm.mllog" >"$W/lc.txt" 2>&1 && grep -q eval_accuracy "$W/dlrm.mllog"; then
    echo "ok 2 - the MLLOG passes log-check: $(tail -1 "$W/lc.txt")"
else
    echo "not ok 2 - log-check: $(tail -2 "$W/lc.txt")"
fi
last=$(ls "$W"/ev/step-*.eval.json 2>/dev/null | sort -t- -k2 -n | tail -1)
ck=${last%.eval.json}.safetensors
a=$(sed -n 's/.*"auc":\([^,}]*\).*/\1/p' "$last" 2>/dev/null)
b=$(CUDA_VISIBLE_DEVICES=0 "$BIN/evaluate" --checkpoint "$ck" --eval "$W/eval.tks" -b "$GPU" 2>/dev/null |
    sed -n 's/.*"auc":\([^,}]*\).*/\1/p')
if [ -n "$a" ] && [ "$a" = "$b" ]; then
    echo "ok 3 - $(basename "$ck"): the dedicated GPU's AUC $a = evaluate --checkpoint's"
else
    echo "not ok 3 - $(basename "$ck"): follow AUC '$a' vs checkpoint AUC '$b'"
fi
