#!/usr/bin/env bats
# The RNN-T loss (kernels/rnnt_ref.c) against PyTorch: contrib/peers/rnnt_ops.py transcribes the
# transducer lattice recursion (warp-transducer's loss as MLPerf's rnn_speech_recognition uses it:
# blank the last logit, reduction "mean" = sum over the batch / batch size) in float64 with
# autograd, on the same random shapes, lengths, labels and logits as build/tests/unit/test_rnnt in
# its driver mode, packed and padded rows: loss and per-utterance costs within 1e-6, the gradient
# within 1e-6 (1e-2 for bf16 logits). torchaudio.functional.rnnt_loss would serve too but is not
# installed beside this torch. Skips when torch is not importable.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_rnnt" REF="$TK_ROOT/contrib/peers/rnnt_ops.py"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null ||
        skip "torch is not importable (contrib/setup-deps.sh installs it)"
}

@test "rnnt-oracle: loss, costs and the logits' gradient match torch (fp32, bf16; packed, padded)" {
    run --separate-stderr python3 "$REF" check "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 10 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
    [ -z "$stderr" ]
}

@test "rnnt-oracle: a blank at index 0 and a loss divided by the label lengths are caught (exit 1)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 10 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  FAIL" ]] || { echo "$l"; return 1; }; done
}

@test "rnnt-oracle: the driver refuses an unknown type, a short input, a label equal to the blank" {
    run --separate-stderr env TK_RNNT_DRIVE=f16 "$DRIVER" </dev/null
    [ "$status" -eq 2 ]
    [ "$stderr" = 'test_rnnt: error: TK_RNNT_DRIVE must be f32 or bf16, not "f16"' ]
    run --separate-stderr env TK_RNNT_DRIVE=f32 "$DRIVER" <<<$'1 3 2 1 1\n2 1 0\n0 0 0\n0 0 0\n0 0'
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_rnnt: error: stdin: logit 8 of 12 missing" ]
    run --separate-stderr env TK_RNNT_DRIVE=f32 "$DRIVER" <<<$'2 3 2 1 1\n1 0\n1 1 2\n0 0 0\n0 0 0\n0 0 0'
    [ "$status" -eq 70 ]
    [[ "$stderr" == "test_rnnt: error: rnnt: utterance 1: label 2 at 0 (0..2, not the blank 2)"* ]]
    run --separate-stderr env TK_RNNT_DRIVE=f32 "$DRIVER" <<<$'1 3 2 1 1\n1 0\n0 0 0'
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "loss 1.09861231" ]
}
