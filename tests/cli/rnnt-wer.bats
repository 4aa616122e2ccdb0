#!/usr/bin/env bats
# RNN-T's word error rate (lib/speech/wer.c) and detokenization against Python, through
# build/tests/unit/test_wer's driver modes: the WER of random hypothesis/reference pairs against
# the reference's own formula (rnn_speech_recognition/pytorch common/metrics.py word_error_rate:
# str.split(), a word-level Levenshtein distance, distances and reference words summed over the
# set; written out below in plain Python, as jiwer is not installed), and the text of random token
# ids against sentencepiece's SentencePieceProcessor.decode (what the reference's
# Tokenizer.detokenize calls) with a model spm_train makes here with the reference's settings.

bats_require_minimum_version 1.5.0

setup() {
    DRIVER="${TK_BIN%/bin}/tests/unit/test_wer"
    [ -x "$DRIVER" ] || skip "$DRIVER not built"
}

# The pairs: words from a small set (so that many match), joined by random runs of whitespace
# (spaces, tabs, \v, \f, \x1c..\x1f), some empty; reference side never has a newline.
gen_pairs() {
    python3 - "$1" <<'EOF'
import random, sys
rng = random.Random(int(sys.argv[1]))
words = ["a", "the", "cat", "sat", "on", "mat", "don't", "\u2047", "x", "it's"]
seps = [" ", "  ", "\t", "\x0b", "\x0c", "\x1c", "\x1f", " \t "]
def text():
    n = rng.choice([0, 1, 2, 5, 9, 20, 40])
    s = "".join(rng.choice(seps) + rng.choice(words) for _ in range(n))
    return s + rng.choice(["", " ", "\t"])
out = []
for _ in range(300):
    out += [text(), text()]
sys.stdout.write("\n".join(out) + "\n")
EOF
}

# metrics.py's formula, in our own words: the edit distance of the word lists, pooled.
oracle() {
    python3 -c '
import sys
def dist(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]
lines = sys.stdin.read().split("\n")[:-1]
errs = words = 0
for h, r in zip(lines[0::2], lines[1::2]):
    hw, rw = h.split(), r.split()
    d = dist(hw, rw)
    errs += d; words += len(rw)
    print(d, len(rw))
print("total", errs, words, repr(errs / words) if words else "inf")
'
}

@test "rnnt-wer: distances, word counts and the pooled WER equal the reference's formula on random pairs" {
    for seed in 1 2 3; do
        gen_pairs $seed >"$BATS_TEST_TMPDIR/pairs"
        run --separate-stderr env TK_WER_DRIVE=wer "$DRIVER" <"$BATS_TEST_TMPDIR/pairs"
        [ "$status" -eq 0 ] || { echo "exit $status: $stderr"; return 1; }
        want=$(oracle <"$BATS_TEST_TMPDIR/pairs")
        [ "${#lines[@]}" -eq 301 ]
        # the WER as a Python float's repr and C's %.17g may spell one double differently: compare
        # the counts exactly and the value as numbers
        [ "${output%total*}" = "${want%total*}" ] || { diff <(echo "$output") <(echo "$want") | head; return 1; }
        read -r _ e w v <<<"${lines[300]}"
        read -r _ e2 w2 v2 <<<"$(tail -1 <<<"$want")"
        [ "$e" = "$e2" ] && [ "$w" = "$w2" ]
        python3 -c "import sys; sys.exit(float('$v') != float('$v2'))"
    done
}

@test "rnnt-wer: a changed word is counted (the oracle comparison can fail)" {
    printf 'the cat sat\nthe cat sat on\na b\na c\n' >"$BATS_TEST_TMPDIR/p"
    run --separate-stderr env TK_WER_DRIVE=wer "$DRIVER" <"$BATS_TEST_TMPDIR/p"
    [ "$status" -eq 0 ]
    [ "$output" = $'1 4\n1 2\ntotal 2 6 0.33333333333333331' ]
}

@test "rnnt-wer: no reference words is an infinite WER, an odd line count an error (exit 3)" {
    run --separate-stderr env TK_WER_DRIVE=wer "$DRIVER" <<<$'a b\n \t '
    [ "$status" -eq 0 ]
    [ "$output" = $'2 0\ntotal 2 0 inf' ]
    run --separate-stderr env TK_WER_DRIVE=wer "$DRIVER" <<<$'a b'
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_wer: error: stdin: a hypothesis without its reference" ]
}

@test "rnnt-wer: token ids decode to sentencepiece's text from the .vocab and from the .model (trained with the reference's settings)" {
    command -v spm_train >/dev/null || skip "spm_train is not installed (Debian sentencepiece)"
    python3 -c "import sentencepiece" 2>/dev/null || skip "Python sentencepiece is not importable"
    cd "$BATS_TEST_TMPDIR"
    python3 - <<'EOF' >txt.txt
import random
rng = random.Random(5)
w = ["the", "cat", "sat", "on", "a", "mat", "don't", "it's", "quickly", "brown", "fox", "jumped", "over",
     "lazy", "dogs", "zebra", "quiet", "xylophone", "vexing", "jovial"]
for _ in range(400):
    print(" ".join(rng.choice(w) for _ in range(rng.randint(1, 12))))
EOF
    run spm_train --input=txt.txt --model_prefix=m --vocab_size=40 --character_coverage=1.0 --bos_id=-1 \
        --eos_id=-1 --model_type=unigram
    [ "$status" -eq 0 ] || { echo "$output" | tail -5; return 1; }
    python3 - <<'EOF' >ids.txt
import random
rng = random.Random(9)
lines = [[], [0], [0, 0], [5, 0, 7]]
for _ in range(200):
    lines.append([rng.randrange(40) for _ in range(rng.randint(1, 30))])
for l in lines:
    print(" ".join(map(str, l)))
EOF
    python3 -c '
import sentencepiece as spm, sys
sp = spm.SentencePieceProcessor(model_file="m.model")
for line in open("ids.txt"):
    print(sp.decode([int(x) for x in line.split()]))
' >want.txt
    for f in m.vocab m.model; do
        run --separate-stderr env TK_WER_DRIVE=decode VOCAB=$f "$DRIVER" <ids.txt
        [ "$status" -eq 0 ] || { echo "$f: exit $status: $stderr"; return 1; }
        diff <(echo "$output") want.txt
    done
    run --separate-stderr env TK_WER_DRIVE=decode VOCAB=m.vocab "$DRIVER" <<<"3 40"
    [ "$status" -eq 3 ]
    [ "$stderr" = "test_wer: error: token 40 (position 1) outside the vocabulary of 40 pieces" ]
    head -c 300 m.model >cut.model
    run --separate-stderr env TK_WER_DRIVE=decode VOCAB=cut.model "$DRIVER" <<<"3"
    [ "$status" -eq 3 ]
    [[ "$stderr" == "test_wer: error: cut.model: byte "*": a truncated"* ]] || { echo "$stderr"; return 1; }
}
