#!/usr/bin/env bats
# prep synth bert: the MLPerf text layout, vocab.txt, the manifest with the oracle and unigram
# accuracies and the calibrated target, the oracle against an independent predictor, determinism,
# the large preset's vocabulary layout, and that prep bert reads it all.

bats_require_minimum_version 1.5.0

setup_file() {
    # One ci-preset corpus shared by the tests that only read it.
    cd "$BATS_FILE_TMPDIR"
    prep synth bert -o ci >ci.out
}

setup() {
    TMP="$BATS_TEST_TMPDIR"
    cd "$TMP"
    CI="$BATS_FILE_TMPDIR/ci"
    DUMP="$TK_ROOT/contrib/synth/tks_dump.py"
}

need_python() {
    command -v python3 >/dev/null && python3 -c 'import numpy' 2>/dev/null || skip "python3 with numpy is not installed"
    command -v zstd >/dev/null || skip "the zstd command is not installed"
}

@test "prep synth bert: the files of the MLPerf layout and one JSON line" {
    run cat "$BATS_FILE_TMPDIR/ci.out"
    [[ "$output" == '{"type":"synth","dir":"ci","parts":4,"bytes":'*',"oracle_mlm_accuracy":0.'*',"unigram_mlm_accuracy":0.'*'}' ]]
    [ "$(cd "$CI" && ls | tr '\n' ' ')" = "eval.txt manifest.json part-00000-of-00004 part-00001-of-00004 part-00002-of-00004 part-00003-of-00004 vocab.txt " ]
    # 500 articles of 6 sentences a part: one sentence a line, a blank line after each article
    [ "$(grep -c . "$CI/part-00000-of-00004")" -eq 3000 ]
    [ "$(grep -c '^$' "$CI/part-00000-of-00004")" -eq 500 ]
    [ "$(grep -c '^$' "$CI/eval.txt")" -eq 1000 ]
    run grep -vc '^[A-Z][a-z]*\( [a-z]*\)*\.$' "$CI/part-00001-of-00004"
    [ "$output" -eq 500 ] # only the blank lines are not "Word word ... word."
}

@test "prep synth bert: vocab.txt has the special tokens, letters, ## pieces and the exact size" {
    [ "$(wc -l <"$CI/vocab.txt")" -eq 192 ]
    [ "$(head -5 "$CI/vocab.txt" | tr '\n' ' ')" = "[PAD] [UNK] [CLS] [SEP] [MASK] " ]
    grep -qx '##k' "$CI/vocab.txt"
    [ "$(grep -c '^##' "$CI/vocab.txt")" -gt 30 ]
    [ "$(sort "$CI/vocab.txt" | uniq -d | wc -l)" -eq 0 ]
}

@test "prep synth bert: the text tokenizes without [UNK], and some words split into ## pieces" {
    prep bert-tokenize --vocab "$CI/vocab.txt" "$CI/part-00000-of-00004" "$CI/eval.txt" >tok.txt
    ! grep -q '\[UNK\]' tok.txt
    n=$(tr ' ' '\n' <tok.txt | grep -c '^##')
    [ "$n" -gt 100 ]
}

@test "prep synth bert: the manifest's oracle is calibrated and above the unigram baseline" {
    need_python
    python3 - "$CI/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["generator"] == "trainkit prep synth bert" and m["format_version"] == 2
p = m["params"]
assert (p["size"], p["seed"], p["vocab_size"], p["parts"], p["articles_per_part"], p["sentences_per_article"]) == ("ci", 1, 192, 4, 500, 6), p
assert (p["topics"], p["topic_words"], p["topic_ratio"], p["topic_prob"], p["mean_words"]) == (8, 4, 0.1, 0.95, 16), p
o = m["oracle_examples"]
assert (o["max_seq_length"], o["max_predictions_per_seq"], o["dupe_factor"], o["pick"], o["eval_examples"]) == (64, 10, 10, 10000, 10000), o
assert o["masked_positions"] > 50000, o
u, a, x = m["unigram_mlm_accuracy"], m["oracle_mlm_accuracy"], m["oracle_mlm_accuracy_expected"]
assert 0.02 < u < 0.2 and 0.77 < a < 1, (u, a)
# The argmax's hit rate and the mean posterior maximum agree when the inference is right.
assert abs(a - x) < 0.01, (a, x)
# The calibrated target: the oracle less 0.05, at most MLPerf's 0.72; far above the unigram.
assert m["target_mlm_accuracy"] == min(0.72, a - 0.05), m["target_mlm_accuracy"]
assert 0.4 < m["random_next_fraction"] < 0.7 and 0.5 < m["oracle_nsp_accuracy"] <= 1
assert m["files"][0] == "vocab.txt" and m["files"][-1] == "eval.txt"
assert m["train"]["articles"] == 2000 and m["train"]["sentences"] == 12000
print(u, a, x)
PY
}

