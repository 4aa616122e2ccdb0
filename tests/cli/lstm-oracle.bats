#!/usr/bin/env bats
# The LSTM (kernels/lstm_ref.c) against PyTorch: contrib/peers/lstm_ops.py runs torch.nn.LSTM in
# float64 with autograd on pack_padded_sequence batches (MLPerf's rnn_speech_recognition feeds
# its LSTMs so), with the same weights (PyTorch's layout and gate order), lengths, h0, c0 and
# loss weights as build/tests/unit/test_lstm in its driver mode: y, hn, cn and every gradient
# (dx, dh0, dc0, each layer's weights and biases) within 1e-5 (1e-2 for bf16); with dropout the
# driver's masks between single-layer LSTMs. Skips when torch is not importable.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_lstm" REF="$TK_ROOT/contrib/peers/lstm_ops.py"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null ||
        skip "torch is not importable (contrib/setup-deps.sh installs it)"
}

@test "lstm-oracle: outputs, final states and all gradients match torch.nn.LSTM (fp32, bf16; lengths, dropout)" {
    run --separate-stderr python3 "$REF" check "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 5 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
    [ -z "$stderr" ]
}

@test "lstm-oracle: gates in another order and ignored lengths are caught (exit 1)" {
    run --separate-stderr python3 "$REF" check "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 5 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  FAIL" ]] || { echo "$l"; return 1; }; done
}

@test "lstm-oracle: the driver refuses an unknown type, a bad shape line, a short input" {
    run --separate-stderr env TK_LSTM_DRIVE=f16 "$DRIVER" </dev/null
    [ "$status" -eq 2 ]
    [ "$stderr" = 'test_lstm: error: TK_LSTM_DRIVE must be f32 or bf16, not "f16"' ]
    run --separate-stderr env TK_LSTM_DRIVE=f32 "$DRIVER" <<<'1 2 1 1 1 1.5 0 1 0'
    [ "$status" -eq 3 ]
    [[ "$stderr" == 'test_lstm: error: stdin: no "L T B I H p last seed step" line'* ]]
    run --separate-stderr env TK_LSTM_DRIVE=f32 "$DRIVER" <<<'1 2 1 1 1 0.5 2 1 0'
    [ "$status" -eq 3 ]
    run --separate-stderr env TK_LSTM_DRIVE=f32 "$DRIVER" <<<$'1 1 1 1 1 0 0 1 0\n1\n0 0 0 0'
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_lstm: error: stdin: value 4 of 19 missing" ]
    # one step, zero weights: gates 1/2, g 0, c = c0 / 2, h = tanh(c) / 2
    input=$'1 1 1 1 1 0 0 1 0\n1\n0 0 0 0\n0 0 0 0\n0 0 0 0\n0 0 0 0\n1\n0\n2\n0\n0\n0'
    run --separate-stderr env TK_LSTM_DRIVE=f32 "$DRIVER" <<<"$input"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "y 1" ]
    [ "${lines[1]}" = "0.380797088" ]
    [ "${lines[4]}" = "cn 1" ]
    [ "${lines[5]}" = "1" ]
}
