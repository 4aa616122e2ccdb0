#!/usr/bin/env bats
# RNN-T's data pipeline on prep's own records: `prep synth librispeech` speech through `prep
# librispeech` (a sentencepiece model trained on it), then build/tests/unit/test_rnnt_data's
# records mode (lib/workloads/rnnt/data.c, lib/speech/wer.c): every record of each subset loaded
# in order as one evaluation batch, its tokens decoded with the .vocab back to its transcript (the
# reference's detokenize of the targets gives the text that was tokenized), and its feature
# length ceil((samples / 160 + 1) / 3) after the 3 x 3 splicing. Skips when espeak-ng, sox,
# sentencepiece or libFLAC are missing (contrib/setup-deps.sh installs them).

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_rnnt_data"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
    for t in espeak-ng sox spm_train spm_encode; do command -v $t >/dev/null || skip "$t is not installed"; done
    prep librispeech -o /dev/null/x /nonexistent 2>&1 | grep -q 'built without libFLAC' && skip "prep was built without libFLAC"
    cd "$BATS_TEST_TMPDIR"
    prep synth librispeech -o syn --speakers 2 --dev-speakers 1 --chapters 1 --utterances 3 >/dev/null
    prep librispeech -o out --vocab-size 40 syn/LibriSpeech/train-clean-100 syn/LibriSpeech/dev-clean >/dev/null
}

@test "rnnt-data: prep's records load in order, decode to their transcripts, and give the features' lengths" {
    for subset in dev-clean train-clean-100; do
        run --separate-stderr env TK_RNNT_RECORDS=out/$subset.tks VOCAB=out/librispeech40.vocab "$DRIVER"
        [ "$status" -eq 0 ] || { echo "exit $status: $stderr"; return 1; }
        [ "${#lines[@]}" -eq $([ $subset = dev-clean ] && echo 3 || echo 6) ]
        # in prep's order (speaker, chapter, utterance: numeric), ids sorted
        [ "$(cut -f1 <<<"$output")" = "$(cut -f1 <<<"$output" | sort -t- -k1,1n -k2,2n -k3,3n)" ]
        awk -F'\t' '$4 != $5 { print "decoded " $4 " != " $5; bad = 1 }
            $3 != int((int($2 / 160) + 1 + 2) / 3) { print $1 ": " $3 " frames for " $2 " samples"; bad = 1 }
            END { exit bad }' <<<"$output"
    done
}

@test "rnnt-data: a vocabulary smaller than the records' ids is exit 3 naming the token" {
    printf '<unk>\t0\nx\t-1\n' >other.vocab
    run --separate-stderr env TK_RNNT_RECORDS=out/dev-clean.tks VOCAB=other.vocab "$DRIVER"
    [ "$status" -eq 3 ]
    [[ "$stderr" == "test_rnnt_data: error: token "*" outside the vocabulary of 2 pieces" ]]
}

@test "rnnt-data: a file that is not LibriSpeech records is exit 3 naming it" {
    run --separate-stderr env TK_RNNT_RECORDS=syn/manifest.json VOCAB=out/librispeech40.vocab "$DRIVER"
    [ "$status" -eq 3 ]
    [[ "$stderr" == "test_rnnt_data: error: syn/manifest.json"* ]]
}
