#!/usr/bin/env bats
# prep bert, bert-tokenize, bert-hdf5: command line, exact tokens, bad input (exit 3, no output
# file), determinism (seed, threads), the reference's examples exactly (contrib/synth/bert_ref.py,
# a Python reimplementation with CPython's random), Hugging Face's BertTokenizer, HDF5 round trips
# through h5py, and the shard pipeline. prep synth bert is in prep-bert-synth.bats.

bats_require_minimum_version 1.5.0

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    DUMP="$TK_ROOT/contrib/synth/tks_dump.py"
    REF="$TK_ROOT/contrib/synth/bert_ref.py"
    H5="$TK_ROOT/contrib/synth/bert_h5.py"
    printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\non\nmat\n##s\n.\n,\ndog\nran\nun\n##aff\n##able\n' >v.txt
}

need_python() {
    command -v python3 >/dev/null && python3 -c 'import numpy' 2>/dev/null || skip "python3 with numpy is not installed"
    command -v zstd >/dev/null || skip "the zstd command is not installed"
}

# A small corpus: N documents of sentences over the words of v.txt.
corpus() {
    python3 - "$1" "$2" <<'PY'
import random, sys
rng = random.Random(int(sys.argv[2]))
words = "the cat cats sat on mat dog dogs ran unaffable".split()
out = []
for d in range(int(sys.argv[1])):
    for s in range(rng.randint(1, 9)):
        out.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 14))).capitalize() + ".")
    out.append("")
sys.stdout.write("\n".join(out) + "\n")
PY
}

@test "prep bert --help prints the BERT usage on stdout; prep --help points to it" {
    run --separate-stderr prep bert --help
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "Usage: prep bert --vocab FILE [-o OUT.tks] [OPTIONS] FILE..." ]
    [[ "$output" == *"--eval-10k"* ]]
    run prep --help
    [[ "$output" == *"prep bert | bert-hdf5 | bert-tokenize | synth bert ... (prep bert --help)"* ]]
}

@test "prep bert: usage errors exit 2" {
    run prep bert x.txt
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: prep bert needs --vocab FILE" ]
    run prep bert --vocab v.txt
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: bert: no input files" ]
    run prep bert --vocab v.txt --rng dice x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: --rng: expected philox or mt, got 'dice'" ]
    run prep bert --vocab v.txt --max-seq-length 4 x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: --max-seq-length: expected an integer in [5, 32767], got '4'" ]
    run prep bert-tokenize --vocab v.txt --pick 3
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: --pick does not apply to prep bert-tokenize" ]
    run prep bert --vocab v.txt --days 3 x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: unknown option '--days'" ]
    run prep bert-tokenize --vocab v.txt --basic --ids
    [ "$status" -eq 2 ]
}

@test "prep bert-tokenize: exact tokens, ids and basic tokens" {
    printf 'The cats sat, unaffable.\nDOGS ran \xc3\xa9t\xc3\xa9\n\n' >t.txt
    run prep bert-tokenize --vocab v.txt t.txt
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "the cat ##s sat , un ##aff ##able ." ]
    [ "${lines[1]}" = "dog ##s ran [UNK]" ]
    [ "$(prep bert-tokenize --vocab v.txt t.txt | wc -l)" -eq 3 ] # the blank line stays, empty
    run prep bert-tokenize --vocab v.txt --ids - <t.txt
    [ "${lines[0]}" = "5 6 10 7 12 15 16 17 11" ]
    run prep bert-tokenize --vocab v.txt --basic t.txt
    [ "${lines[1]}" = "dogs ran ete" ]
    run prep bert-tokenize --vocab v.txt --basic --cased t.txt
    [ "${lines[1]}" = "DOGS ran été" ]
}

