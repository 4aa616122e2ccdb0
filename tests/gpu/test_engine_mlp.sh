#!/usr/bin/env bash
# The training engine's shared paths on the cuda backend, with the workload that leaves them all to
# it (mlp: its optimizer updates every tensor, the engine schedules and captures), TAP:
#   1. AdamW and LAMB (kernels/optim.cu inside the captured step): graphs = --no-graphs, bit for bit;
#   2. cuda (fp32) against the cpu reference over 24 steps with AdamW: losses and AUC within 1e-4;
#   3. --resume with AdamW's state on cuda is bit-identical to the straight run;
#   4. the weights' moving average (optimizer.ema, kernels/ema.cu inside the captured step) with
#      LAMB and warmup_hold_exp: graphs = --no-graphs bit for bit (losses, the evaluations on the
#      average, the step-60 checkpoint with its ema tensors);
#   5. the same cuda (fp32) against the cpu reference over 24 steps: losses and the AUC on the
#      average within 1e-4;
#   6. evaluate of the checkpoint (by default its ema tensors, evaluate(1) Which weights), and
#      --weights raw of it with its ema tensors in the weights' place (tests/cli/ema_swap.py),
#      give the AUC training evaluated in process.
# Run by tests/gpu/run with BUILD set; skips without a GPU.
set -u
cd "$(dirname "$0")/../.." || exit 4
BIN=$PWD/${BUILD:-build}/bin
. tests/gpu/lib.sh
GPU=${TK_TEST_BACKEND:-cuda} # cpu: a dry run of this script's plumbing
skip_without_gpu
W=$(mktemp -d)
trap "rm -rf $W" EXIT
echo "1..6"
small_data "$W" 40000 7 1024
cfg=$PWD/share/workloads/mlp/tiny.json
# worst_rel A B: the largest relative difference of the values of two .vals files, line by line
worst_rel() {
    paste -d' ' "$1" "$2" |
        awk '{d = $3 - $6; if (d < 0) d = -d; r = d / ($3 < 0 ? -$3 : $3); if (r > m) m = r} END {printf "%.3g", m + 0}'
}
ADAMW='optimizer={"name":"adamw","base_lr":0.01,"weight_decay":0.01,"lr_schedule":"cosine","warmup_steps":5,"total_steps":200}'
LAMB='optimizer={"name":"lamb","base_lr":0.02,"weight_decay":0.01,"lr_schedule":"warmup_poly","warmup_steps":5,"total_steps":200,"max_grad_norm":1.0}'
# (ts's target is an AUC: mlp's metric too)
ok=1
for o in adamw lamb; do
    [ $o = adamw ] && s=$ADAMW || s=$LAMB
    ts "$o-g" "$GPU" --set "$s" --max-steps 60 && ts "$o-e" "$GPU" --set "$s" --max-steps 60 --no-graphs || ok=0
    cmp -s "$W/$o-g.vals" "$W/$o-e.vals" && [ "$(wc -l <"$W/$o-g.vals")" -ge 8 ] || ok=0
done
if [ "$ok" = 1 ]; then
    echo "ok 1 - adamw and lamb: graphs = eager, $(wc -l <"$W/adamw-g.vals") + $(wc -l <"$W/lamb-g.vals") values identical"
else
    echo "not ok 1 - graphs vs eager differ (or a run failed)"
    diff "$W/adamw-g.vals" "$W/adamw-e.vals" 2>&1 | head -4 | sed 's/^/# /'
fi
if ts cpu cpu --set "$ADAMW" --max-steps 24 --log-every 4 && ts cuda24 "$GPU" --set "$ADAMW" --max-steps 24 --log-every 4; then
    worst=$(worst_rel "$W/cpu.vals" "$W/cuda24.vals")
    if [ "$(wc -l <"$W/cpu.vals")" -ge 6 ] && awk -v w="$worst" 'BEGIN {exit !(w <= 1e-4)}'; then
        echo "ok 2 - mlp adamw cuda vs cpu fp32, 24 steps: max rel diff $worst"
    else
        echo "not ok 2 - mlp adamw cuda vs cpu: max rel diff $worst"
    fi
    echo "# table engine mlp: adamw/lamb graphs = eager (identical); cuda vs cpu rel $worst"
