#!/usr/bin/env bats
# RNN-T's evaluation features as the data pipeline makes them (lib/workloads/rnnt/data.c
# rnnt_features: log-mel through the melfeat ops, then the 3 x 3 frame splicing) against PyTorch:
# contrib/peers/rnnt_features.py check, driven through build/tests/unit/test_rnnt_data, whose
# driver mode takes the spliced (B, T, 240) output apart into its 80-band frames (DALI's and
# features.py's settings, no dither): within 1e-4 relative. Skips when torch is not importable.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_rnnt_data" REF="$TK_ROOT/contrib/peers/rnnt_features.py"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None or u.find_spec('numpy') is None)" 2>/dev/null ||
        skip "torch or numpy is not importable (contrib/setup-deps.sh installs them)"
}

@test "rnnt-data-oracle: the pipeline's evaluation features match torch (DALI's and features.py's settings)" {
    run --separate-stderr python3 "$REF" check "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 4 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
}

@test "rnnt-data-oracle: a periodic window and the HTK mel scale are caught (exit 1)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  FAIL" ]] || { echo "$l"; return 1; }; done
}

@test "rnnt-data-oracle: the driver refuses an unknown mode and a short input" {
    run --separate-stderr env TK_MELFEAT_DRIVE=htk "$DRIVER" </dev/null
    [ "$status" -eq 2 ]
    [ "$stderr" = 'test_rnnt_data: error: TK_MELFEAT_DRIVE must be dali or torch, not "htk"' ]
    run --separate-stderr env TK_MELFEAT_DRIVE=dali "$DRIVER" <<<$'1\n3\n0.5 0.25'
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_rnnt_data: error: stdin: utterance 0: sample 2 of 3 missing" ]
}
