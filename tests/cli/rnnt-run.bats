#!/usr/bin/env bats
# share/workloads/rnnt/run.sh end to end on the cpu at its smallest (1 synthetic training speaker:
# 16 utterances, 2 steps): prep synth librispeech -> prep librispeech -> train-step with
# evaluation -> evaluate -> log-check (and MLCommons' checker when installed); the one result
# line, the target not reached (exit 1) and the checks ok but for the evaluation set's size and
# the target; option errors are exit 2. Then --size tiny learns: a short run (12 of tiny.json's
# 30 epochs) takes the WER below the untrained net's 1 (the whole run reaching tiny.json's
# target takes about 5 minutes of 2 cores: too long here); and the synthetic set's manifest
# carries that target for the calibrated set only. Skips when espeak-ng, sox or sentencepiece
# are missing.

need_tools() { for t in espeak-ng sox spm_train spm_encode; do command -v $t >/dev/null || skip "$t is not installed"; done; }

@test "rnnt run.sh: synthetic LibriSpeech to a checked MLLOG on the cpu" {
    need_tools
    run "$TK_ROOT/share/workloads/rnnt/run.sh" -o "$BATS_TEST_TMPDIR/o" --speakers 1 --backend cpu -- --max-steps 2
    echo "$output"
    [ "$status" -eq 1 ] # (the target not reached in 2 steps)
    line=$(echo "$output" | grep '^rnnt: ')
    [[ "$line" == *"reached=false wer="* ]]
    [[ "$line" == *"checks=ok log_check=known:CHECK_FAILED:eval_samples,ATLEAST_ONE_CHECK_FAILED:eval_accuracy"* ]]
    if python3 -c 'import mlperf_logging' 2>/dev/null; then [[ "$line" == *"checker=known:"*"2703"* ]]; fi
    [ -f "$BATS_TEST_TMPDIR/o/librispeech24.model" ]
    [ "$(jq -r 'select(.type == "eval") | .eval_samples' "$BATS_TEST_TMPDIR/o/evaluate.jsonl")" = 16 ]
    grep -q '"key": "weights_initialization"' "$BATS_TEST_TMPDIR/o/rnnt.mllog"
}

@test "rnnt run.sh: option errors are exit 2" {
    run "$TK_ROOT/share/workloads/rnnt/run.sh" -o "$BATS_TEST_TMPDIR/o" --backend cpu --size big
    [ "$status" -eq 2 ]
    [[ "$output" == *"run.sh: --size must be tiny, rnnt or synth"* ]]
    run "$TK_ROOT/share/workloads/rnnt/run.sh" -o "$BATS_TEST_TMPDIR/o" --backend cpu --speakers 0
    [ "$status" -eq 2 ]
    [[ "$output" == *"run.sh: --speakers must be a number in [1, 10000]"* ]]
    run "$TK_ROOT/share/workloads/rnnt/run.sh" -o "$BATS_TEST_TMPDIR/o" --backend cpu --vocab 2
    [ "$status" -eq 2 ]
    [[ "$output" == *"run.sh: --vocab must be a number in [8, 1023]"* ]]
    run "$TK_ROOT/share/workloads/rnnt/run.sh" --bogus
    [ "$status" -eq 2 ]
}

@test "rnnt run.sh --size tiny: training takes the WER below the untrained net's" {
    need_tools
    run "$TK_ROOT/share/workloads/rnnt/run.sh" -o "$BATS_TEST_TMPDIR/o" --size tiny --backend cpu -- --max-steps 192
    echo "$output"
    [ "$status" -le 1 ]
    # the evaluations after each epoch: the first one's (one epoch in, still blanks or garbage) is
    # the untrained net's 1; the last one below it (words transcribed)
    run jq -r 'select(.type == "eval") | .wer' "$BATS_TEST_TMPDIR/o/train.jsonl"
    echo "$output"
    [ "${#lines[@]}" -ge 2 ]
    awk -v w="${lines[0]}" 'BEGIN { exit !(w >= 1) }'
    awk -v w="${lines[${#lines[@]} - 1]}" 'BEGIN { exit !(w < 0.9) }'
}

@test "prep synth librispeech: the set run.sh --size tiny makes carries tiny.json's target; others null" {
    need_tools
    target=$(jq -r .target.wer "$TK_ROOT/share/workloads/rnnt/tiny.json")
    syn=(--speakers 8 --dev-speakers 1 --chapters 2 --utterances 8 --lexicon 4 --voices 1 --rate 150)
    "$TK_BIN/prep" synth librispeech -o "$BATS_TEST_TMPDIR/a" "${syn[@]}" --seed 2 >/dev/null
    [ "$(jq -r .wer_target "$BATS_TEST_TMPDIR/a/manifest.json")" = "$target" ]
    jq -e '.wer_target_how | contains("tiny.json")' "$BATS_TEST_TMPDIR/a/manifest.json"
    # the lexicon: five words a sentence, of the 12 the first 4 of each class make
    cat "$BATS_TEST_TMPDIR"/a/LibriSpeech/*/*/*/*.trans.txt | cut -d' ' -f2- | tr ' ' '\n' | sort -u >"$BATS_TEST_TMPDIR/words"
    [ "$(wc -l <"$BATS_TEST_TMPDIR/words")" -le 12 ]
    ! cat "$BATS_TEST_TMPDIR"/a/LibriSpeech/*/*/*/*.trans.txt | awk 'NF != 6' | grep .
    # dev-clean speaks with the training voice
    [ "$(jq -r '.speakers["dev-clean"][0].voice' "$BATS_TEST_TMPDIR/a/manifest.json")" = \
      "$(jq -r '.speakers["train-clean-100"][0].voice' "$BATS_TEST_TMPDIR/a/manifest.json")" ]
    # another seed (or size) than the calibrated ones: no target
    "$TK_BIN/prep" synth librispeech -o "$BATS_TEST_TMPDIR/b" --speakers 1 --dev-speakers 1 --chapters 1 \
        --utterances 2 --lexicon 4 --voices 1 --rate 150 --seed 4 >/dev/null
    [ "$(jq -r .wer_target "$BATS_TEST_TMPDIR/b/manifest.json")" = null ]
}

@test "prep synth librispeech: the set run.sh --size synth makes carries synth.json's target" {
    need_tools
    target=$(jq -r .target.wer "$TK_ROOT/share/workloads/rnnt/synth.json")
    [ "$target" != "$(jq -r .target.wer "$TK_ROOT/share/workloads/rnnt/tiny.json")" ]
    # the options run.sh --size synth passes (--speakers 96, --dev-speakers 4), seed 3
    "$TK_BIN/prep" synth librispeech -o "$BATS_TEST_TMPDIR/s" --speakers 96 --dev-speakers 4 --chapters 2 \
        --utterances 8 --seed 3 >/dev/null
    [ "$(jq -r .wer_target "$BATS_TEST_TMPDIR/s/manifest.json")" = "$target" ]
    jq -e '.wer_target_how | contains("synth.json")' "$BATS_TEST_TMPDIR/s/manifest.json"
    [ "$(jq -c '[.utterances["train-clean-100"], .utterances["dev-clean"]]' "$BATS_TEST_TMPDIR/s/manifest.json")" = '[1536,64]' ]
    grep -q -- '--speakers 96' "$TK_ROOT/share/workloads/rnnt/run.sh" || grep -q 'speakers:=96' "$TK_ROOT/share/workloads/rnnt/run.sh"
    grep -q 'dev=4' "$TK_ROOT/share/workloads/rnnt/run.sh"
}
