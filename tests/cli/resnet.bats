#!/usr/bin/env bats
# ResNet (lib/workloads/resnet/) through train-step and evaluate on the cpu backend: the tiny
# config (share/workloads/resnet/tiny.json) trains on synthetic decoded images to its target with
# a falling loss; evaluate agrees with train-step; the MLLOG's lines; one training step against
# torchvision in fp64 (contrib/peers/resnet.py: the tiny network, and ResNet-50 itself at 64x64);
# --init-checkpoint from a torchvision state dict; bad data and options.

setup_file() {
    D=$BATS_FILE_TMPDIR
    TK_RESNET_SYNTH="$D/data:1024:256:36:10:1" "$TK_BIN/../tests/unit/test_resnet" >"$D/synth.out" 2>&1
    SECONDS=0
    train-step -c "$TK_ROOT/share/workloads/resnet/tiny.json" -t "$D/data/train.tks" -e "$D/data/eval.tks" -b cpu \
        --mllog "$D/resnet.mllog" --log-every 8 --ckpt-dir "$D/ck" >"$D/train.jsonl" 2>"$D/train.err"
    echo "$? $SECONDS" >"$D/rc"
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    D=$BATS_FILE_TMPDIR
    TINY=$TK_ROOT/share/workloads/resnet/tiny.json
}

torch_peer() {
    python3 -c 'import torch, torchvision, safetensors' 2>/dev/null || skip "torch, torchvision or safetensors is not importable"
}

@test "resnet: the tiny network trains to its target on the cpu, its loss falling" {
    read -r rc secs <"$D/rc"
    echo "train-step: exit $rc after $secs s" >&3
    [ "$rc" -eq 0 ]
    grep -q '"type":"resnet","batch_per_rank":32,"blocks":4,"stem":"direct","stem_channels":3,"cudnn":null' "$D/train.jsonl"
    grep -q '"type":"result","workload":"resnet","reached":true,"status":"success","top1":0.9' "$D/train.jsonl"
    # the mean loss of the first 8 steps and of the last 8
    first=$(grep '"type":"progress"' "$D/train.jsonl" | head -1 | jq .loss)
    last=$(grep '"type":"progress"' "$D/train.jsonl" | tail -1 | jq .loss)
    echo "loss $first -> $last" >&3
    jq -ne "$first > 2.0 and $last < 0.5 * $first"
}

@test "resnet: evaluate gives the top-1 train-step computed for the same weights" {
    want=$(grep '"type":"eval"' "$D/train.jsonl" | tail -1 | jq .top1)
    run evaluate --checkpoint "$D/ck/step-64.safetensors" --eval "$D/data/eval.tks" -b cpu
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | tail -1 | jq .top1)" = "$want" ]
}

@test "resnet: the MLLOG's keys are the engine's (its optimizer's too, under ResNet's names) or the workload's; log-check passes it, warning of the tiny net's fewer tensors" {
    run grep -cE '"metadata": \{"file": "lib/(engine/engine|engine/optimizer|workloads/resnet/workload)\.c", "lineno": [0-9]+' "$D/resnet.mllog"
    [ "$output" -eq "$(grep -c ':::MLLOG' "$D/resnet.mllog")" ]
    grep -q '"key": "opt_name", "value": "sgd"' "$D/resnet.mllog"
    grep -q '"key": "model_bn_span", "value": 32' "$D/resnet.mllog"
    grep -q '"key": "weights_initialization", "value": null, "metadata": {"file": "lib/workloads/resnet/workload.c", "lineno": [0-9]*, "tensor": "stage4_unit1_conv1sc_weight"}' "$D/resnet.mllog"
    # SGD with momentum 0.9 and weight decay 1e-4 (the rules' sgd_opt_weight_decay: 1e-4 times a
    # power of 2); the 1-block stages name fewer tensors than ResNet-50 (a warning of the 1.1.0
    # rules, an error with --strict and in today's official checker).
    grep -q '"key": "sgd_opt_weight_decay", "value": 0.0001' "$D/resnet.mllog"
    grep -q '"key": "sgd_opt_momentum", "value": 0.9' "$D/resnet.mllog"
    run log-check --ruleset 1.1.0 "$D/resnet.mllog"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 2 ]
    [[ "${lines[1]}" == *"[WEIGHTS_INIT_WARNING]" ]]
}

@test "resnet: an evaluation after epoch N says epoch_num N in the MLLOG, as NVIDIA's v1.1 logs (3 after 3 epochs)" {
    # an evaluation at each epoch's end until the target: N the JSON line's epochs trained
    want=$(grep '"type":"eval"' "$D/train.jsonl" | jq -r .epoch | awk '{printf "eval_start %d eval_accuracy %d eval_stop %d ", $1, $1, $1}')
    [ -n "$want" ]
    run grep -o '"key": "eval_\(start\|accuracy\|stop\)", .*"epoch_num": [0-9.]*' "$D/resnet.mllog"
    [ "$(printf '%s\n' "${lines[@]}" | sed 's/"key": "\([a-z_]*\)".*"epoch_num": /\1 /' | tr '\n' ' ')" = "$want" ]
}

