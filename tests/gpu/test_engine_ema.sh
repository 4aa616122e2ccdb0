#!/usr/bin/env bash
# The weights' moving average (optimizer.ema, kernels/ema.cu inside the captured step) and the
# warmup_hold_exp schedule on the cuda backend, with the mlp workload, TAP:
#   1. LAMB + warmup_hold_exp + ema 0.9: graphs = --no-graphs bit for bit (losses, the evaluations
#      on the average, the step-60 checkpoint with its ema tensors);
#   2. cuda (fp32) against the cpu reference over 24 steps: losses and the AUC on the average
#      within 1e-4;
#   3. evaluate of the checkpoint with its ema tensors in the weights' place
#      (tests/cli/ema_swap.py) gives the AUC training evaluated in process.
# Run by tests/gpu/run with BUILD set; skips without a GPU.
set -u
cd "$(dirname "$0")/../.." || exit 4
BIN=$PWD/${BUILD:-build}/bin
. tests/gpu/lib.sh
GPU=${TK_TEST_BACKEND:-cuda} # cpu: a dry run of this script's plumbing
skip_without_gpu
W=$(mktemp -d)
trap "rm -rf $W" EXIT
echo "1..3"
small_data "$W" 40000 7 1024
cfg=$PWD/share/workloads/mlp/tiny.json
# 40000 / 256 = 156 updates an epoch: a warm-up epoch, then hold (the first 60 steps warm up)
EMA='optimizer={"name":"lamb","base_lr":0.02,"weight_decay":0.01,"max_grad_norm":1.0,"lr_schedule":"warmup_hold_exp","warmup_epochs":1,"hold_epochs":1,"gamma":0.9,"ema":0.9}'
if ts g "$GPU" --set "$EMA" --max-steps 60 --ckpt-dir "$W/cg" && ts e "$GPU" --set "$EMA" --max-steps 60 --no-graphs --ckpt-dir "$W/ce" &&
    cmp -s "$W/g.vals" "$W/e.vals" && [ "$(wc -l <"$W/g.vals")" -ge 8 ] &&
    cmp -s "$W/cg/step-60.safetensors" "$W/ce/step-60.safetensors"; then
    echo "ok 1 - lamb + ema: graphs = eager, $(wc -l <"$W/g.vals") values and the step-60 checkpoint identical"
else
    echo "not ok 1 - lamb + ema: graphs vs eager differ (or a run failed)"
    diff "$W/g.vals" "$W/e.vals" 2>&1 | head -4 | sed 's/^/# /'
fi
if ts cpu cpu --set "$EMA" --max-steps 24 --log-every 4 --eval-every 6144 &&
    ts cuda24 "$GPU" --set "$EMA" --max-steps 24 --log-every 4 --eval-every 6144; then
    worst=$(paste -d' ' "$W/cpu.vals" "$W/cuda24.vals" |
        awk '{d = $3 - $6; if (d < 0) d = -d; r = d / ($3 < 0 ? -$3 : $3); if (r > m) m = r} END {printf "%.3g", m + 0}')
    if [ "$(wc -l <"$W/cpu.vals")" -ge 6 ] && grep -q '^eval' "$W/cpu.vals" && awk -v w="$worst" 'BEGIN {exit !(w <= 1e-4)}'; then
        echo "ok 2 - mlp lamb + ema cuda vs cpu fp32, 24 steps: max rel diff $worst"
    else
        echo "not ok 2 - mlp lamb + ema cuda vs cpu: max rel diff $worst"
    fi
    echo "# table engine ema: graphs = eager (identical); cuda vs cpu rel $worst"
else
    echo "not ok 2 - a 24-step run failed"
fi
want=$(jq -r 'select(.type == "eval") | .auc' "$W/g.jsonl" | tail -1)
if python3 tests/cli/ema_swap.py "$W/cg/step-60.safetensors" "$W/avg.safetensors" >/dev/null &&
    got=$("$BIN/evaluate" --checkpoint "$W/avg.safetensors" --eval "$W/eval.tks" --backend "$GPU" 2>"$W/ev.err" |
        jq -r 'select(.type == "eval") | .auc') && [ -n "$want" ] && [ "$got" = "$want" ]; then
    echo "ok 3 - evaluate of the checkpoint's average = the in-process evaluation ($got)"
else
    echo "not ok 3 - evaluate of the checkpoint's average ${got:-failed} != in process $want"
    tail -2 "$W/ev.err" | sed 's/^/# /'
fi
