#!/usr/bin/env bats
# SSD's evaluation post-processing (kernels/ssd_nms_ref.c: decode, softmax, per-class NMS at IoU
# 0.5 over the best 200 candidates above 0.05, the best 200 per image) against PyTorch:
# contrib/peers/ssd_eval.py runs a transcription of the MLPerf v1.x reference's decode_single
# (stable sorts) and torchvision.ops.batched_nms on the same random SSD300 inputs as
# build/tests/unit/test_ssd_nms in its driver mode (logits in fp32 and bf16 within 1e-5; a case
# full of tied scores bit for bit). Skips when torch or torchvision is not importable.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_ssd_nms" REF="$TK_ROOT/contrib/peers/ssd_eval.py"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None or u.find_spec('torchvision') is None)" 2>/dev/null ||
        skip "torch and torchvision are not importable (contrib/setup-deps.sh installs them)"
}

@test "ssd-nms-oracle: decode + softmax + NMS match the reference's transcription and torchvision" {
    run --separate-stderr python3 "$REF" check "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 5 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
    [ -z "$stderr" ]
}

@test "ssd-nms-oracle: an IoU threshold of 0.45 in the peers is caught (exit 1)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 5 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  FAIL" ]] || { echo "$l"; return 1; }; done
}

@test "ssd-nms-oracle: the driver refuses a short input and an unknown type" {
    run --separate-stderr env TK_SSD_NMS_DRIVE=1 "$DRIVER" <<<"1 2 3 1 200 200 f32 0 0 0.5 0.5"
    [ "$status" -eq 3 ]
    [[ "$stderr" == *"default boxes: value 4 of 8 missing"* ]]
    run --separate-stderr env TK_SSD_NMS_DRIVE=1 "$DRIVER" <<<"1 2 3 1 200 200 f16"
    [ "$status" -eq 2 ]
    [[ "$stderr" == "test_ssd_nms: error: type must be f32 or bf16, not f16"* ]]
}