@test "resnet: one step of the tiny network equals torchvision's in fp64 (loss <= 1e-3, every gradient <= 1e-2 on the norm)" {
    torch_peer
    run train-step -c "$TINY" -t "$D/data/train.tks" -b cpu --dump-step dump.safetensors
    [ "$status" -eq 0 ]
    run python3 "$TK_ROOT/contrib/peers/resnet.py" check dump.safetensors --ref float64
    echo "$output" >&3
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | jq .tensors)" -eq 53 ]
    echo "$output" | jq -e '.loss_rel <= 1e-3 and .grad_rel_max <= 1e-2 and .ok'
    # the check bites: one gradient 2% off fails it, naming the tensor
    python3 -c '
import sys; from safetensors import safe_open; from safetensors.torch import save_file
f = safe_open(sys.argv[1], "pt"); t = {k: f.get_tensor(k) for k in f.keys()}
t["grad.fc.weight"] = t["grad.fc.weight"] * 1.02
save_file(t, sys.argv[2], metadata=f.metadata())' dump.safetensors bad.safetensors
    run python3 "$TK_ROOT/contrib/peers/resnet.py" check bad.safetensors --ref float64
    [ "$status" -eq 1 ]
    echo "$output" | jq -e '.grad_worst == "fc.weight" and .grad_rel_max > 0.019 and (.ok | not)'
}

# ResNet-50 itself at 64x64, batch 4: the per-tensor error on the norm, ||ours - torch_fp64|| /
# ||torch_fp64||, beside torch's own fp32 step on the same metric (the noise floor).
r50_dump() { # INIT-CHECKPOINT-ARGS...
    TK_RESNET_SYNTH="$PWD/r50:4:4:64:1000:2" "$TK_BIN/../tests/unit/test_resnet" >/dev/null
    run train-step -c "$TINY" -t r50/train.tks -b cpu --set 'model.layers=[3,4,6,3]' --set model.width=64 \
        --set model.classes=1000 --set model.image_size=64 --set data.eval_resize=73 \
        --set train.global_batch_size=4 "$@" --dump-step dump.safetensors
    [ "$status" -eq 0 ]
}

@test "resnet: ResNet-50 (161 tensors, 64x64, batch 4, residual BN weights 0.1): every gradient within 1e-2 of fp64" {
    torch_peer
    python3 "$TK_ROOT/contrib/peers/resnet.py" init tv.safetensors --residual-gamma 0.1
    r50_dump --init-checkpoint tv.safetensors
    run python3 "$TK_ROOT/contrib/peers/resnet.py" check dump.safetensors --ref float64
    echo "$output" >&3
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | jq .tensors)" -eq 161 ]
    # measured: ours 2.6e-4 (worst tensor), torch's fp32 9.9e-4: the criterion is 1e-2 for both
    echo "$output" | jq -e '.loss_rel <= 1e-3 and .grad_rel_max <= 1e-2 and .stats_rel_max <= 1e-2 and .torch_fp32_grad_rel_max <= 1e-2'
}

@test "resnet: ResNet-50 at torchvision's default init: the step as close to fp64 as PyTorch's fp32 (both ~1.4%, above 1e-2)" {
    torch_peer
    r50_dump
    # At the default init (every BN weight 1) the deep BN network amplifies rounding: PyTorch's
    # own fp32 step is ~1.4% from fp64 on its worst tensor, so 1e-2 cannot hold for any fp32
    # step. Ours must be no further than PyTorch's fp32 (with 1.5x room).
    run python3 "$TK_ROOT/contrib/peers/resnet.py" check dump.safetensors --ref float64 --tol-grad 1
    echo "$output" >&3
    [ "$status" -eq 0 ]
    [ "$(echo "$output" | jq .tensors)" -eq 161 ]
    echo "$output" | jq -e '.loss_rel <= 1e-5 and .grad_rel_all <= 1.5 * .torch_fp32_grad_rel_all and .grad_rel_max <= 1.5 * .torch_fp32_grad_rel_max'
}