@test "prep bert: a vocabulary line that is not one token exits 3, no output" {
    printf '[PAD]\n[UNK]\nthe cat\n' >bad.txt
    echo "The cat." >t.txt
    run prep bert --vocab bad.txt -o out.tks t.txt
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: bad.txt: line 3: 'the cat' is not one token (it contains whitespace) (hint: a vocabulary file holds one token a line, with no blank lines)" ]
    [ -z "$(ls out.tks* 2>/dev/null)" ]
    printf '[UNK]\n[CLS]\n[SEP]\n' >nomask.txt
    run prep bert --vocab nomask.txt -o out.tks t.txt
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: nomask.txt: the vocabulary has no [MASK] token (hint: BERT vocabularies hold [PAD] [UNK] [CLS] [SEP] [MASK])" ]
}

@test "prep bert: a non-UTF-8 byte names file and line, exits 3, leaves no output" {
    printf 'The cat.\n\nThe dog \xe9t\xe9.\n' >t.txt
    run prep bert --vocab v.txt -o out.tks t.txt
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: t.txt: line 3: invalid UTF-8 at byte 8" ]
    [ -z "$(ls out.tks* 2>/dev/null)" ]
    echo "A fine line." >good.txt
    run prep bert --vocab v.txt --threads 2 -o out.tks good.txt t.txt good.txt
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: t.txt: line 3: invalid UTF-8 at byte 8" ]
    [ -z "$(ls out.tks* 2>/dev/null)" ]
}

@test "prep bert: same bytes for any thread count and the same seed; another seed differs" {
    need_python
    for i in 1 2 3; do corpus 40 $i >c$i.txt; done
    prep bert --vocab v.txt --threads 1 --max-seq-length 64 -o t1.tks c1.txt c2.txt c3.txt
    prep bert --vocab v.txt --threads 2 --max-seq-length 64 -o t2.tks c1.txt c2.txt c3.txt
    prep bert --vocab v.txt --threads 3 --max-seq-length 64 c1.txt c2.txt c3.txt >t3.tks
    cmp t1.tks t2.tks
    cmp t1.tks t3.tks
    prep bert --vocab v.txt --seed 2 --max-seq-length 64 -o s2.tks c1.txt c2.txt c3.txt
    ! cmp -s t1.tks s2.tks
    # a file's examples depend on its name, not on its place on the command line
    prep bert --vocab v.txt --max-seq-length 64 -o only2.tks c2.txt
    python3 "$DUMP" t1.tks >all.jsonl
    python3 "$DUMP" only2.tks >two.jsonl
    [ "$(grep -cxFf two.jsonl all.jsonl)" -eq "$(grep -c . two.jsonl)" ]
}

@test "prep bert --rng mt: exactly the reference's examples (Python reimplementation, CPython random)" {
    need_python
    corpus 50 7 >a.txt
    corpus 20 8 >b.txt
    for opts in "" "--max-seq-length 32 --max-predictions 5 --dupe-factor 3" \
                "--short-seq-prob 0.5 --masked-lm-prob 0.3 --seed 99" "--pick 40"; do
        prep bert --vocab v.txt --rng mt $opts -o out.tks a.txt b.txt
        python3 "$DUMP" out.tks >got.jsonl
        { python3 "$REF" pretrain v.txt a.txt $opts; python3 "$REF" pretrain v.txt b.txt $opts; } >want.jsonl
        [ -s want.jsonl ]
        cmp got.jsonl want.jsonl || { echo "differs with options '$opts'"; diff got.jsonl want.jsonl | head -5; false; }
    done
}

@test "prep bert --eval-10k: the MLPerf eval recipe (pick 10000, mt, seed 12345, dupe 10)" {
    need_python
    corpus 120 3 >eval.txt
    prep bert --vocab v.txt --eval-10k --max-seq-length 64 --max-predictions 10 -o eval.tks eval.txt
    python3 "$DUMP" eval.tks --schema >schema.json
    grep -q '"rng": "mt", "pick": 10000' schema.json
    grep -q '"seed": 12345' schema.json
    grep -q '"dupe_factor": 10' schema.json
    python3 "$DUMP" eval.tks >got.jsonl
    [ "$(wc -l <got.jsonl)" -eq 10000 ]
    python3 "$REF" pretrain v.txt eval.txt --max-seq-length 64 --max-predictions 10 --pick 10000 >want.jsonl
    cmp got.jsonl want.jsonl
}

