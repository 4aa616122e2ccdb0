#!/usr/bin/env bats
# The 3D U-Net's sliding-window evaluation against MLPerf's own code: contrib/peers/unet_eval.py
# runs a transcription of the reference's sliding_window_inference, gaussian_kernel, pad_input
# (runtime/inference.py) and DiceScore (model/losses.py) in PyTorch on volumes and a stand-in
# network (1x1x1 Conv3d plus a fixed per-window-position tensor, exact in fp32), and
# build/tests/unit/test_unet_eval --drive evaluates the same with kernels/swin.h and
# kernels/dice_score.h on the cpu backend: the same importance maps and argmax maps, the divided sums within 1e-6 (they
# come out bit for bit), both Dice values within 1e-6. Cases: roi 128 with a crop and a pad, roi 32
# with 30 windows in batches of 4, roi 16 padded on two axes, overlap 0, overlap 0.8 (stride
# int(30 * 0.2) = 5); then the mean over those cases as evaluate() reduces it on 1, 2 and 3 ranks
# (per rank the mean of its np.array_split run, then the mean of the ranks') against
# test_unet_eval --mean. Skips when torch or scipy is not importable.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_unet_eval" REF="$TK_ROOT/contrib/peers/unet_eval.py"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None or u.find_spec('scipy') is None)" 2>/dev/null ||
        skip "torch or scipy is not importable (contrib/setup-deps.sh installs them)"
}

@test "unet-eval-oracle: grid, importance map, weighted sums, argmax and Dice match the reference's evaluation" {
    run --separate-stderr python3 "$REF" check "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 8 ]
    for l in "${lines[@]:0:5}"; do [[ "$l" == *"argmax diff 0 of "*"  ok" ]] || { echo "$l"; return 1; }; done
    for l in "${lines[@]:5}"; do [[ "$l" == "mean-over-"*" 5 cases "*"  ok" ]] || { echo "$l"; return 1; }; done
    [[ "${lines[0]}" == "roi128-crop-pad "*"grid 2 1 2 crop 0 1 4 out 160 128 192 pad 16 0 0 "* ]]
    [ -z "$stderr" ]
}

@test "unet-eval-oracle: a reference map without the cube root is caught (exit 1)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 8 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  FAIL "* ]] || { echo "$l"; return 1; }; done
    # (with overlap 0 no two windows meet and the map divides out of the sums: only the map tells)
    [[ "${lines[3]}" == "roi32-overlap0 "*"  FAIL map" ]]
}

@test "unet-eval-oracle: the mean over cases is the mean of the ranks' means (np.array_split runs)" {
    run --separate-stderr "$DRIVER" --mean 2 <<<$'1 0.5\n1 0.5\n1 0.5\n0 0.5\n0 0.5'
    [ "$status" -eq 0 ]
    [ "$output" = "mean 0.5 0.5 0.5" ] # ranks: (1 + 1 + 1) / 3 and (0 + 0) / 2; all 5 cases: 0.6
    run --separate-stderr "$DRIVER" --mean 1 <<<$'1 0.5\n1 0.5\n1 0.5\n0 0.5\n0 0.5'
    [ "$output" = "mean 0.600000024 0.5 0.550000012" ]
    run --separate-stderr "$DRIVER" --mean 6 <<<$'1 0.5\n1 0.5\n1 0.5\n0 0.5\n0 0.5'
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_unet_eval: error: dice mean: 5 cases over 6 ranks (the reference needs a case on every rank)" ]
}

@test "unet-eval-oracle: the driver refuses a missing directory, a short file, a shape the reference breaks on" {
    run --separate-stderr "$DRIVER" --drive "$BATS_TEST_TMPDIR/none"
    [ "$status" -eq 4 ]
    [ "$stderr" = "test_unet_eval: error: $BATS_TEST_TMPDIR/none/params.txt: cannot open" ]
    d="$BATS_TEST_TMPDIR/d" && mkdir -p "$d"
    echo "128 70 128 128 0.5 1" >"$d/params.txt"
    run --separate-stderr "$DRIVER" --drive "$d"
    [ "$status" -eq 3 ]
    [[ "$stderr" == *"axis 1 of 70 voxels with roi 128 stride 64: the reference crops it to 64"* ]]
    echo "4 4 4 4 0.5 1" >"$d/params.txt" && head -c 100 /dev/zero >"$d/image.f32"
    run --separate-stderr "$DRIVER" --drive "$d"
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_unet_eval: error: $d/image.f32: 100 bytes, expected 256" ]
}