@test "prep synth bert: same seed, same bytes, whatever the threads; another seed differs" {
    prep synth bert --articles 50 --eval-articles 30 --oracle-examples 50 --threads 1 -o a >/dev/null
    prep synth bert --articles 50 --eval-articles 30 --oracle-examples 50 --threads 2 -o b >/dev/null
    prep synth bert --articles 50 --eval-articles 30 --oracle-examples 50 --seed 2 -o c >/dev/null
    prep synth bert --articles 50 --eval-articles 30 --oracle-examples 0 --seed 0 -o z >/dev/null
    for f in vocab.txt part-00000-of-00004 part-00003-of-00004 eval.txt manifest.json; do cmp a/$f b/$f; done
    ! cmp -s a/part-00000-of-00004 c/part-00000-of-00004
    ! cmp -s a/part-00000-of-00004 z/part-00000-of-00004 # seed 0 is a seed, not "the default"
    grep -q '"seed": 0,' z/manifest.json
}

@test "prep synth bert --topic-prob 0: the successor grammar alone, no topic word" {
    need_python
    prep synth bert --topic-prob 0 --articles 100 --eval-articles 200 --oracle-examples 2000 -o t0 >/dev/null
    prep synth bert --articles 100 --eval-articles 200 --oracle-examples 2000 -o t1 >/dev/null
    python3 - t0/manifest.json t1/manifest.json <<'PY'
import json, sys
m0, m1 = (json.load(open(f)) for f in sys.argv[1:])
assert m0["params"]["topic_prob"] == 0 and m1["params"]["topic_prob"] == 0.95, (m0["params"], m1["params"])
# without topic words a word follows from its neighbours only (then the oracle is high too: 3
# successors a word), and no word makes most of the text: the unigram is low; the inference
# stays calibrated (argmax hits and mean posterior maximum agree) in both
for m in (m0, m1):
    assert abs(m["oracle_mlm_accuracy"] - m["oracle_mlm_accuracy_expected"]) < 0.02, m
assert m0["unigram_mlm_accuracy"] < 0.25 < m1["oracle_mlm_accuracy"] - m1["unigram_mlm_accuracy"], (m0, m1)
PY
    # the text shows it too: the most frequent word of an article is most of its words with
    # topic words, not without them
    top() { awk 'BEGIN{RS=""} NR<=100 {n=split(tolower($0),w,/[ .\n]+/); delete c; m=0; t=0
        for(i=1;i<=n;i++) if(w[i]!=""){c[w[i]]++; t++; if(c[w[i]]>m)m=c[w[i]]} s+=m/t} END{printf "%.0f\n", 100*s/100}' "$1"; }
    [ "$(top t1/part-00000-of-00004)" -gt 70 ]
    [ "$(top t0/part-00000-of-00004)" -lt 40 ]
}