@test "prep bert: the .tks schema and meta" {
    need_python
    corpus 5 1 >c.txt
    prep bert --vocab v.txt --max-seq-length 32 --max-predictions 5 -o out.tks c.txt
    run python3 "$DUMP" out.tks --schema
    [ "$output" = '{"fields": [{"name": "input_ids", "dtype": "i16", "shape": [32]}, {"name": "segment_ids", "dtype": "u8", "shape": [32]}, {"name": "seq_len", "dtype": "i16", "shape": []}, {"name": "masked_lm_positions", "dtype": "i16", "shape": [5]}, {"name": "masked_lm_ids", "dtype": "i16", "shape": [5]}, {"name": "num_masked", "dtype": "i16", "shape": []}, {"name": "next_sentence_labels", "dtype": "u8", "shape": []}], "frame_records": 8192, "meta": {"source": "bert", "input": "text", "vocab_size": 18, "max_seq_length": 32, "max_predictions_per_seq": 5, "special_ids": {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}, "do_lower_case": true, "max_word_chars": 200, "masked_lm_prob": 0.15, "short_seq_prob": 0.1, "dupe_factor": 10, "seed": 12345, "rng": "philox", "pick": 0}}' ]
}

@test "prep bert | shard: the pipeline works and verifies" {
    need_python
    corpus 30 4 >c.txt
    prep bert --vocab v.txt --max-seq-length 64 c.txt | shard -n 2 -o shards/
    shard --verify shards/*.tks
    prep bert --vocab v.txt --max-seq-length 64 -o all.tks c.txt
    n=$(shard --stats all.tks | grep -o '"records":[0-9]*' | cut -d: -f2)
    m=$(for f in shards/*.tks; do shard --stats "$f" | grep -o '"records":[0-9]*' | cut -d: -f2; done | awk '{s += $1} END {print s}')
    [ "$n" -eq "$m" ]
}

@test "prep bert-tokenize agrees with Hugging Face's slow BertTokenizer" {
    python3 -c 'import transformers' 2>/dev/null || skip "transformers is not installed"
    mkdir hf
    run python3 "$TK_ROOT/contrib/synth/bert_hf_check.py" "$TK_BIN/prep" hf
    echo "$output" | tail -5
    [ "$status" -eq 0 ]
    [[ "${lines[-1]}" == *" lines x 2 limits, 0 differ" ]]
}

@test "prep bert-tokenize: basic tokens of every 13th code point in 7 contexts equal the reference's" {
    command -v python3 >/dev/null || skip "python3 is not installed"
    tables=$(sed -n 's/^const char bert_unicode_version\[\] = "\(.*\)";/\1/p' "$TK_ROOT/lib/bert/unicode_tables.c")
    py=$(python3 -c 'import unicodedata; print(unicodedata.unidata_version)')
    [ "$tables" = "$py" ] || skip "this Python has Unicode $py, the tables $tables"
    python3 "$REF" unicode-lines | awk 'NR % 13 == 1' >u.txt
    python3 "$REF" tokenize v.txt --basic <u.txt >want.txt
    prep bert-tokenize --vocab v.txt --basic u.txt >got.txt
    cmp got.txt want.txt
    python3 "$REF" tokenize v.txt <u.txt >want2.txt
    prep bert-tokenize --vocab v.txt u.txt >got2.txt
    cmp got2.txt want2.txt
}

need_h5() {
    need_python
    python3 -c 'import h5py' 2>/dev/null || skip "h5py is not installed"
    prep bert-hdf5 -o /dev/null /dev/null 2>&1 | grep -q 'built without libhdf5' && skip "prep was built without libhdf5"
    return 0
}

@test "prep bert-hdf5: fixed and variable-length files round-trip through h5py" {
    need_h5
    corpus 40 5 >c.txt
    prep bert --vocab v.txt --max-seq-length 48 --max-predictions 8 -o ref.tks c.txt
    python3 "$DUMP" ref.tks >ref.jsonl
    python3 "$H5" fixed ref.jsonl fixed.h5
    python3 "$H5" fixed ref.jsonl chop.h5 --dtypes chop --nsp-2d
    python3 "$H5" fixed ref.jsonl wide.h5 --width 128 --pred 20
    python3 "$H5" varlen ref.jsonl var.h5
    for f in fixed chop wide var; do
        prep bert-hdf5 --vocab v.txt --max-seq-length 48 --max-predictions 8 -o $f.tks $f.h5
        python3 "$DUMP" $f.tks >$f.jsonl
        cmp ref.jsonl $f.jsonl
    done
    run python3 "$DUMP" var.tks --schema
    [[ "$output" == *'"meta": {"source": "bert", "input": "hdf5-varlen", "vocab_size": 18, "max_seq_length": 48, "max_predictions_per_seq": 8, "special_ids": {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}}}' ]]
    prep bert-hdf5 --vocab-size 18 --max-seq-length 48 --max-predictions 8 -o two.tks fixed.h5 var.h5
    [ "$(python3 "$DUMP" two.tks | wc -l)" -eq $((2 * $(wc -l <ref.jsonl))) ]
    python3 "$DUMP" two.tks --schema | grep -q '"input": "hdf5", "vocab_size": 18'
}

@test "prep bert-hdf5: a missing key, a too long sequence, a bad id exit 3 and leave no output" {
    need_h5
    corpus 20 6 >c.txt
    prep bert --vocab v.txt --max-seq-length 48 --max-predictions 8 -o ref.tks c.txt
    python3 "$DUMP" ref.tks >ref.jsonl
    python3 "$H5" fixed ref.jsonl nomask.h5 --drop input_mask
    run prep bert-hdf5 -o out.tks nomask.h5
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: nomask.h5: missing dataset 'input_mask' (hint: NVIDIA's BERT HDF5 files hold input_ids, segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_labels (and input_mask when fixed-length))" ]
    [ -z "$(ls out.tks* 2>/dev/null)" ]
    python3 "$H5" varlen ref.jsonl noids.h5 --drop masked_lm_ids
    run prep bert-hdf5 -o out.tks noids.h5
    [ "$status" -eq 3 ]
    [[ "$output" == "prep: error: noids.h5: missing dataset 'masked_lm_ids'"* ]]
    python3 "$H5" varlen ref.jsonl var.h5
    long=$(python3 -c 'import json; print(max(i for i, l in enumerate(open("ref.jsonl")) if json.loads(l)["seq_len"] > 20))')
    first=$(python3 -c 'import json; print(min(i for i, l in enumerate(open("ref.jsonl")) if json.loads(l)["seq_len"] > 20))')
    run prep bert-hdf5 --max-seq-length 20 -o out.tks var.h5
    [ "$status" -eq 3 ]
    [[ "$output" == "prep: error: var.h5: record $first: a sequence of "*" tokens is longer than max_seq_length 20 (hint: convert with --max-seq-length "*" or more)" ]]
    [ -z "$(ls out.tks* 2>/dev/null)" ]
    run prep bert-hdf5 --vocab-size 10 --max-seq-length 48 --max-predictions 8 -o out.tks var.h5
    [ "$status" -eq 3 ]
    [[ "$output" == "prep: error: var.h5: record 0: "*"is not a token id (vocabulary of 10)" ]]
    run prep bert-hdf5 -o out.tks c.txt
    [ "$status" -eq 3 ]
    [ "$output" = "prep: error: c.txt: offset 0: not an HDF5 file" ]
    [ -z "$(ls out.tks* 2>/dev/null)" ]
}

@test "prep bert-hdf5 in a prep built without libhdf5 exits 2 saying so" {
    run prep bert-hdf5 -o out.tks /dev/null
    [[ "$output" == *"built without libhdf5"* ]] || skip "this prep has libhdf5"
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: bert-hdf5: this prep was built without libhdf5 (install libhdf5-dev, then rebuild)" ]
    [ ! -e out.tks ]
}
