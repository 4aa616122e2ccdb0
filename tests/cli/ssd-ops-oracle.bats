#!/usr/bin/env bats
# SSD300's box math against MLPerf's own code: contrib/peers/ssd_ops.py runs a transcription of the
# v1.x reference's DefaultBoxes/dboxes300_coco, calc_iou_tensor and Encoder.encode (float32, as
# its data loader) and Loss.forward (float64, gradients by autograd; stable sorts in the mining) on
# random ground truths and predictions, and build/tests/unit/test_ssd_box --drive runs the same
# with kernels/ssd_box.h on the cpu backend: default boxes and matched boxes bit for bit, labels
# and mining weights identical, loss and gradients within 1e-6. Cases: the 8732 boxes of
# dboxes300_coco with 81 classes; a 4 x 4 grid of default boxes where positives are ranked in as
# negatives (weight 2) and cross-entropies tie. Skips when torch is not importable.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_ssd_box" REF="$TK_ROOT/contrib/peers/ssd_ops.py"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null ||
        skip "torch is not importable (contrib/setup-deps.sh installs it)"
}

@test "ssd-ops-oracle: default boxes, matching, mining, loss and gradients match the reference's" {
    run --separate-stderr python3 "$REF" check "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 2 ]
    for l in "${lines[@]}"; do
        [[ "$l" == *" dboxes diff 0 boxes diff 0 labels diff 0 sel diff 0 loss rel "*"  ok" ]] || { echo "$l"; return 1; }
    done
    [[ "${lines[0]}" == "ssd300 N 3 D 8732 C 81 positives "*" weight-2 0 "* ]]
    [[ "${lines[1]}" == "grid N 2 D 16 C 5 positives 6 weight-2 4 "* ]]
    [ -z "$stderr" ]
}

@test "ssd-ops-oracle: a reference that breaks mining ties the other way is caught (exit 1)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "ssd300 "*"  ok" ]] # random logits: no ties at the mining's threshold
    [[ "${lines[1]}" == "grid "*" sel diff 8 "*"  FAIL sel loss dconf" ]]
}

@test "ssd-ops-oracle: the driver refuses a missing directory, bad parameters, a short file" {
    run --separate-stderr "$DRIVER" --drive "$BATS_TEST_TMPDIR/none"
    [ "$status" -eq 4 ]
    [ "$stderr" = "test_ssd_box: error: $BATS_TEST_TMPDIR/none/params.txt: cannot open" ]
    d="$BATS_TEST_TMPDIR/d" && mkdir -p "$d"
    echo "1 0 1 0" >"$d/params.txt"
    run --separate-stderr "$DRIVER" --drive "$d"
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_ssd_box: error: $d/params.txt: not \"N D C NGT\" (N 1..256, D 0..100000, C 2..1000)" ]
    echo "1 0 3 2" >"$d/params.txt" && head -c 20 /dev/zero >"$d/gt.f32"
    run --separate-stderr "$DRIVER" --drive "$d"
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_ssd_box: error: $d/gt.f32: 20 bytes, expected 32" ]
}
