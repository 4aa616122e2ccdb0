#!/usr/bin/env bats
# The 3D U-Net's Dice + cross-entropy loss (kernels/dice_ce_ref.c) against PyTorch:
# contrib/peers/unet_loss.py transcribes MLPerf's DiceCELoss in float64 with autograd and compares
# the loss, the per-sample Dice and the gradient that build/tests/unit/test_unet_ops prints in its
# TK_DICE_CE_DRIVE mode on the same random logits and labels (fp32: 1e-6 loss and dice, 1e-5
# gradient; bf16 logits: 1e-2 gradient). Skips when torch is not importable.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_unet_ops" REF="$TK_ROOT/contrib/peers/unet_loss.py"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null ||
        skip "torch is not importable (contrib/setup-deps.sh installs it)"
}

@test "unet-loss-oracle: loss, dice and gradient match torch (fp32, bf16, a sample without tumor)" {
    run --separate-stderr python3 "$REF" check "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 4 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
    [ -z "$stderr" ]
}

@test "unet-loss-oracle: an oracle with the background in its Dice is caught (exit 1, FAIL lines)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 4 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  FAIL" ]] || { echo "$l"; return 1; }; done
}

@test "unet-loss-oracle: the driver refuses a bad type and a label outside 0..2" {
    run --separate-stderr env TK_DICE_CE_DRIVE=f16 "$DRIVER" <<<"1 1"
    [ "$status" -eq 2 ]
    [[ "$stderr" == "test_unet_ops: error: TK_DICE_CE_DRIVE must be f32 or bf16"* ]]
    run --separate-stderr env TK_DICE_CE_DRIVE=f32 "$DRIVER" <<<$'1 2\n0 0 0 1\n0 0 0 3'
    [ "$status" -ne 0 ]
    [[ "$stderr" == *"label 3 at voxel 1 of sample 0"* ]]
}
