#!/usr/bin/env bats
# SSD on several cpu ranks (share/launch) against one rank (issue 32 item 2, issue 30's evaluation
# split; lib/workloads/ssd/eval.c):
# - the evaluation split over 2 and 3 ranks (5 eval images: shares of 3+2 and 1+2+2) scores what
#   evaluate of the same checkpoint scores on one rank over every image, bit for bit;
# - BatchNorm's running statistics are averaged over the ranks before an evaluation (the v1.x
#   reference's train.py): the first BN's running_mean of 2 ranks is 1 rank's;
# - training on 2 and 3 ranks is 1 rank's: on a batch of one image repeated (no augmentation), BN
#   per rank normalizes what 1 rank's BN over the whole batch does, so what differs is only the
#   order of the fp32 sums (each rank's loss and gradient share, the gradients' all-reduce in rank
#   order against one rank's sum over the batch): the losses within 1e-4 relative (2.3e-5 measured
#   on 3 ranks after 3 steps, 0 on 2), the mAP of each evaluation equal on 2 ranks, within 1% on 3;
#   and 2 ranks with small gradient buckets reduced during the backward (grads_ready) as with one
#   bucket after it, bit for bit.
# The data and weights: tests/cli/ssd_multi.bash (an mAP above 0 on purpose: an untrained net
# scores 0, which would make any comparison of mAPs hollow). Then run.sh --gpus 2.

load compare
load ssd_multi

setup_file() {
    export OMP_WAIT_POLICY=passive
    ssd_multi_data "$BATS_FILE_TMPDIR" cpu
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    D=$BATS_FILE_TMPDIR
    export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
    TINY=$TK_ROOT/share/workloads/ssd/tiny.json
}

map_of() { jq -r 'select(.type == "eval") | .map' "$1" | tail -1; } # (the last evaluation's)

@test "ssd-multi: 2 and 3 ranks train as 1 rank on a repeated image (losses within 1e-4), and their evaluations give 1 rank's mAP" {
    for w in 1 2 3; do
        run ssd_dup_run $w cpu "$D" 3 "$D/r$w"
        [ "$status" -eq 1 ] || { cat "$D/r$w.err"; false; } # (the target not reached)
    done
    grep -q '"world_size":3' "$D/r3.jsonl"
    for w in 1 2 3; do
        metrics "$D/r$w.jsonl" | grep '^loss' >l$w
        metrics "$D/r$w.jsonl" | grep '^map' >m$w
    done
    paste l1 m1 >&3
    [ "$(wc -l <l1)" -eq 3 ] && [ "$(wc -l <m1)" -eq 3 ] # (an evaluation after every step: one an epoch)
    # the order of fp32 sums only (measured over 3 steps: 0 on 2 ranks, 2.3e-5 on 3)
    agree l1 l2 1e-4 >&3
    agree l1 l3 1e-4 >&3
    # the evaluations' mAPs (none 0): 2 ranks bit for bit (the same losses, measured); 3 ranks within
    # 1% (the 2.3e-5 of the weights moves a few detections: 0.16% measured at step 3)
    ! grep -q ' 0\.0$' m1
    diff m1 m2
    agree m1 m3 1e-2 >&3
    # 2 ranks again with 4096-float buckets (the tiny net's 1.2M gradients fill ~300), each
    # all-reduced as soon as the backward reports it final (grads_ready; TK_CHECK_GRADS_READY=1
    # fails a step that writes a gradient after reporting it): a sum of two ranks is the same in
    # any bucketing, so the same losses and mAPs bit for bit
    TK_GRAD_BUCKET_FLOATS=4096 TK_CHECK_GRADS_READY=1 run ssd_dup_run 2 cpu "$D" 3 "$D/r2b"
    [ "$status" -eq 1 ] || { cat "$D/r2b.err"; false; }
    metrics "$D/r2b.jsonl" | grep -E '^(loss|map)' >b2
    cat l2 m2 | sort >a2 && sort b2 >c2 && diff a2 c2
}