else
    echo "not ok 2 - a 24-step run failed"
fi
a="$BIN/train-step -c $cfg -t $W/train.tks -e $W/eval.tks --backend $GPU --set $ADAMW --log-every 0 --eval-every 100000000"
if $a --max-steps 20 --ckpt-dir "$W/a" >/dev/null 2>&1; [ $? -le 1 ] &&
    $a --max-steps 10 --ckpt-dir "$W/b" >/dev/null 2>&1; [ $? -le 1 ] &&
    $a --max-steps 20 --ckpt-dir "$W/c" --resume "$W/b/step-10.safetensors" >/dev/null 2>&1; [ $? -le 1 ] &&
    cmp -s "$W/a/step-20.safetensors" "$W/c/step-20.safetensors"; then
    echo "ok 3 - adamw on cuda: 10 + resume + 10 = 20 straight, bit for bit"
else
    echo "not ok 3 - adamw resume on cuda differs from the straight run (or a run failed)"
fi
# 40000 / 256 = 156 updates an epoch: a warm-up epoch, then hold (the first 60 steps warm up)
EMA='optimizer={"name":"lamb","base_lr":0.02,"weight_decay":0.01,"max_grad_norm":1.0,"lr_schedule":"warmup_hold_exp","warmup_epochs":1,"hold_epochs":1,"gamma":0.9,"ema":0.9}'
if ts g "$GPU" --set "$EMA" --max-steps 60 --ckpt-dir "$W/cg" && ts e "$GPU" --set "$EMA" --max-steps 60 --no-graphs --ckpt-dir "$W/ce" &&
    cmp -s "$W/g.vals" "$W/e.vals" && [ "$(wc -l <"$W/g.vals")" -ge 8 ] &&
    cmp -s "$W/cg/step-60.safetensors" "$W/ce/step-60.safetensors"; then
    echo "ok 4 - lamb + ema: graphs = eager, $(wc -l <"$W/g.vals") values and the step-60 checkpoint identical"
else
    echo "not ok 4 - lamb + ema: graphs vs eager differ (or a run failed)"
    diff "$W/g.vals" "$W/e.vals" 2>&1 | head -4 | sed 's/^/# /'
fi
if ts cpu cpu --set "$EMA" --max-steps 24 --log-every 4 --eval-every 6144 &&
    ts cuda24 "$GPU" --set "$EMA" --max-steps 24 --log-every 4 --eval-every 6144; then
    worst=$(worst_rel "$W/cpu.vals" "$W/cuda24.vals")
    if [ "$(wc -l <"$W/cpu.vals")" -ge 6 ] && grep -q '^eval' "$W/cpu.vals" && awk -v w="$worst" 'BEGIN {exit !(w <= 1e-4)}'; then
        echo "ok 5 - mlp lamb + ema cuda vs cpu fp32, 24 steps: max rel diff $worst"
    else
        echo "not ok 5 - mlp lamb + ema cuda vs cpu: max rel diff $worst"
    fi
    echo "# table engine ema: graphs = eager (identical); cuda vs cpu rel $worst"
else
    echo "not ok 5 - a 24-step run failed"
fi
want=$(jq -r 'select(.type == "eval") | .auc' "$W/g.jsonl" | tail -1)
if python3 tests/cli/ema_swap.py "$W/cg/step-60.safetensors" "$W/avg.safetensors" >/dev/null &&
    got=$("$BIN/evaluate" --checkpoint "$W/avg.safetensors" --weights raw --eval "$W/eval.tks" --backend "$GPU" \
        2>"$W/ev.err" | jq -r 'select(.type == "eval") | .auc') && [ -n "$want" ] && [ "$got" = "$want" ] &&
    got=$("$BIN/evaluate" --checkpoint "$W/cg/step-60.safetensors" --eval "$W/eval.tks" --backend "$GPU" \
        2>"$W/ev.err" | jq -r 'select(.type == "eval") | .auc') && [ "$got" = "$want" ]; then
    echo "ok 6 - evaluate of the checkpoint's average = the in-process evaluation ($got)"
else
    echo "not ok 6 - evaluate of the checkpoint's average ${got:-failed} != in process $want"
    tail -2 "$W/ev.err" | sed 's/^/# /'
fi
