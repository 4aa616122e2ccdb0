#!/usr/bin/env bats
# The RNN-T's network (lib/workloads/rnnt/model.c) against its PyTorch peer (contrib/peers/rnnt.py):
# build/tests/unit/test_rnnt_model in its driver mode (TK_RNNT_DRIVE) initializes a tiny model
# with trainkit's init (3 utterances, 9 frames: an odd count, so StackTime pads; 2 + 3 encoder
# layers, 2 prediction layers, 5 classes), steps one batch in fp32 on the cpu backend and prints
# the weights, the batch, the loss and the 35 gradients; rnnt.py --compare builds the reference
# model from those weights in float64 and checks the loss and every gradient within 1e-5
# norm-wise relative (measured: 2.3e-7 at worst, with and without dropout). --decode: the greedy
# decoder's hypotheses on a model of N(0, 1) weights (the driver's decode mode) equal those of
# rnnt.py's transcription of the reference's RNNTGreedyDecoder. Skips when torch is not importable.

bats_require_minimum_version 1.5.0

load torch

setup() {
    PEER="$TK_ROOT/contrib/peers/rnnt.py"
    DRIVER="${TK_BIN%/bin}/tests/unit/test_rnnt_model"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
}

all_ok() {
    [ "${#lines[@]}" -eq 36 ] || { echo "${#lines[@]} lines: $output"; return 1; }
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
}

@test "rnnt-peer: the reference model's parameter count is the model's (49,006,080)" {
    need_torch
    run --separate-stderr python3 "$PEER" --count
    [ "$status" -eq 0 ]
    [ "$output" = 49006080 ]
}

@test "rnnt-peer: one step without dropout: the loss and all 35 gradients as torch's float64 step" {
    need_torch
    run --separate-stderr python3 "$PEER" --compare "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    all_ok
}

@test "rnnt-peer: one step with dropout (trainkit's masks multiplied in on the torch side)" {
    need_torch
    run --separate-stderr python3 "$PEER" --compare "$DRIVER" --dropout
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    all_ok
}

@test "rnnt-peer: frames stacked in the other order are caught (exit 1)" {
    need_torch
    run --separate-stderr python3 "$PEER" --compare "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [[ "$output" == *"grad.encoder.pre_rnn.lstm.weight_ih_l0  "*"  FAIL"* ]]
}

@test "rnnt-peer: greedy decoding gives the hypotheses of a torch transcription of the reference's decoder" {
    need_torch
    run --separate-stderr python3 "$PEER" --decode "$DRIVER"
    [ "$status" -eq 0 ] || { echo "exit $status: $output $stderr"; return 1; }
    [ "${#lines[@]}" -eq 4 ]
    for l in "${lines[@]}"; do [[ "$l" == *"  ok" ]] || { echo "$l"; return 1; }; done
    # the hypotheses end in all three ways: the cap (10), the blank and 3 symbols a frame
    [[ "$output" == *"utterance 1  10 symbols  ok"* ]]
}

@test "rnnt-peer: a decoder starting from embedding row 0 instead of the zero input is caught (exit 1)" {
    need_torch
    run --separate-stderr python3 "$PEER" --decode "$DRIVER" --perturb
    [ "$status" -eq 1 ]
    [[ "$output" == *"  FAIL"* ]]
}
