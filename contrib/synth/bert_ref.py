#!/usr/bin/env python3
"""A second, independent implementation of the MLPerf BERT reference's data preparation
(mlcommons/training language_model/tensorflow/bert/cleanup_scripts: tokenization.py's FullTokenizer
with do_lower_case, and create_pretraining_data.py run on one file), written in Python from the
reference's semantics, used by the tests as an oracle for `prep bert` and `prep bert-tokenize`.
Its random draws are Python's own random.Random(seed), as the reference's are.

  bert_ref.py tokenize VOCAB [--basic] [--cased] [--max-word-chars N] < TEXT   one line per line
  bert_ref.py pretrain VOCAB FILE [--seed S] [--max-seq-length L] [--max-predictions P]
              [--masked-lm-prob X] [--short-seq-prob X] [--dupe-factor N] [--pick N]
      prints one JSON line per example, with the fields of trainkit's .tks records
      (man/man5/trainkit-bert.5), padded, in the order `prep bert --rng mt` writes them
  bert_ref.py unicode-lines   prints lines that put every code point in several contexts
"""
import argparse
import json
import random
import sys
import unicodedata

CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def is_ws(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_ctrl(ch):
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf")


def is_punct(ch):
    o = ord(ch)
    if 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(ch):
    return any(lo <= ord(ch) <= hi for lo, hi in CJK)


def basic_tokens(text, lower=True):
    cleaned = []
    for ch in text:
        if ord(ch) in (0, 0xFFFD) or is_ctrl(ch):
            continue
        if is_ws(ch):
            cleaned.append(" ")
        elif is_cjk(ch):
            cleaned.extend((" ", ch, " "))
        else:
            cleaned.append(ch)
    pieces = []
    for word in "".join(cleaned).split():
        if lower:
            word = "".join(c for c in unicodedata.normalize("NFD", word.lower())
                           if unicodedata.category(c) != "Mn")
        cur = ""
        for ch in word:
            if is_punct(ch):
                if cur:
                    pieces.append(cur)
                pieces.append(ch)
                cur = ""
            else:
                cur += ch
        if cur:
            pieces.append(cur)
    return " ".join(pieces).split()


def wordpiece(word, vocab, max_chars=200):
    if len(word) > max_chars:
        return ["[UNK]"]
    out, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                out.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return out


def tokenize(text, vocab, lower=True, max_chars=200):
    return [p for w in basic_tokens(text, lower) for p in wordpiece(w, vocab, max_chars)]


def load_vocab(path):
    vocab = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            tok = line.strip()
            if tok not in vocab:
                vocab[tok] = len(vocab)
    return vocab


def read_documents(path, vocab):
    docs = [[]]
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            line = line.strip()
            if not line:
                docs.append([])
                continue
            toks = tokenize(line, vocab)
            if toks:
                docs[-1].append(toks)
    return [d for d in docs if d]


def make_masks(tokens, prob, max_pred, words, rng):
    cands = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    rng.shuffle(cands)
    shown = list(tokens)
    k = min(max_pred, max(1, int(round(len(tokens) * prob))))
    picked = []
    for i in cands[:k]:
        if rng.random() < 0.8:
            shown[i] = "[MASK]"
        elif rng.random() < 0.5:
            pass
        else:
            shown[i] = words[rng.randint(0, len(words) - 1)]
        picked.append(i)
    picked.sort()
    return shown, picked, [tokens[i] for i in picked]


def cut(a, b, limit, rng):
    while len(a) + len(b) > limit:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def from_document(docs, di, args, words, rng):
    doc = docs[di]
    limit = args.max_seq_length - 3
    target = limit
    if rng.random() < args.short_seq_prob:
        target = rng.randint(2, limit)
    out, chunk, length, i = [], [], 0, 0
    while i < len(doc):
        chunk.append(doc[i])
        length += len(doc[i])
        if i == len(doc) - 1 or length >= target:
            split = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            a = [t for s in chunk[:split] for t in s]
            b = []
            if len(chunk) == 1 or rng.random() < 0.5:
                random_next = 1
                other = di
                for _ in range(10):
                    other = rng.randint(0, len(docs) - 1)
                    if other != di:
                        break
                odoc = docs[other]
                for s in odoc[rng.randint(0, len(odoc) - 1):]:
                    b.extend(s)
                    if len(b) >= target - len(a):
                        break
                i -= len(chunk) - split
            else:
                random_next = 0
                b = [t for s in chunk[split:] for t in s]
            cut(a, b, limit, rng)
            tokens = ["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"]
            segs = [0] * (len(a) + 2) + [1] * (len(b) + 1)
            shown, pos, labels = make_masks(tokens, args.masked_lm_prob, args.max_predictions, words, rng)
            out.append((shown, segs, pos, labels, random_next))
            chunk, length = [], 0
        i += 1
    return out


def pretrain(args):
    vocab = load_vocab(args.vocab)
    words = list(vocab)
    rng = random.Random(args.seed)
    docs = read_documents(args.file, vocab)
    rng.shuffle(docs)
    examples = []
    for _ in range(args.dupe_factor):
        for di in range(len(docs)):
            examples.extend(from_document(docs, di, args, words, rng))
    rng.shuffle(examples)
    if args.pick:
        ratio = len(examples) / args.pick
        examples = [examples[int(i * ratio)] for i in range(args.pick)]
    L, P = args.max_seq_length, args.max_predictions
    for shown, segs, pos, labels, nsp in examples:
        rec = {
            "input_ids": [vocab[t] for t in shown] + [0] * (L - len(shown)),
            "segment_ids": segs + [0] * (L - len(segs)),
            "seq_len": len(shown),
            "masked_lm_positions": pos + [0] * (P - len(pos)),
            "masked_lm_ids": [vocab[t] for t in labels] + [0] * (P - len(labels)),
            "num_masked": len(pos),
            "next_sentence_labels": nsp,
        }
        print(json.dumps(rec))


def unicode_lines():
    # Each code point alone, between letters, after a cased letter and before/after a capital
    # sigma (the final-sigma rule), and after an ASCII letter with a combining mark.
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or cp == 10:
            continue
        c = chr(cp)
        print(f"{c} a{c}b A{c}\u03a3 \u03a3{c} A\u03a3{c}x Ab{c}\u0301\u0300 {c}{c}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["tokenize", "pretrain", "unicode-lines"])
    ap.add_argument("vocab", nargs="?")
    ap.add_argument("file", nargs="?")
    ap.add_argument("--basic", action="store_true")
    ap.add_argument("--cased", action="store_true")
    ap.add_argument("--max-word-chars", type=int, default=200)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--max-seq-length", type=int, default=512)
    ap.add_argument("--max-predictions", type=int, default=76)
    ap.add_argument("--masked-lm-prob", type=float, default=0.15)
    ap.add_argument("--short-seq-prob", type=float, default=0.1)
    ap.add_argument("--dupe-factor", type=int, default=10)
    ap.add_argument("--pick", type=int, default=0)
    args = ap.parse_args()
    sys.stdout.reconfigure(encoding="utf-8", errors="surrogateescape", newline="\n")
    if args.cmd == "unicode-lines":
        unicode_lines()
    elif args.cmd == "tokenize":
        vocab = load_vocab(args.vocab)
        text = sys.stdin.buffer.read().decode("utf-8")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for line in lines:
            if args.basic:
                print(" ".join(basic_tokens(line, not args.cased)))
            else:
                print(" ".join(p for w in basic_tokens(line, not args.cased)
                               for p in wordpiece(w, vocab, args.max_word_chars)))
    else:
        pretrain(args)


if __name__ == "__main__":
    main()
