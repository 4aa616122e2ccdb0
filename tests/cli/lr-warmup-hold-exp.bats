#!/usr/bin/env bats
# The "warmup_hold_exp" learning-rate schedule (kernels/lr_schedule.h, MLPerf RNN-T's) as the
# engine runs it: the rate of every update of a training run (its progress lines) against a
# Python transcription of the reference's lr_policy(policy='exponential')
# (mlcommons/training rnn_speech_recognition/pytorch/common/optimizers.py) called the way its
# train.py calls it: before each update, with the 1-based update count and the 1-based epoch.

setup_file() {
    export OMP_WAIT_POLICY=passive
    cd "$BATS_FILE_TMPDIR"
    prep synth criteo --days 1 --rows-per-day 40000 --seed 5 -o raw >/dev/null
    prep criteo --max-ind-range 1024 -o train.tks raw/day_0
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
    D=$BATS_FILE_TMPDIR
}

# The reference's lr_policy, transcribed: for each progress line (step = updates done), the rate
# of update `step` (1-based), in epoch ceil(step / spe).
reference_rates() { # base warmup_epochs hold_epochs gamma min_lr spe nsteps
    python3 -c '
import sys
lr0, W, H, gamma, min_lr, spe, n = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), \
    float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
def lr_policy(step, epoch):
    warmup_steps, hold_steps = W * spe, H * spe
    if step < warmup_steps: a = (step + 1) / (warmup_steps + 1)
    elif step < warmup_steps + hold_steps: a = 1.0
    else: a = gamma ** (epoch - W - H)
    return max(a * lr0, min_lr)
step = 1
for epoch in range(1, n // spe + 2):
    for _ in range(spe):
        if step > n: break
        print(step, repr(lr_policy(step, epoch)))
        step += 1
' "$@"
}

@test "warmup_hold_exp: every update's rate is the reference lr_policy's (warm-up, hold, decay per epoch, floor)" {
    # 40000 samples / 2048 = 19 updates an epoch; 2 warm-up and 3 hold epochs, then 0.8 an epoch
    # down to the floor 0.05 (reached in the 14th epoch): 16 epochs, 304 updates
    jq '.optimizer = {"name": "lamb", "base_lr": 0.2, "lr_schedule": "warmup_hold_exp", "warmup_epochs": 2,
                      "hold_epochs": 3, "gamma": 0.8, "min_lr": 0.05}
        | .train.global_batch_size = 2048 | .train.max_epochs = 16' \
        "$TK_ROOT/share/workloads/mlp/tiny.json" >cfg.json
    run train-step -c cfg.json -t "$D/train.tks" --no-eval -b cpu --log-every 1
    [ "$status" -eq 0 ]
    jq -r 'select(.type == "progress") | "\(.step) \(.lr)"' <<<"$output" >got
    [ "$(wc -l <got)" -eq 304 ]
    reference_rates 0.2 2 3 0.8 0.05 19 304 >want
    python3 -c '
import sys
got = [l.split() for l in open("got")]
want = [l.split() for l in open("want")]
assert len(got) == len(want) == 304
for g, w in zip(got, want):
    assert g[0] == w[0], (g, w)
    assert abs(float(g[1]) - float(w[1])) <= 1e-12 * float(w[1]), (g, w)
rates = {float(w[1]) for w in want}
assert 0.2 in rates and 0.05 in rates and len(rates) > 30  # warm-up (floored at first), hold, decay, floor
'
}
