#!/usr/bin/env bash
# RNN-T on 2 GPUs against 1 at the same global batch (issue 32 item 2; the cpu's
# tests/cli/rnnt-multi.bats), TAP, on tests/cli/rnnt_small.bash's data and config (tiny.json fp32,
# 16 synthetic utterances, global batch 8, data.buckets 2, dropout and SpecAugment's time masks
# off: what draws from a rank's batch layout; weights_init_scale 2: a WER above 1 that moves with
# the weights), the weights' moving average on (the tiny config's optimizer.ema 0.9):
#   1. training: 1 GPU and 2 GPUs (share/launch), 4 steps, an evaluation an epoch (2). The same
#      global order and shares (the bucketing sampler over the global batch), so what differs is
#      the order of the sums (the cpu: 7.3e-6 relative over 4 steps, from the gradients' all-reduce
#      and the time stacking of the rank's padding, rnnt-multi.bats) and, on the GPU, the cuBLAS
#      and LSTM kernels' choices for 4 utterances and for 8, which round differently: the losses
#      within 1e-3 relative, each evaluation's WER within 1% relative (near 6.4 on the dev set's
#      85 words: 5 word errors; a symbol the greedy decoder flips on a rounding costs 1 or 2;
#      equal is expected, the line says which).
#   2. the evaluation split: the 2-GPU run's last WER (each GPU decodes every other batch of 4,
#      errors and words summed) against evaluate of its checkpoint on one GPU (the training rank's
#      batch of 4: the same batches, the same kernels): equal, bit for bit.
#   3. evaluate of the 1-GPU run's last checkpoint on that GPU: the WER the loop evaluated on the
#      moving average, bit for bit ("weights":"ema"; evaluate(1) Which weights).
# BUILD=dir tests/gpu/multi/test_rnnt_gpu.sh. Skips with < 2 GPUs, or without the data: made here
# by rnnt_small_data (espeak-ng, sox, sentencepiece, prep with libFLAC), or TK_RNNT_DATA=DIR, a
# directory whose data/ rnnt_small_data made elsewhere (carried to a device without those tools).
# TK_TEST_BACKEND=cpu: a dry run of the plumbing on cpu ranks.
set -u
cd "$(dirname "$0")/../../.." || exit 4
BIN=$PWD/${BUILD:-build}/bin
export TK_ROOT=$PWD
. tests/gpu/lib.sh
. tests/cli/compare.bash
. tests/cli/rnnt_small.bash
GPU=${TK_TEST_BACKEND:-cuda}
need_gpus 2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export OMP_WAIT_POLICY=passive
echo "1..3"
if [ -n "${TK_RNNT_DATA:-}" ]; then cp -r "$TK_RNNT_DATA/data" "$W/"; else rnnt_small_data "$W"; fi
if [ ! -f "$W/data/dev-clean.tks" ] || ! rnnt_small_cfg "$W/cfg.json"; then
    for i in 1 2 3; do echo "ok $i - RNN-T 2 GPUs vs 1 # SKIP no data (espeak-ng, sox, sentencepiece, libFLAC: tests/cli/rnnt_small.bash)"; done
    exit 0
fi
thr=()
[ "$GPU" = cpu ] && thr=(--threads 1)
a=("$BIN/train-step" -c "$W/cfg.json" -t "$W/data/train-clean-100.tks" -e "$W/data/dev-clean.tks" -b "$GPU"
   "${thr[@]}" --max-steps 4 --log-every 1 --set target.wer=0.001)

CUDA_VISIBLE_DEVICES=0 "${a[@]}" --ckpt-dir "$W/one" >"$W/one.jsonl" 2>"$W/one.err"
s1=$?
share/launch -n 2 -- "${a[@]}" --ckpt-dir "$W/two" >"$W/two.jsonl" 2>"$W/two.err"
s2=$?
r= m=
if [ "$s1" -le 1 ] && [ "$s2" -le 1 ] && grep -q '"world_size":2' "$W/two.jsonl"; then
    for k in one two; do
        metrics "$W/$k.jsonl" | grep '^loss' >"$W/$k.loss"
        metrics "$W/$k.jsonl" | grep '^wer' >"$W/$k.wer"
    done
    sed 's/^/# 1 GPU: /' "$W/one.wer" "$W/one.loss"
    sed 's/^/# 2 GPUs: /' "$W/two.wer" "$W/two.loss"
    if [ "$(wc -l <"$W/one.loss")" -eq 4 ] && [ "$(wc -l <"$W/one.wer")" -eq 2 ] && ! grep -q ' 1\.0$' "$W/one.wer" &&
        r=$(agree "$W/one.loss" "$W/two.loss" 1e-3) && m=$(agree "$W/one.wer" "$W/two.wer" 1e-2); then
        cmp -s "$W/one.wer" "$W/two.wer" && how="equal" || how="within 1%"
        echo "ok 1 - RNN-T fp32 training, 2 GPUs vs 1: losses $r <= 1e-3; WERs $how ($m)"
        echo "# table rnnt 2 GPUs vs 1: losses $r; WERs $how"
    else
        echo "not ok 1 - RNN-T fp32 training, 2 GPUs vs 1: losses ${r:-?}, WERs ${m:-?}"
    fi
else
    echo "not ok 1 - RNN-T training, 2 GPUs vs 1: train-step failed (exit $s1, $s2)"
    tail -3 "$W/one.err" "$W/two.err" | sed 's/^/#   /'
fi

# same_as_loop N RUN WHAT: TAP line N: evaluate of RUN's last checkpoint on GPU 0 gives the WER
# RUN's loop evaluated last, bit for bit, on the moving average
same_as_loop() {
    local loop got
    loop=$(jq -r 'select(.type == "eval") | .wer' "$W/$2.jsonl" 2>/dev/null | tail -1)
    got=$([ -f "$W/$2/step-4.safetensors" ] &&
        CUDA_VISIBLE_DEVICES=0 "$BIN/evaluate" --checkpoint "$W/$2/step-4.safetensors" --eval "$W/data/dev-clean.tks" \
            -b "$GPU" 2>"$W/ev.err" | jq -r 'select(.type == "eval") | "\(.wer) \(.weights)"')
    if [ -n "$loop" ] && [ "$got" = "$loop ema" ]; then
        echo "ok $1 - $3 ($loop, bit for bit)"
    else
        echo "not ok $1 - $3: loop ${loop:-?}, evaluate ${got:-failed}"
        tail -3 "$W/ev.err" 2>/dev/null | sed 's/^/#   /'
    fi
}
same_as_loop 2 two "RNN-T evaluation split over 2 GPUs = evaluate on 1 GPU of the checkpoint"
same_as_loop 3 one "RNN-T evaluate of the 1-GPU checkpoint = the loop's WER on the moving average"