@test "prep synth bert --size large: BERT's vocabulary layout, 30522 tokens" {
    run prep synth bert --size large --parts 2 --articles 20 --eval-articles 10 --oracle-examples 0 -o L
    [ "$status" -eq 0 ]
    [[ "$output" == *'"oracle_mlm_accuracy":null,"unigram_mlm_accuracy":null}' ]]
    [ "$(wc -l <L/vocab.txt)" -eq 30522 ]
    [ "$(sed -n '1p;2p;100p;101p;102p;103p;104p;105p;999p;1000p' L/vocab.txt | tr '\n' ' ')" = "[PAD] [unused0] [unused98] [UNK] [CLS] [SEP] [MASK] [unused99] [unused993] . " ]
    grep -q '"oracle_mlm_accuracy": null' L/manifest.json
    prep bert-tokenize --vocab L/vocab.txt L/part-00001-of-00002 | grep -q '##'
}

@test "prep synth bert | prep bert: train shards and the eval set the oracle ran on" {
    need_python
    prep bert --vocab "$CI/vocab.txt" --max-seq-length 64 --max-predictions 10 "$CI"/part-* | shard -n 2 -o shards/
    shard --verify shards/*.tks
    prep bert --vocab "$CI/vocab.txt" --eval-10k --max-seq-length 64 --max-predictions 10 -o eval.tks "$CI/eval.txt"
    n=$(shard --stats eval.tks | grep -o '"records":[0-9]*' | cut -d: -f2)
    [ "$n" -eq 10000 ]
    # the manifest counted the masked positions of these very examples, and its oracle is above
    # (and near) an independent predictor's accuracy on them: the topic word of the position's
    # segment (the word the segment shows most often; B may be another article's)
    python3 "$DUMP" eval.tks >eval.jsonl
    python3 - "$CI/manifest.json" eval.jsonl "$CI/vocab.txt" <<'PY'
import collections, json, sys
m = json.load(open(sys.argv[1]))
vocab = open(sys.argv[3]).read().split("\n")
special = {vocab.index(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".")}
masked = hits = 0
for line in open(sys.argv[2]):
    r = json.loads(line)
    ids, n, k = r["input_ids"], r["seq_len"], r["num_masked"]
    pos, lab = r["masked_lm_positions"][:k], r["masked_lm_ids"][:k]
    seg = r["segment_ids"]
    topic = [] # per segment (B may be another article's)
    for s in (0, 1):
        shown = collections.Counter(ids[t] for t in range(n) if seg[t] == s and t not in pos and ids[t] not in special)
        topic.append(shown.most_common(1)[0][0] if shown else -1)
    for p, y in zip(pos, lab):
        hits += topic[seg[p]] == y
    masked += k
assert masked == m["oracle_examples"]["masked_positions"], (masked, m["oracle_examples"])
acc, a = hits / masked, m["oracle_mlm_accuracy"]
# Bayes-optimal is the best any predictor does in expectation (0.003: the sampling noise of ~90k
# positions); the topic predictor gets most of what the grammar makes predictable.
assert acc <= a + 0.003 and acc > a - 0.06 and acc > m["target_mlm_accuracy"], (acc, a)
print(acc, a)
PY
}

@test "prep synth bert: impossible sizes are usage errors" {
    run prep synth bert --vocab-size 40 -o x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: --vocab-size 40 is too small: letters and syllables take it all" ]
    run prep synth bert --words 200000 -o x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: --words 200000: at most 173100 different words of 1 to 4 of the 24 syllables" ]
    run prep synth bert --topic-words 65 -o x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: --topic-words: expected an integer in [1, 64], got '65'" ]
    run prep synth bert --topic-prob 1.5 -o x
    [ "$status" -eq 2 ]
    run prep synth bert -o x extra
    [ "$status" -eq 2 ]
    run prep synth bert
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "prep: prep synth bert needs -o DIR" ]
    [ ! -e x ]
}

@test "prep synth bert: a full disk exits 4 and leaves none of its files" {
    mkdir -p full
    mount -t tmpfs -o size=200k tmpfs full 2>/dev/null || skip "cannot mount a tmpfs here"
    run prep synth bert --articles 300 -o full/d
    ls -A full/d >listing 2>/dev/null || true
    umount full
    [ "$status" -eq 4 ]
    [[ "$output" == "prep: error: full/d/"*"No space left on device"* ]]
    [ ! -s listing ]
}
