#!/usr/bin/env bats
# SSD300's input pipeline against the MLPerf v1.x reference's pieces: contrib/peers/ssd_data.py
# runs torchvision's ColorJitter ops on PIL images (byte-exact: kernels/img_jitter_px.c follows
# Pillow's uint8 arithmetic, which is what the reference jitters), torchvision's ColorJitter class
# under a torch seed, a transcription of the reference's SSDCropping (two-sample chi-square of
# option, boxes kept, rounds and crop area, p >= 1e-4) and PIL's crop + bilinear resize (within 1
# per byte) against build/tests/unit/test_ssd_data in its driver modes, and whole samples: the
# driver's crop, flip and jitter draws replayed through the reference's own operations (boxes
# within 1e-6, pixels within the documented bound: Pillow's resize rounding, amplified by the hue
# round trip). Skips when torch, torchvision or PIL is not importable.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_ssd_data" REF="$TK_ROOT/contrib/peers/ssd_data.py"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    python3 -c "import torch, torchvision, PIL, numpy" 2>/dev/null ||
        skip "torch, torchvision, PIL or numpy is not importable (contrib/setup-deps.sh installs them)"
}

@test "ssd-data-oracle: colour jitter byte-exact, SSDCropping's distribution, resize within 1 of PIL, samples" {
    run --separate-stderr python3 "$REF" check "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 24 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
    [ -z "$stderr" ]
}

@test "ssd-data-oracle: a fixed jitter order, 50 crop attempts, NEAREST resizing, no mirror are caught (exit 1)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 24 ]
    for l in "${lines[@]}"; do
        [[ "$l" == *"  FAIL" ]] || { echo "$l"; return 1; }
    done
}

@test "ssd-data-oracle: the driver refuses an unknown mode, short pixels, a crop outside the image, a missing JPEG" {
    run --separate-stderr env TK_SSD_DATA_DRIVE=blur "$DRIVER" </dev/null
    [ "$status" -eq 2 ]
    [ "$stderr" = "test_ssd_data: error: TK_SSD_DATA_DRIVE must be jitter, crop, resize or sample" ]
    run --separate-stderr env TK_SSD_DATA_DRIVE=jitter "$DRIVER" <<<"2 1 0 1 2 3 1 1 1 0 1 2 3 4 5"
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_ssd_data: error: pixel byte 5 of 6 missing or outside 0..255" ]
    run --separate-stderr env TK_SSD_DATA_DRIVE=resize "$DRIVER" <<<"4 4 0 0 5 4 2"
    [ "$status" -eq 3 ]
    [[ "$stderr" == "test_ssd_data: error: a crop inside a W x H image"* ]]
    run --separate-stderr env TK_SSD_DATA_DRIVE=sample "$DRIVER" <<<"/nonexistent.jpg 1 0 1 300 4 4 0"
    [ "$status" -eq 4 ]
    [ "$stderr" = "test_ssd_data: error: /nonexistent.jpg: cannot open" ]
}
