#!/usr/bin/env bats
# SSD300-ResNet34's network (lib/workloads/ssd) against the v1.x MLPerf reference's, transcribed
# in PyTorch (contrib/peers/ssd.py): the peer's weights, batch and loss weights (--init) through
# one training forward and backward of trainkit's cpu backend (tests/unit/test_ssd_model's
# peer_dump), then ssd.py --compare recomputes them in float64 and checks loc, conf, every
# parameter's gradient, BatchNorm's running statistics and the eval forward's outputs. The network
# is the reference's at a width of 8 (every layer's channels / 8: a cpu step of the full width
# takes minutes; the config of tests/gpu/test_ssd_model.c) on the smallest input with all six maps
# (257x257: 33, 17, 9, 5, 3, 1); the full width is checked for its parameter count and the import
# of torchvision's resnet34. Skips without torch.
# The ReLUs: an input within rounding of 0 (this dump: one of 1.8M, -4.3e-6 in float64 where our
# fp32 forward, and any fp32 forward, can land on +) passes or stops its whole gradient, and that
# one decision moved every gradient below it by ~1e-3 (6.1e-3 at worst, against torch's own fp32
# step at 1.0e-5, which happened to land on the float64 side). The dump carries our 37 ReLUs'
# decisions; --compare takes them where its input is within 1e-4 x that input's RMS of 0 (one
# element here) and fails on any other difference; then the worst gradient is 1.1e-5.
# Measured once at the reference's size (width 64, 300x300, 81 classes, batch 1, seed 3; ~3
# minutes on 2 cores, not run here): 16 decisions taken (at most 1.5e-5 x the RMS from 0), worst
# gradient 1.5e-5, loc, conf 1.0e-5, running statistics 3.2e-7, eval 1.8e-6; torch's own fp32
# step (ssd.py --compare --floor, its own decisions) 1.7e-2 off at its worst.

bats_require_minimum_version 1.5.0

load torch

setup() {
    PEER="$TK_ROOT/contrib/peers/ssd.py"
    DRIVER="${TK_BIN%/bin}/tests/unit/test_ssd_model"
}

field() { python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])[sys.argv[2]]))' "$output" "$1"; }

# width W, size S, classes A, batch B: the peer's init, our step, the peer's comparison
compare() {
    local d="$BATS_FILE_TMPDIR/w$1s$2"
    mkdir -p "$d"
    python3 "$PEER" --init "$d/init.st" --width "$1" --size "$2" --classes "$3" --batch "$4" --seed 3 --threads 2
    run env SSD_PEER_INIT="$d/init.st" SSD_PEER_OUT="$d/ours.st" "$DRIVER" peer_dump
    [ "$status" -eq 0 ] || { echo "$output"; return 1; }
    [[ "$output" == *"- peer_dump"* && "$output" != *"not ok"* ]]
    run --separate-stderr python3 "$PEER" --compare "$d/ours.st" --threads 2
    echo "$output $stderr"
}

@test "ssd network: loc, conf, all 131 gradients and the running statistics as PyTorch float64 (width 8, 257x257, 5 classes, batch 2)" {
    need_torch
    compare 8 257 5 2
    [ "$status" -eq 0 ]
    [ "$(field ok)" = true ]
    [ "$(field tensors)" = 131 ]
    [ "$(field running)" = 58 ]
    [ "$(field boxes)" = 6766 ]
    [ "$(field relus)" = 37 ]
    [ "$(field relu_mismatch)" = 0 ]
    # measured: outputs 5.0e-6, worst gradient 1.1e-5 (torch's own fp32 step: 1.0e-5), running
    # statistics 3.5e-7, one ReLU decision taken (-4.3e-6 x the RMS of its input)
    python3 -c 'import json, sys; o = json.loads(sys.argv[1]); sys.exit(not (max(o["loc_rel"], o["conf_rel"], o["eval_rel"]) < 1e-5 and o["grad_rel_max"] < 1e-4 and o["relu_adopted"] <= 8))' "$output"
}

@test "ssd network: the same with the stem as the space-to-depth 4x4 convolution (model.stem s2d, 258x258)" {
    need_torch
    export SSD_PEER_STEM=s2d # (lib/blocks/stem.h: cuda's default form, here its cpu references)
    compare 8 258 5 2
    [ "$status" -eq 0 ]
    [ "$(field ok)" = true ]
    [ "$(field tensors)" = 131 ]
    [ "$(field relu_mismatch)" = 0 ]
    python3 -c 'import json, sys; o = json.loads(sys.argv[1]); sys.exit(not (max(o["loc_rel"], o["conf_rel"], o["eval_rel"]) < 1e-5 and o["grad_rel_max"] < 1e-4 and o["relu_adopted"] <= 8))' "$output"
}

