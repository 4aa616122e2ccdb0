#!/usr/bin/env bats
# share/workloads/rnnt/run.sh end to end on the cpu at its smallest (1 synthetic training speaker:
# 16 utterances, 2 steps): prep synth librispeech -> prep librispeech -> train-step with
# evaluation -> evaluate -> log-check (and MLCommons' checker when installed); the one result
# line, the target not reached (exit 1) and the checks ok but for the evaluation set's size and
# the target; option errors are exit 2. Skips when espeak-ng, sox or sentencepiece are missing.

@test "rnnt run.sh: synthetic LibriSpeech to a checked MLLOG on the cpu" {
    for t in espeak-ng sox spm_train spm_encode; do command -v $t >/dev/null || skip "$t is not installed"; done
    run "$TK_ROOT/share/workloads/rnnt/run.sh" -o "$BATS_TEST_TMPDIR/o" --speakers 1 --backend cpu -- --max-steps 2
    echo "$output"
    [ "$status" -eq 1 ] # (the target not reached in 2 steps)
    line=$(echo "$output" | grep '^rnnt: ')
    [[ "$line" == *"reached=false wer="* ]]
    [[ "$line" == *"checks=ok log_check=known:CHECK_FAILED:eval_samples,ATLEAST_ONE_CHECK_FAILED:eval_accuracy"* ]]
    if python3 -c 'import mlperf_logging' 2>/dev/null; then [[ "$line" == *"checker=known:"*"2703"* ]]; fi
    [ -f "$BATS_TEST_TMPDIR/o/librispeech40.model" ]
    [ "$(jq -r 'select(.type == "eval") | .eval_samples' "$BATS_TEST_TMPDIR/o/evaluate.jsonl")" = 16 ]
    grep -q '"key": "weights_initialization"' "$BATS_TEST_TMPDIR/o/rnnt.mllog"
}

@test "rnnt run.sh: option errors are exit 2" {
    run "$TK_ROOT/share/workloads/rnnt/run.sh" -o "$BATS_TEST_TMPDIR/o" --backend cpu --size big
    [ "$status" -eq 2 ]
    [[ "$output" == *"run.sh: --size must be tiny or rnnt"* ]]
    run "$TK_ROOT/share/workloads/rnnt/run.sh" -o "$BATS_TEST_TMPDIR/o" --backend cpu --speakers 0
    [ "$status" -eq 2 ]
    [[ "$output" == *"run.sh: --speakers must be a number in [1, 10000]"* ]]
    run "$TK_ROOT/share/workloads/rnnt/run.sh" -o "$BATS_TEST_TMPDIR/o" --backend cpu --vocab 2
    [ "$status" -eq 2 ]
    [[ "$output" == *"run.sh: --vocab must be a number in [8, 1023]"* ]]
    run "$TK_ROOT/share/workloads/rnnt/run.sh" --bogus
    [ "$status" -eq 2 ]
}
