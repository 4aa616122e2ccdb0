#!/usr/bin/env bats
# The 3D U-Net's network (lib/workloads/unet3d/model.c, step.c) against its PyTorch peer
# (contrib/peers/unet3d.py): the peer's weights and batch (--init, the ktrsc layout) stepped by
# trainkit's cpu backend (tests/unit/test_unet3d_model's peer_dump writes the step dump's keys:
# the weights, batch.image, batch.label, loss, dice, grad.NAME), then unet3d.py --compare recomputes
# the step in float64 and checks the loss, the dice and every gradient (its default tolerances:
# 1e-5, 2e-3 relative). Skips when torch is not importable.

bats_require_minimum_version 1.5.0

load torch

setup() {
    PEER="$TK_ROOT/contrib/peers/unet3d.py"
    DRIVER="${TK_BIN%/bin}/tests/unit/test_unet3d_model"
}

field() { python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])[sys.argv[2]]))' "$output" "$1"; }

# width W, crop C (D,H,W), batch B: the peer's init, our step, the peer's comparison
compare() {
    local w=$1 crop=$2 b=$3 d="$BATS_FILE_TMPDIR/w$1"
    mkdir -p "$d"
    python3 "$PEER" --init "$d/init.st" --layout ktrsc --width "$w" --crop "$crop" --batch "$b" --seed 3
    run env U3_PEER_INIT="$d/init.st" U3_PEER_OUT="$d/ours.st" U3_PEER_WIDTH="$w" U3_PEER_CROP="$crop" \
        U3_PEER_BATCH="$b" "$DRIVER" peer_dump
    [ "$status" -eq 0 ] || { echo "$output"; return 1; }
    [[ "$output" == *" - peer_dump"* && "$output" != *"not ok"* ]]
    run --separate-stderr python3 "$PEER" --compare "$d/ours.st" --threads 2
    echo "$output $stderr"
}

@test "unet3d step: loss, dice and all 78 gradients as PyTorch's float64 step (width 2, 64x32x32, batch 2)" {
    need_torch
    compare 2 64,32,32 2
    [ "$status" -eq 0 ]
    [ "$(field ok)" = true ]
    [ "$(field tensors)" = 78 ]
    # measured: loss 2.5e-8 relative, worst gradient 1.1e-4 (torch's own fp32 step: 1.1e-3)
    python3 -c 'import json, sys; o = json.loads(sys.argv[1]); sys.exit(not (o["loss_rel"] < 1e-6 and o["grad_rel_max"] < 1e-3))' "$output"
}

@test "unet3d step: the same at width 3, a 32x64x32 crop, batch 1 (odd channel counts, another long side)" {
    need_torch
    compare 3 32,64,32 1
    [ "$status" -eq 0 ]
    [ "$(field ok)" = true ]
}

@test "unet3d step: a wrong gradient is caught (the dump's grad of one tensor scaled)" {
    need_torch
    # the first test's dump, else made here
    [ -s "$BATS_FILE_TMPDIR/w2/ours.st" ] || compare 2 64,32,32 2
    cp "$BATS_FILE_TMPDIR/w2/ours.st" "$BATS_TEST_TMPDIR/ours.st"
    python3 - "$BATS_TEST_TMPDIR/ours.st" <<'PY'
import sys
from safetensors.torch import load_file, save_file
from safetensors import safe_open
p = sys.argv[1]
with safe_open(p, "pt") as f:
    meta = f.metadata()
t = load_file(p)
t["grad.downsample.2.conv1.0.weight"] *= 1.01
save_file(t, p, metadata=meta)
PY
    run --separate-stderr python3 "$PEER" --compare "$BATS_TEST_TMPDIR/ours.st" --threads 2 --no-floor
    [ "$status" -eq 1 ]
    [ "$(field grad_worst)" = '"downsample.2.conv1.0.weight"' ]
}
