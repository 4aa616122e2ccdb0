#!/usr/bin/env python3
"""Checks `prep bert-tokenize` against Hugging Face's slow BertTokenizer (the Python one:
BertTokenizerLegacy in transformers 5, BertTokenizer in 4) on the same vocabulary, over a varied
text: accents, Greek final sigma, CJK, Hangul, punctuation of many scripts, control and format
characters, odd whitespace, words past 100 and 200 characters, characters and words the
vocabulary lacks ([UNK]).

  bert_hf_check.py PREP DIR      writes DIR/vocab.txt and DIR/sample.txt, runs PREP on them with
                                 --max-word-chars 100 and 200 (Hugging Face's limit set to
                                 match), prints each differing line, exits 0 when all agree.
Exits 77 when transformers is not installed.

Known differences, kept out of the sample: Hugging Face keeps special tokens written in the text
([MASK]) whole where the reference splits them ("[", "mask", "]"); it lower-cases the whole line
before removing control characters, so a control character next to a capital sigma can change
which sigma it picks; it removes every character of a category C* (unassigned Cn and private-use
Co too) where the reference removes only Cc and Cf (it keeps the others, which become [UNK]);
its NFC step never changes the result after accent stripping here.
"""
import os
import random
import subprocess
import sys
import unicodedata

try:
    try:
        from transformers import BertTokenizerLegacy as SlowBert
    except ImportError:
        from transformers.models.bert.tokenization_bert import BertTokenizer as SlowBert
except ImportError:
    sys.exit(77)

WORDS = """the of and to in a is was for on as with by he at from his it an were are which this be
also or had first one their its new after but who not they have her she two been other when there
all during into school time may years more most only over city some world would where later up
such used many can state about national out known university united then made several under film
however while well part she music since team people area day high year american season three
playing play work game british century house long group back each way what number death found
cafe naive angstrom aero strasse istanbul resume uber zurich munchen sao paulo""".split()
SUBWORDS = ["##s", "##ing", "##ed", "##ly", "##er", "##est", "##able", "##ness", "un", "re",
            "##tion", "##al", "##ic", "##ous", "##ment", "##ful"]
EXTRA = ["σας", "σισυφος", "οδος", "ς", "σ", "中", "文", "日", "本", "語", "ᄒ", "ᅡ", "ᆫ", "¿", "¡",
         "«", "»", "—", "…", "“", "”", "‘", "’", "·", "§", "€", "£", "°", "±", "ø", "æ", "ß",
         "##ø", "##æ", "##ß", "ı", "ł", "đ", "ð", "þ"]

FRAGMENTS = ["Hello, World!", "The QUICK brown fox's tail.", "café naïve Ångström Ærø",
             "Straße in München, Zürich and São Paulo.", "İstanbul ıi", "ΣΊΣΥΦΟΣ ΟΔΟΣ Σ ΑΣ.",
             "中文 and 日本語 text", "한국어 문장", "¿Qué? ¡Sí! «quoted» — dash… “curly” ‘single’",
             "tab\tseparated\tvalues", "no\u00a0break\u3000ideographic\u2009thin", "zero\u200bwidth",
             "soft\u00adhyphen", "ctrl\x01char\x7fdel", "e\u0301 a\u0308 o\u0303\u0301", "x²³ ½ №5",
             "emoji 😀 snow ☃ and ☯", "unknownword qqqzzz", "re-unable un-able", "it's (a) [test] {x}",
             "Ǆungla ǅ ǆ", "ﬁne ﬂow", "Ⅻ ⅻ", "ΣΑΣ", "σας οδος", "A\u0345\u03a3", "Ωmega \u2126hm"]


def build_vocab(path):
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for c in range(33, 127):
        toks.append(chr(c))
        if chr(c).isalnum():
            toks.append("##" + chr(c))
    toks += WORDS + SUBWORDS + EXTRA
    seen, out = set(), []
    for t in toks:
        if t not in seen and not (t.isalpha() and t.upper() == t and t.lower() != t):
            seen.add(t)
            out.append(t)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def build_sample(path):
    rng = random.Random(7)
    lines = list(FRAGMENTS)
    for n in (99, 100, 101, 150, 199, 200, 201, 250):
        lines.append("a" * n + " " + "é" * n + " end")
    for _ in range(600):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.55:
                w = rng.choice(WORDS)
                parts.append(w.capitalize() if rng.random() < 0.3 else w)
            elif r < 0.85:
                parts.append(rng.choice(FRAGMENTS))
            else:
                chars = (chr(rng.randint(0x20, 0x2FFF)) for _ in range(rng.randint(1, 6)))
                parts.append("".join(c for c in chars if unicodedata.category(c) not in ("Cn", "Co")))
        lines.append(" ".join(parts))
    # Keep out what the two tokenizers are known to treat differently (see the docstring).
    lines = [l.replace("\n", " ").replace("\r", " ") for l in lines]
    lines = [l for l in lines if "\u03a3" not in l or not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in l)]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return lines


def main():
    prep, d = sys.argv[1], sys.argv[2]
    vocab, sample = os.path.join(d, "vocab.txt"), os.path.join(d, "sample.txt")
    build_vocab(vocab)
    lines = build_sample(sample)
    hf = SlowBert(vocab, do_lower_case=True)
    bad = 0
    for limit in (100, 200):
        hf.wordpiece_tokenizer.max_input_chars_per_word = limit
        want = [" ".join(hf.tokenize(l)) for l in lines]
        got = subprocess.run([prep, "bert-tokenize", "--vocab", vocab, "--max-word-chars", str(limit), sample],
                             stdout=subprocess.PIPE, check=True).stdout.decode("utf-8").split("\n")[:-1]
        if len(got) != len(want):
            print(f"limit {limit}: {len(got)} lines from prep, {len(want)} expected")
            return 1
        for i, (g, w) in enumerate(zip(got, want)):
            if g != w:
                bad += 1
                print(f"limit {limit} line {i + 1}: {lines[i]!r}\n  prep: {g}\n  hf:   {w}")
    print(f"{len(lines)} lines x 2 limits, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