# the width-8 dump with one python statement applied to its tensors t, then the peer's comparison
tampered() {
    [ -s "$BATS_FILE_TMPDIR/w8s257/ours.st" ] || compare 8 257 5 2
    cp "$BATS_FILE_TMPDIR/w8s257/ours.st" "$BATS_TEST_TMPDIR/ours.st"
    python3 - "$BATS_TEST_TMPDIR/ours.st" "$1" <<'PY'
import sys
from safetensors.torch import load_file, save_file
from safetensors import safe_open
p = sys.argv[1]
with safe_open(p, "pt") as f:
    meta = f.metadata()
t = load_file(p)
exec(sys.argv[2])
save_file(t, p, metadata=meta)
PY
    run --separate-stderr python3 "$PEER" --compare "$BATS_TEST_TMPDIR/ours.st" --threads 2
}

@test "ssd network: a wrong gradient is caught (one tensor's gradient of the dump scaled by 1.01)" {
    need_torch
    tampered 't["grad.model.layer2.0.0.downsample.0.weight"] *= 1.01'
    [ "$status" -eq 1 ]
    [ "$(field ok)" = false ]
    [ "$(field grad_worst)" = '"model.layer2.0.0.downsample.0.weight"' ]
}

@test "ssd network: a ReLU decision away from 0 that differs is caught (one channel of a dumped ReLU inverted)" {
    need_torch
    tampered 't["relu.20"][..., 3] = 1 - t["relu.20"][..., 3]'
    [ "$status" -eq 1 ]
    [ "$(field ok)" = false ]
    python3 -c 'import json, sys; sys.exit(not json.loads(sys.argv[1])["relu_mismatch"] > 100)' "$output"
}

@test "ssd network: the parameter count is the reference model's (width 64, 81 classes: 19,972,534)" {
    need_torch
    run --separate-stderr python3 "$PEER" --count --threads 2
    [ "$status" -eq 0 ]
    local theirs
    theirs=$(field params)
    [ "$theirs" = 19972534 ]
    [ "$(field tensors)" = 131 ]
    run "$DRIVER" reference_shapes_and_count
    [ "$status" -eq 0 ]
    [[ "$output" == *"# parameters $theirs "* ]]
}

@test "ssd network: torchvision's resnet34 (a random state dict, --convert) imported into the trunk at width 64" {
    need_torch
    local d="$BATS_TEST_TMPDIR"
    python3 "$PEER" --random-resnet34 "$d/rn34.pth" --seed 5
    run --separate-stderr python3 "$PEER" --convert "$d/rn34.pth" "$d/rn34.st"
    [ "$status" -eq 0 ]
    [ "$(field dropped)" = 36 ] # the num_batches_tracked buffers
    python3 "$PEER" --init "$d/init.st" --width 64 --size 257 --classes 3 --batch 1 --threads 2
    run env SSD_PEER_INIT="$d/init.st" SSD_PEER_OUT="$d/ours.st" SSD_PEER_BACKBONE="$d/rn34.st" SSD_PEER_STEP=0 \
        "$DRIVER" peer_dump
    [ "$status" -eq 0 ]
    [[ "$output" == *"- peer_dump"* && "$output" != *"not ok"* ]]
    run --separate-stderr python3 "$PEER" --compare "$d/ours.st" --backbone "$d/rn34.st"
    [ "$status" -eq 0 ]
    [ "$(field ok)" = true ]
    [ "$(field backbone_max_diff)" = 0.0 ]
    # conv1, bn1 (4), layer1..3's 13 blocks (2 convs + 2 BNs of 4 tensors: 10 each) and 2 downsamples (5 each)
    [ "$(field backbone_tensors)" = $((1 + 4 + 13 * 10 + 2 * 5)) ]
}

@test "ssd.py --convert: a file that is not a state dict is bad input (3), a missing one I/O (4)" {
    need_torch
    echo "not a pickle" > "$BATS_TEST_TMPDIR/x.pth"
    run python3 "$PEER" --convert "$BATS_TEST_TMPDIR/x.pth" "$BATS_TEST_TMPDIR/x.st"
    [ "$status" -eq 3 ]
    [[ "$output" == *"x.pth"* ]]
    [ ! -e "$BATS_TEST_TMPDIR/x.st" ]
    run python3 "$PEER" --convert "$BATS_TEST_TMPDIR/none.pth" "$BATS_TEST_TMPDIR/x.st"
    [ "$status" -eq 4 ]
}