@test "resnet: --init-checkpoint takes torchvision's state dict (names, KCRS conv weights, BN statistics)" {
    torch_peer
    python3 "$TK_ROOT/contrib/peers/resnet.py" init tv.safetensors --layers 1,1,1,1 --width 8 --classes 10 --seed 3
    run train-step -c "$TINY" -t "$D/data/train.tks" -b cpu --init-checkpoint tv.safetensors --dump-step dump.safetensors
    [ "$status" -eq 0 ]
    run python3 "$TK_ROOT/contrib/peers/resnet.py" compare-init tv.safetensors dump.safetensors
    [ "$status" -eq 0 ]
    [ "$output" = '{"type": "compare_init", "tensors": 87, "differ": [], "ndiffer": 0}' ]
    # another width: a clear error naming the tensor, exit 3
    python3 "$TK_ROOT/contrib/peers/resnet.py" init tv4.safetensors --layers 1,1,1,1 --width 4 --classes 10
    run train-step -c "$TINY" -t "$D/data/train.tks" -e "$D/data/eval.tks" -b cpu --init-checkpoint tv4.safetensors
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: tv4.safetensors: tensor conv1.weight: F32 [4, 3, 7, 7], expected F32 [8, 3, 7, 7] (torchvision's layout)" ]
}

@test "resnet: --init-checkpoint takes our own checkpoints too (every tensor checked); a file with no ResNet tensors: exit 3" {
    run train-step -c "$TINY" -t "$D/data/train.tks" -b cpu --init-checkpoint "$D/ck/step-64.safetensors" \
        --dump-step dump.safetensors
    [ "$status" -eq 0 ]
    # a damaged tensor of the optimizer's state, which --init-checkpoint does not take: exit 3 naming it
    read -r name off < <(python3 -c 'import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
name = sorted(k for k in h if k.startswith("optimizer."))[0]
off = 8 + n + h[name]["data_offsets"][0]
b[off + 1] ^= 0x10
open("bad.safetensors", "wb").write(bytes(b))
print(name, off)' "$D/ck/step-64.safetensors")
    run train-step -c "$TINY" -t "$D/data/train.tks" -b cpu --init-checkpoint bad.safetensors --dump-step dump2.safetensors
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: bad.safetensors: offset $off: tensor '$name': checksum mismatch"* ]]
    [ ! -e dump2.safetensors ]
    python3 -c 'import safetensors' 2>/dev/null || skip "safetensors is not importable"
    python3 -c '
import sys; from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
bad = [k for k in a if not k.startswith("optimizer.") and (a[k] != b[k]).any()]
# (the dump holds every tensor as before the step, the running statistics after it too)
stats = [k for k in a if k.endswith(".running_mean")]
bad += [k for k in stats if not (b["after." + k] != a[k]).any()]
sys.exit(1 if bad or not stats or len([k for k in a if not k.startswith("optimizer.")]) != 87 else 0)' "$D/ck/step-64.safetensors" dump.safetensors
    python3 -c 'import sys, struct, json; h = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode(); open("other.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"\0\0\0\0")'
    run train-step -c "$TINY" -t "$D/data/train.tks" -e "$D/data/eval.tks" -b cpu --init-checkpoint other.safetensors
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: other.safetensors: no tensor of a torchvision ResNet (conv1.weight, layer1.0.conv1.weight, ...)" ]
}

@test "resnet: training data that is not ResNet's, and labels past the classes: exit 3" {
    run train-step -c "$TINY" -t "$TK_ROOT/tests/fuzz/corpus/tks_reader/synth20.tks" -e "$D/data/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [[ "${lines[0]}" == "train-step: error: $TK_ROOT/tests/fuzz/corpus/tks_reader/synth20.tks: not ResNet data: expected the fields \"image\" u8 (H, W, 3) or \"jpeg\" u8 [-1] (prep imagenet), and \"label\" i16 or i32" ]]
    run train-step -c "$TINY" -t "$D/data/train.tks" -e "$D/data/eval.tks" -b cpu --set model.classes=5
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: $D/data/train.tks: record 5: label 5 outside the model's 5 classes (hint: set model.classes to the data's class count)" ]
}

@test "resnet: bf16 on the cpu backend and unknown model keys are usage or config errors" {
    run train-step -c "$TINY" -t "$D/data/train.tks" -e "$D/data/eval.tks" -b cpu --set model.precision=bf16
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: error: resnet: precision bf16 needs the cuda backend (hint: the cpu backend is the fp32 reference: --set model.precision=fp32)" ]
    run train-step -c "$TINY" -t "$D/data/train.tks" -e "$D/data/eval.tks" -b cpu --set model.depth=50
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "train-step: error: --set: unknown configuration key 'model.depth'" ]
    jq '.model.depth = 50' "$TINY" >cfg.json
    run train-step -c cfg.json -t "$D/data/train.tks" -e "$D/data/eval.tks" -b cpu
    [ "$status" -eq 3 ]
    [ "${lines[0]}" = "train-step: error: cfg.json: \$.model.depth: unknown key \"depth\"" ]
}

@test "resnet: two ranks on the cpu (share/launch) split each batch, BN per rank, and reach the target" {
    run "$TK_ROOT/share/launch" -n 2 -- train-step -c "$TINY" -t "$D/data/train.tks" -e "$D/data/eval.tks" -b cpu \
        --rendezvous "file:$PWD/rdv" --log-every 0
    [ "$status" -eq 0 ]
    echo "$output" | grep -q '"type":"config","workload":"resnet".*"world_size":2'
    echo "$output" | grep -q '"type":"resnet","batch_per_rank":16'
    echo "$output" | grep -q '"type":"result","workload":"resnet","reached":true'
}
