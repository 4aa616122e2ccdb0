#!/usr/bin/env bats
# RNN-T on several cpu ranks (share/launch) against one rank on the same data and global batch
# (issue 32; lib/workloads/rnnt/data.c, workload.c):
# - the bucketing sampler draws one global order for any world size (the reference's
#   BucketingSampler over the global batch, data.buckets 2 here), rank r taking the r-th share of
#   each global batch; the loss is each utterance's summed and divided by the global batch (the
#   reference's mean over the batch), the ranks' shares added;
# - what draws randomness from a rank's batch layout is off (tests/cli/rnnt_small.bash: dropout,
#   SpecAugment's time masks); speed perturbation, dither and the frequency masks are keyed by
#   the utterance and stay on;
# - so 2 ranks train as 1 but for the order of fp32 sums (a GEMM's sum over the batch split in
#   two and all-reduced) and one effect of the batch's padding that the reference has too: an
#   utterance's last time-stacked frame of an odd frame count pairs its last frame with the
#   pre-encoder LSTM's output on the next, padding frame, or with zeros when it is the longest
#   of its batch (StackTime pads the batch to an even length), and the longest differs with the
#   rank's share. Measured over 4 steps: 7.3e-6 relative at most; bound 1e-4. The WER of each
#   evaluation (on the moving average, the tiny config's optimizer.ema 0.9) equal;
# - the evaluation split over 2 ranks (each decodes every other batch, errors and words summed)
#   scores what evaluate of the checkpoint scores on one rank, bit for bit.

load compare
load rnnt_small

setup_file() { rnnt_small_setup_file; }

setup() { rnnt_small_setup; }

@test "rnnt-multi: 2 ranks train as 1 rank (losses within 1e-4, the same WERs), the bucketing sampler's order the same" {
    rnnt_small_cfg "$D/cfg.json"
    # 4 updates of 8 utterances (2 epochs of the 16), an evaluation an epoch; the target unreachable
    a=(train-step -c "$D/cfg.json" -t "$D/data/train-clean-100.tks" -e "$D/data/dev-clean.tks" -b cpu --threads 1
       --max-steps 4 --log-every 1 --set target.wer=0.001)
    "${a[@]}" --ckpt-dir "$D/r1" >"$D/r1.jsonl" 2>r1.err || [ $? -eq 1 ] || { cat r1.err; false; }
    "$TK_ROOT/share/launch" -n 2 -- "${a[@]}" --ckpt-dir "$D/r2" >"$D/r2.jsonl" 2>r2.err || [ $? -eq 1 ] ||
        { cat r2.err; false; }
    grep -q '"world_size":2' "$D/r2.jsonl"
    for w in 1 2; do
        metrics "$D/r$w.jsonl" | grep '^loss' >l$w
        metrics "$D/r$w.jsonl" | grep '^wer' >w$w
    done
    paste l1 l2 w1 w2 >&3
    [ "$(wc -l <l1)" -eq 4 ] && [ "$(wc -l <w1)" -eq 2 ]
    agree l1 l2 1e-4 >&3
    diff w1 w2
    # a WER that moves with the weights (not the blanks-only 1 of a net that emits nothing)
    ! grep -q ' 1\.0$' w1
}

@test "rnnt-multi: the evaluation split over 2 ranks scores what evaluate scores on one rank, bit for bit" {
    [ -f "$D/r2/step-4.safetensors" ] || skip "needs the runs of the test above"
    run evaluate --checkpoint "$D/r2/step-4.safetensors" --eval "$D/data/dev-clean.tks" -b cpu
    [ "$status" -eq 0 ]
    one=$(jq -r 'select(.type == "eval") | .wer' <<<"$output")
    two=$(jq -r 'select(.type == "eval") | .wer' "$D/r2.jsonl" | tail -1)
    echo "2 ranks: $two, evaluate: $one" >&3
    [ "$(jq -r 'select(.type == "eval") | "\(.eval_samples) \(.batch) \(.weights)"' <<<"$output")" = "8 4 ema" ]
    [ -n "$one" ] && [ "$one" = "$two" ]
}
