#!/usr/bin/env bats
# RNN-T's log-mel features (kernels/melfeat_ref.c) against PyTorch: contrib/peers/rnnt_features.py
# computes them in float64 with torch.stft (center, reflect padding) and its own numpy
# transcription of librosa's Slaney mel filterbank, following features.py's FilterbankFeatures
# (torch.hann_window(periodic=False), log(x + 1e-20), std with Bessel's correction + 1e-5) and
# DALI's training pipeline (half-sample Hann, ln(max(x, 1e-20)), std without it), on random audio
# of several lengths (1 sample, shorter than a window, a multiple of the hop, up to 2 s) driven
# through build/tests/unit/test_melfeat: within 1e-4 relative on the normalized log-mel (fp32).
# Skips when torch is not importable.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_melfeat" REF="$TK_ROOT/contrib/peers/rnnt_features.py"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None or u.find_spec('numpy') is None)" 2>/dev/null ||
        skip "torch or numpy is not importable (contrib/setup-deps.sh installs them)"
}

@test "rnnt-features-oracle: the log-mel features match torch (DALI's and features.py's settings)" {
    run --separate-stderr python3 "$REF" check "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 4 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
}

@test "rnnt-features-oracle: a periodic window and the HTK mel scale are caught (exit 1)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 4 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  FAIL" ]] || { echo "$l"; return 1; }; done
}

@test "rnnt-features-oracle: the driver refuses an unknown mode and a short input" {
    run --separate-stderr env TK_MELFEAT_DRIVE=htk "$DRIVER" </dev/null
    [ "$status" -eq 2 ]
    [ "$stderr" = 'test_melfeat: error: TK_MELFEAT_DRIVE must be dali or torch, not "htk"' ]
    run --separate-stderr env TK_MELFEAT_DRIVE=dali "$DRIVER" <<<$'1\n3\n0.5 0.25'
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_melfeat: error: stdin: utterance 0: sample 2 of 3 missing" ]
    run --separate-stderr env TK_MELFEAT_DRIVE=dali "$DRIVER" <<<$'1\n1\n0.5'
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "utt 0 1" ]
}
