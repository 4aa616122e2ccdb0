#!/usr/bin/env bats
# The 3D U-Net's ops against PyTorch: the 3-D convolutions (kernels/conv3d_ref.c: forward,
# backward data, backward filter; the transposed 2x2x2 upsampling), instance norm + ReLU
# (kernels/instnorm_ref.c) and the Dice + cross-entropy loss (kernels/dice_ce_ref.c).
# contrib/peers/unet_ops.py runs torch.nn.functional's conv3d, conv_transpose3d, instance_norm and
# a transcription of MLPerf's DiceCELoss in float64 with autograd on the same inputs as
# build/tests/unit/test_unet_ops in its driver modes, in trainkit's layouts (NDHWC, KTRSC):
# convolutions and instance norm within 1e-5, the loss and dice within 1e-6 and their gradient
# within 1e-5 (1e-2 for bf16 logits). Skips when torch is not importable.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_unet_ops" REF="$TK_ROOT/contrib/peers/unet_ops.py"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null ||
        skip "torch is not importable (contrib/setup-deps.sh installs it)"
}

@test "unet-ops-oracle: conv3d (3x3x3/1, 3x3x3/2, 1x1x1, transposed 2x2x2/2), instnorm, Dice+CE match torch" {
    run --separate-stderr python3 "$REF" check "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 10 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
    [ -z "$stderr" ]
}

@test "unet-ops-oracle: flipped filters, another eps, the background in the Dice are caught (exit 1)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 10 ]
    # (a 1x1x1 filter is its own flip: that line alone passes)
    for l in "${lines[@]}"; do
        [[ "$l" == "conv-1x1x1 "*"  ok" || "$l" == *"  FAIL" ]] || { echo "$l"; return 1; }
    done
}

@test "unet-ops-oracle: the drivers refuse an unknown op or type, a short input, a label outside 0..2" {
    run --separate-stderr env TK_UNET_OPS_DRIVE=pool "$DRIVER" </dev/null
    [ "$status" -eq 2 ]
    [ "$stderr" = "test_unet_ops: error: TK_UNET_OPS_DRIVE must be conv3d or instnorm" ]
    run --separate-stderr env TK_UNET_OPS_DRIVE=instnorm "$DRIVER" <<<"1 2 1 0 0.5"
    [ "$status" -eq 3 ]
    [[ "$stderr" == *"x: value 1 of 2 missing"* ]]
    run --separate-stderr env TK_DICE_CE_DRIVE=f16 "$DRIVER" <<<"1 1"
    [ "$status" -eq 2 ]
    [[ "$stderr" == "test_unet_ops: error: TK_DICE_CE_DRIVE must be f32 or bf16"* ]]
    run --separate-stderr env TK_DICE_CE_DRIVE=f32 "$DRIVER" <<<$'1 2\n0 0 0 1\n0 0 0 3'
    [ "$status" -ne 0 ]
    [[ "$stderr" == *"label 3 at voxel 1 of sample 0"* ]]
}
