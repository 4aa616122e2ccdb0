#!/usr/bin/env bats
# The optimizer's "ema" (kernels/ema.h, lib/engine/optimizer.c): the engine keeps a moving average
# of the weights, evaluates on it, and checkpoints it as the "ema.NAME" tensors. Checked on the
# mlp workload on the cpu: the evaluation differs from one on the trained weights, equals
# `evaluate` of the checkpoint (which loads the average by default, like the MLPerf RNN-T
# reference's evaluation of its EMA model) and `evaluate --weights raw` of the checkpoint with its
# average put in the weights' place by Python (the independent reading), and --resume carries the
# average bit for bit.

load criteo_small
load eval_follow

setup_file() {
    cd "$BATS_FILE_TMPDIR"
    criteo_small
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
    D=$BATS_FILE_TMPDIR
    T=$TK_ROOT/share/workloads/mlp/tiny.json
    jq '.optimizer.ema = 0.9' "$T" >ema.json
    # 40 updates, one evaluation at the end (an unreachable target: no early stop)
    A=(-t "$D/train.tks" -e "$D/eval.tks" -b cpu --max-steps 40 --log-every 0 --eval-every 10240
       --set target.auc=0.99)
}

# swap_ema IN OUT: OUT is IN with each tensor NAME and ema.NAME exchanged (their data offsets and
# checksums), so the model's tensors are the average; the mlp has 6 tensors.
swap_ema() { [ "$(python3 "$BATS_TEST_DIRNAME/ema_swap.py" "$@")" = 6 ]; }

auc_of() { jq -r 'select(.type == "eval") | .auc' <<<"$1"; }

@test "ema: the evaluation runs on the moving average (evaluate of the checkpoint gives it; --weights raw the weights')" {
    run train-step -c ema.json "${A[@]}" --ckpt-dir ck
    [ "$status" -eq 1 ] # (target not reached)
    ema=$(auc_of "$output")
    [ -n "$ema" ] && [ -f ck/step-40.safetensors ]
    run train-step -c "$T" "${A[@]}" --ckpt-dir ck0
    [ "$status" -eq 1 ]
    plain=$(auc_of "$output")
    [ -n "$plain" ] && [ "$ema" != "$plain" ]
    # evaluate's default is what training evaluated: the average (the config has optimizer.ema 0.9)
    run evaluate --checkpoint ck/step-40.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 0 ]
    [[ "$output" == *'"auc":'$ema',"eval_samples":40000,"batch":256,"weights":"ema",'* ]]
    run evaluate --checkpoint ck/step-40.safetensors --eval "$D/eval.tks" -b cpu --weights ema
    [[ "$output" == *'"auc":'$ema','*'"weights":"ema"'* ]]
    # the trained weights are the same with and without the average (it only reads them)
    run evaluate --checkpoint ck/step-40.safetensors --eval "$D/eval.tks" -b cpu --weights raw
    [ "$status" -eq 0 ]
    [[ "$output" == *'"auc":'$plain','*'"weights":"raw"'* ]]
    # the checkpoint's average put in the weights' place by Python, evaluated as weights, is what
    # training evaluated; the default then reads the swapped ema tensors, the trained weights
    swap_ema ck/step-40.safetensors avg.safetensors
    run evaluate --checkpoint avg.safetensors --eval "$D/eval.tks" -b cpu --weights raw
    [[ "$output" == *'"auc":'$ema','* ]]
    run evaluate --checkpoint avg.safetensors --eval "$D/eval.tks" -b cpu
    [[ "$output" == *'"auc":'$plain','*'"weights":"ema"'* ]]
    # without the average (optimizer.ema 0): the weights; --weights ema is exit 3 naming the file
    run evaluate --checkpoint ck0/step-40.safetensors --eval "$D/eval.tks" -b cpu
    [ "$status" -eq 0 ]
    [[ "$output" == *'"auc":'$plain','*'"weights":"raw"'* ]]
    run evaluate --checkpoint ck0/step-40.safetensors --eval "$D/eval.tks" -b cpu --weights ema
    [ "$status" -eq 3 ]
    [ "$output" = "evaluate: error: ck0/step-40.safetensors: the checkpoint has no moving average of the weights (no ema.NAME tensors): it was trained with optimizer.ema 0 (hint: --weights raw evaluates the trained weights)" ]
    run evaluate --checkpoint ck0/step-40.safetensors --eval "$D/eval.tks" -b cpu --weights average
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "evaluate: --weights: expected auto, raw or ema, got 'average'" ]
}

@test "ema: --eval-dir with evaluate --follow reads the average, the same as in process" {
    run same_out_of_process auc "$D/eval.tks" -c ema.json -t "$D/train.tks" -b cpu --max-steps 40 --log-every 0 \
        --eval-every 5120 --set target.auc=0.99
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "ema: each update is the reference's apply_ema from the loaded weights (--init-checkpoint); --resume continues it bit for bit" {
    run train-step -c ema.json "${A[@]}" --ckpt-dir c1 --ckpt-every 20
    [ "$status" -eq 1 ]
    run train-step -c ema.json "${A[@]}" --ckpt-dir c2 --resume c1/step-20.safetensors
    [ "$status" -eq 1 ]
    cmp c1/step-40.safetensors c2/step-40.safetensors
    # from the weights alone the average starts at them (the reference's copy of the model), then
    # after each update v = decay v + (1 - decay) w in fp32 (torch's fp32 scalars, each operation
    # rounded), transcribed in numpy from the checkpoints of every update
    run train-step -c ema.json "${A[@]}" --ckpt-dir c3 --init-checkpoint c1/step-20.safetensors --max-steps 3 \
        --ckpt-every 1
    [ "$status" -eq 1 ]
    python3 -c 'import json, struct, numpy as np
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32)
            for k, v in h.items() if k != "__metadata__"}
w0 = load("c1/step-20.safetensors")
names = [k for k in w0 if not k.startswith("ema.")]
v = {k: w0[k].copy() for k in names}
d, c = np.float32(0.9), np.float32(1 - 0.9)
for s in (1, 2, 3):
    ck = load("c3/step-%d.safetensors" % s)
    for k in names:
        v[k] = d * v[k] + c * ck[k]
        assert v[k].dtype == np.float32
        assert np.array_equal(v[k], ck["ema." + k]), (s, k, np.abs(v[k] - ck["ema." + k]).max())
'
}

@test "ema: out of range refused" {
    jq '.optimizer.ema = 1' "$T" >bad.json
    run train-step -c bad.json "${A[@]}"
    [ "$status" -eq 3 ]
    [[ "$output" == *'bad.json: $.optimizer.ema: expected a number in [0, 1)'* ]]
}
