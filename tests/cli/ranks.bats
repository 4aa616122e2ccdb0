#!/usr/bin/env bats
# N ranks against one rank on the same data (issue 32 item 2), on the cpu backend through
# share/launch, for the workloads whose other tests do not already do it (DLRM: train-step-dist.bats,
# the MLP: mlp.bats). 16-24 steps without evaluations (--no-eval), the progress lines' losses
# compared with tests/cli/compare.bash. The tolerances, and why:
#   BERT: every rank reads the whole global batch and trains its rows; the gradients are summed
#     over the ranks, so 2 ranks compute what 1 does up to the order of fp32 sums: 1e-5 relative
#     on the first window's mean loss; LAMB then amplifies the rounding (1.5e-4 after 12 steps
#     measured), so 1e-3 on every window.
#   ResNet: each rank normalizes over its own share of the batch (BN per rank, as MLPerf allows and
#     NVIDIA's runs do), a different function from 1 rank's BN over the whole batch, so the losses
#     differ (1.2%, 1.0%, 0.1%, 2.1% on 4 windows measured: 5% allowed) and so do the convolutions'
#     gradients (their first updates' cosine ~0.5-0.9). What BN per rank does not change is the
#     classifier's bias gradient, the batch mean of softmax - one-hot: its first update on 2 ranks
#     against 1 rank, cosine 0.998 and norms 1.02x measured, must be within 0.99 / 5%, and the whole
#     first update's norm within 0.8-1.25x (1.07x measured). A gradient summed instead of averaged
#     over the ranks gives 2x (measured: 2.14x, which the losses alone do not show: 2.5%).

load compare

setup_file() {
    export OMP_WAIT_POLICY=passive
    D=$BATS_FILE_TMPDIR
    bert_tiny_tks "$D"
    TK_RESNET_SYNTH="$D/resnet:1024:256:36:10:1" "$TK_BIN/../tests/unit/test_resnet" >"$D/synth.out" 2>&1
}

setup() {
    cd "$BATS_TEST_TMPDIR"
    D=$BATS_FILE_TMPDIR
    export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
}

# one and two ranks of train-step on the cpu: one.jsonl, two.jsonl
one_and_two() { # config train-data steps [train-step options]
    local a=(train-step -c "$1" -t "$2" -b cpu --no-eval --max-steps "$3" --log-every 4 "${@:4}")
    "${a[@]}" >one.jsonl
    "$TK_ROOT/share/launch" -n 2 -- "${a[@]}" >two.jsonl
    grep -q '"world_size":2' two.jsonl
    metrics one.jsonl | grep '^loss' >one.m
    metrics two.jsonl | grep '^loss' >two.m
    [ "$(wc -l <one.m)" -eq $(($3 / 4)) ]
}

@test "ranks: BERT on 2 ranks trains like 1 (losses within 1e-5 in the first window, 1e-3 after)" {
    [ ! -e "$D/no-bert-data" ] || skip "contrib/synth/bert_tks.py needs python3, numpy and zstd"
    one_and_two "$TK_ROOT/share/workloads/bert/tiny.json" "$D/bert.tks" 24
    head -1 one.m >a && head -1 two.m >b
    agree a b 1e-5
    agree one.m two.m 1e-3
}

# (Each rank's loss is the mean over its own masked tokens, as MLPerf's BERT implementations
# average per rank, so a step's loss on 2 ranks differs from 1 rank's global mean by ~1e-4 when
# the halves hold different numbers of masked tokens; the padded test's first window agrees to
# 1e-5 because its steps' differences happen to cancel.)
@test "ranks: unpadded BERT on 2 ranks trains like 1 (the batch in its balanced order on any world size)" {
    [ ! -e "$D/no-bert-data" ] || skip "contrib/synth/bert_tks.py needs python3, numpy and zstd"
    jq '.model.unpad = true | .model.unpad_bucket = 8' "$TK_ROOT/share/workloads/bert/tiny.json" >unpad.json
    one_and_two unpad.json "$D/bert.tks" 24
    agree one.m two.m 1e-3
}

@test "ranks: ResNet on 2 ranks (BN per rank) trains like 1: losses within 5%, the first update alike" {
    local tiny=$TK_ROOT/share/workloads/resnet/tiny.json
    one_and_two "$tiny" "$D/resnet/train.tks" 16
    agree one.m two.m 0.05
    python3 -c 'import numpy' 2>/dev/null || skip "numpy is not importable"
    local a=(train-step -c "$tiny" -t "$D/resnet/train.tks" -b cpu --no-eval --max-steps 1 --log-every 0)
    "${a[@]}" --set optimizer.base_lr=0 --ckpt-dir w0 >/dev/null # the initial weights
    "${a[@]}" --ckpt-dir w1 >/dev/null
    "$TK_ROOT/share/launch" -n 2 -- "${a[@]}" --ckpt-dir w2 >/dev/null
    run python3 - w0/step-1.safetensors w1/step-1.safetensors w2/step-1.safetensors <<'PY'
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h, d = json.loads(b[8:8 + n]), b[8 + n:]
    return {k: np.frombuffer(d[v["data_offsets"][0]:v["data_offsets"][1]], np.float32).astype(np.float64)
            for k, v in h.items() if k != "__metadata__" and v["dtype"] == "F32"}
w0, w1, w2 = (load(p) for p in sys.argv[1:])
keys = [k for k in w0 if not k.startswith("optimizer.") and "running" not in k]
def upd(keys):
    a = np.concatenate([w1[k] - w0[k] for k in keys]); b = np.concatenate([w2[k] - w0[k] for k in keys])
    return np.linalg.norm(b) / np.linalg.norm(a), a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
r, _ = upd(keys)
rb, cb = upd(["fc.bias"])
print("first update: norm 2 ranks / 1 rank %.4f; fc.bias: norm ratio %.4f, cosine %.4f" % (r, rb, cb))
sys.exit(0 if 0.8 <= r <= 1.25 and abs(rb - 1) <= 0.05 and cb >= 0.99 else 1)
PY
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "ranks: resnet's run.sh takes --gpus (checked before anything runs)" {
    run "$TK_ROOT/share/workloads/resnet/run.sh" --gpus 0
    [ "$status" -eq 2 ]
    [ "$output" = "run.sh: --gpus must be a positive number" ]
    run "$TK_ROOT/share/workloads/resnet/run.sh" --help
    [[ "$output" == *"--gpus N trains on"* ]]
}