@test "ssd-multi: the evaluation split over 2 and 3 ranks scores what one rank scores over every image, bit for bit" {
    # the checkpoints of the test above (after its evaluation: the ranks' averaged BN statistics),
    # evaluated on one rank (evaluate: the training rank's batch, every image)
    [ -f "$D/r3/step-3.safetensors" ] || skip "needs the runs of the test above"
    cp "$D/gt.json" "$D/data/instances_val2017.json"
    for w in 2 3; do
        run evaluate --checkpoint "$D/r$w/step-3.safetensors" --eval "$D/data/val.tks" -b cpu
        [ "$status" -eq 0 ]
        one=$(echo "$output" | jq -r 'select(.type == "eval") | .map')
        echo "$w ranks: $(map_of "$D/r$w.jsonl"), evaluate: $one" >&3
        [ "$(echo "$output" | jq -r 'select(.type == "eval") | .eval_samples')" = 5 ]
        [ "$one" != 0 ] && [ "$(map_of "$D/r$w.jsonl")" = "$one" ]
    done
    rm "$D/data/instances_val2017.json"
}

@test "ssd-multi: BatchNorm's running statistics are averaged over the ranks before the evaluation (2 ranks: 1 rank's)" {
    python3 -c 'import numpy' 2>/dev/null || skip "numpy is not importable"
    # six distinct images, one step at rate 0: the first BN's running_mean, 0 before, becomes 0.1 x
    # its batch mean, over 6 images on 1 rank, over 3 on each of 2 (their mean: the 6 images' up to
    # rounding; each rank's own: another value)
    local a=(train-step -c "$TINY" -t "$D/data/train.tks" -e "$D/data/val.tks" -b cpu --max-steps 1 --log-every 0
             --set train.global_batch_size=6 --set optimizer.base_lr=0 --set eval.annotations="$D/gt.json")
    "${a[@]}" --ckpt-dir one >/dev/null 2>&1 || [ $? -eq 1 ]
    "$TK_ROOT/share/launch" -n 2 -- "${a[@]}" --ckpt-dir two >/dev/null 2>&1 || [ $? -eq 1 ]
    run python3 - one/step-1.safetensors two/step-1.safetensors <<'PY'
import json, struct, sys
import numpy as np
def load(p, k):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    v = json.loads(b[8:8 + n])[k]
    return np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32).astype(np.float64)
k = "model.layer1.1.running_mean"
one, two = (load(p, k) for p in sys.argv[1:])
rel = np.abs(two - one).max() / np.abs(one).max()
print("%s: 2 ranks against 1 rank: %.2e relative" % (k, rel))
sys.exit(0 if np.abs(one).max() > 0 and rel <= 1e-5 else 1)
PY
    echo "$output" >&3
    [ "$status" -eq 0 ]
}

@test "ssd-multi: run.sh --gpus 2 trains on 2 ranks at the same global batch; --gpus 3 does not divide tiny's 4 (exit 2)" {
    run "$TK_ROOT/share/workloads/ssd/run.sh" -o "$BATS_TEST_TMPDIR/o" --images 8 --backend cpu --gpus 2 -- --max-steps 2
    echo "$output"
    [ "$status" -eq 1 ] # (the target not reached in 2 steps)
    [[ "$output" == *"train-step tiny.json on cpu, 2 ranks (share/launch)"* ]]
    [[ "$(echo "$output" | grep '^ssd: ')" == *"samples=8 "*"checks=ok log_check=known:ATLEAST_ONE_CHECK_FAILED:eval_accuracy"* ]]
    grep '"type":"config"' "$BATS_TEST_TMPDIR/o/train.jsonl" | grep '"global_batch_size":4,' | grep -q '"world_size":2,'

    [ "$(jq -r 'select(.type == "eval") | .eval_samples' "$BATS_TEST_TMPDIR/o/evaluate.jsonl")" = 2 ]
    run "$TK_ROOT/share/workloads/ssd/run.sh" -o "$BATS_TEST_TMPDIR/o" --images 8 --backend cpu --gpus 3 --reuse-data
    [ "$status" -eq 2 ]
    [[ "$output" == *"error: ssd: a global batch of 4 over 3 ranks: must divide evenly"* ]]
    [[ "$output" == *"run.sh: train-step failed (exit 2)"* ]]
}
