// Word error rate and sentencepiece detokenization (lib/speech/wer.c): hand-counted edit
// distances, the reference's pooling over a set, Python's whitespace splitting, the .vocab reader's
// errors and the decode of pieces.
//
// Driver modes for tests/cli/rnnt-wer.bats (a constructor runs them before the tests and exits):
//   TK_WER_DRIVE=wer: stdin is pairs of lines, a hypothesis then its reference; stdout one line a
//     pair "DIST WORDS" and a last "total ERRORS WORDS WER" (WER %.17g; "inf" with no words).
//   TK_WER_DRIVE=decode VOCAB=FILE: stdin lines of space-separated ids; stdout their text a line
//     (tk_spm_decode with FILE's pieces).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "speech/wer.h"
#include "tk_drive.h"
#include "tk_test.h"

static int64_t dist_of(const char *h, const char *r, int64_t *words) {
    tk_err e = {0};
    int64_t d = -1;
    if (tk_wer_distance(h, strlen(h), r, strlen(r), &d, words, &e)) return -1;
    return d;
}

// Distances counted by hand: one substitution, one deletion, one insertion, all words, none.
TK_TEST(wer_hand_distances) {
    int64_t n;
    CHECK_EQ_INT(dist_of("the cat sat", "the cat sat", &n), 0);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(dist_of("the bat sat", "the cat sat", &n), 1);
    CHECK_EQ_INT(dist_of("the sat", "the cat sat", &n), 1);
    CHECK_EQ_INT(dist_of("the cat cat sat", "the cat sat", &n), 1);
    CHECK_EQ_INT(dist_of("", "the cat sat", &n), 3);
    CHECK_EQ_INT(dist_of("a b c d", "", &n), 4);
    CHECK_EQ_INT(n, 0);
    // a swap of two words: two substitutions (no transposition in Levenshtein)
    CHECK_EQ_INT(dist_of("cat the", "the cat", &n), 2);
    // kitten/sitting at the word level: k->s, e->i, +g
    CHECK_EQ_INT(dist_of("k i t t e n", "s i t t i n g", &n), 3);
    CHECK_EQ_INT(n, 7);
    // words are compared whole: a prefix is a substitution
    CHECK_EQ_INT(dist_of("cats", "cat", &n), 1);
}

// str.split(): runs of spaces, tabs, newlines, \v \f \r and \x1c..\x1f separate; the edges ignored.
TK_TEST(wer_python_whitespace) {
    int64_t n;
    CHECK_EQ_INT(dist_of("  the\t\tcat \n sat  ", "the cat sat", &n), 0);
    CHECK_EQ_INT(dist_of("the\x1c" "cat\x1f" "sat\v\f\r", "the cat sat", &n), 0);
    CHECK_EQ_INT(dist_of("   ", "\t", &n), 0);
    CHECK_EQ_INT(n, 0);
    // an apostrophe and "\u2047" are word characters
    CHECK_EQ_INT(dist_of("don't \xE2\x81\x87 x", "don't x", &n), 1);
}

// The reference pools: sum of distances / sum of reference words, not a mean of rates.
TK_TEST(wer_pooled_over_the_set) {
    tk_err e = {0};
    tk_wer w = {0};
    CHECK(isinf(tk_wer_value(&w)));
    CHECK_EQ_INT(tk_wer_add(&w, "a", "b", &e), 0);               // 1 / 1
    CHECK_EQ_INT(tk_wer_add(&w, "one two three", "one two three four five six seven eight nine", &e), 0); // 6 / 9
    CHECK_EQ_INT((int)w.errors, 7);
    CHECK_EQ_INT((int)w.words, 10);
    CHECK(tk_wer_value(&w) == 0.7);
}

static tk_spm_vocab *parse(const char *s, tk_err *e) {
    tk_spm_vocab *v = NULL;
    return tk_spm_vocab_parse(s, strlen(s), "t.vocab", &v, e) ? NULL : v;
}

static char *decode(const tk_spm_vocab *v, const int32_t *ids, int n) {
    tk_err e = {0};
    char *s = NULL;
    return tk_spm_decode(v, ids, n, &s, NULL, &e) ? NULL : s;
}

// Pieces: "▁" a space, the first word's boundary not written, <unk> " ⁇ ", controls nothing.
TK_TEST(wer_spm_decode) {
    tk_err e = {0};
    tk_spm_vocab *v = parse("<unk>\t0\n<s>\t0\n</s>\t0\n\xE2\x96\x81" "the\t-1.5\ns\t-2\n\xE2\x96\x81" "cat\t-3e1\n"
                            "\xE2\x96\x81\t-4\nx", &e);
    CHECK(v == NULL); // the last line has no tab
    CHECK_EQ_INT(e.code, TK_EDATA);
    v = parse("<unk>\t0\n<s>\t0\n</s>\t0\n\xE2\x96\x81" "the\t-1.5\ns\t-2\n\xE2\x96\x81" "cat\t-3e1\n\xE2\x96\x81\t-4", &e);
    CHECK(v != NULL);
    if (!v) return;
    CHECK_EQ_INT(tk_spm_vocab_size(v), 7);
    const int32_t a[] = {1, 3, 5, 4, 2};
    char *s = decode(v, a, 5);
    CHECK(s && strcmp(s, "the cats") == 0);
    free(s);
    const int32_t b[] = {0, 5, 6, 3, 0};
    s = decode(v, b, 5);
    CHECK(s && strcmp(s, " \xE2\x81\x87  cat  the \xE2\x81\x87 ") == 0);
    free(s);
    s = decode(v, b, 0);
    CHECK(s && strcmp(s, "") == 0);
    free(s);
    const int32_t bad[] = {3, 7};
    char *out = NULL;
    CHECK_EQ_INT(tk_spm_decode(v, bad, 2, &out, NULL, &e), TK_EDATA);
    CHECK(out == NULL);
    tk_spm_vocab_free(v);
}

// A .model (protobuf): pieces by type, not by name (an unknown piece named "<oov>", a control
// "<ctl>"), a byte piece decoded to its byte, other top-level fields skipped; truncation named by
// its byte offset.
TK_TEST(wer_spm_model) {
    // ModelProto { pieces: [{piece "<oov>", score 0, type 2}, {piece "▁the", type 1}, {piece
    // "<ctl>", type 3}, {piece "<0x41>", type 6}, {piece "s"}], trainer_spec (field 2): {7: 1} }
    static const unsigned char m[] = {
        0x0A, 0x0E, 0x0A, 0x05, '<', 'o', 'o', 'v', '>', 0x15, 0, 0, 0, 0, 0x18, 0x02,
        0x0A, 0x09, 0x0A, 0x05, 0xE2, 0x96, 0x81, 't', 'h', 0x18, 0x01, // "▁th" (shortened)
        0x12, 0x02, 0x38, 0x01,
        0x0A, 0x09, 0x0A, 0x05, '<', 'c', 't', 'l', '>', 0x18, 0x03,
        0x0A, 0x0A, 0x0A, 0x06, '<', '0', 'x', '4', '1', '>', 0x18, 0x06,
        0x0A, 0x03, 0x0A, 0x01, 's'};
    tk_err e = {0};
    tk_spm_vocab *v = NULL;
    CHECK_EQ_INT(tk_spm_vocab_parse((const char *)m, sizeof m, "m.model", &v, &e), 0);
    if (!v) return;
    CHECK_EQ_INT(tk_spm_vocab_size(v), 5);
    const int32_t ids[] = {1, 4, 2, 3, 0, 1};
    char *s = decode(v, ids, 6);
    CHECK(s && strcmp(s, "thsA \xE2\x81\x87  th") == 0);
    free(s);
    tk_spm_vocab_free(v);
    for (size_t cut = 1; cut < sizeof m; cut++) {
        int rc = tk_spm_vocab_parse((const char *)m, cut, "m.model", &v, &e);
        // cut inside a field: an error naming a byte; at a field's end: fewer pieces
        if (rc) {
            char msg[512];
            tk_err_format(&e, msg, sizeof msg);
            CHECK(rc == TK_EDATA && strstr(msg, "m.model: byte "));
        } else {
            CHECK(tk_spm_vocab_size(v) < 5);
            tk_spm_vocab_free(v);
        }
    }
}

// A .vocab file's errors name the line.
TK_TEST(wer_vocab_errors) {
    const char *bad[] = {"", "a\t0\n\tb\n", "a\t0\nb\tx\n", "a\t0\nb\t\n", "a\t0\nb 0\n"};
    const char *where[] = {"no pieces", "line 2", "line 2", "line 2", "line 2"};
    for (int i = 0; i < 5; i++) {
        tk_err e = {0};
        tk_spm_vocab *v = parse(bad[i], &e);
        CHECK(v == NULL);
        CHECK_EQ_INT(e.code, TK_EDATA);
        char msg[512];
        tk_err_format(&e, msg, sizeof msg);
        CHECK(strstr(msg, where[i]) != NULL);
        if (!strstr(msg, where[i])) printf("#   %s\n", msg);
    }
    tk_err e = {0};
    tk_spm_vocab *v = NULL;
    CHECK_EQ_INT(tk_spm_vocab_parse("a\t0\nb\0\t1\n", 10, "t.vocab", &v, &e), TK_EDATA);
    CHECK_EQ_INT(tk_spm_vocab_load("/nonexistent/x.vocab", &v, &e), TK_EIO);
}

// ---- driver modes ----

static char *read_line(FILE *f) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n && line[n - 1] == '\n') line[n - 1] = 0;
    return line;
}

static int drive_wer(tk_err *e) {
    tk_wer w = {0};
    char *h;
    int rc = 0;
    while (!rc && (h = read_line(stdin))) {
        char *r = read_line(stdin);
        if (!r) rc = tk_err_set(e, TK_EDATA, "stdin: a hypothesis without its reference");
        int64_t d, n;
        if (!rc) rc = tk_wer_distance(h, strlen(h), r, strlen(r), &d, &n, e);
        if (!rc) printf("%lld %lld\n", (long long)d, (long long)n), w.errors += d, w.words += n;
        free(h), free(r);
    }
    if (!rc) printf("total %lld %lld %.17g\n", (long long)w.errors, (long long)w.words, tk_wer_value(&w));
    return rc;
}

static int drive_decode(tk_err *e) {
    const char *path = getenv("VOCAB");
    if (!path) return tk_err_set(e, TK_EUSAGE, "VOCAB=FILE is needed");
    tk_spm_vocab *v;
    TRY(tk_spm_vocab_load(path, &v, e));
    char *line;
    int rc = 0;
    int32_t *ids = NULL;
    while (!rc && (line = read_line(stdin))) {
        int n = 0;
        ids = realloc(ids, (strlen(line) / 2 + 1) * sizeof *ids);
        for (char *p = line, *end; ids; p = end) {
            long x = strtol(p, &end, 10);
            if (end == p) break;
            ids[n++] = (int32_t)x;
        }
        char *s = NULL;
        rc = ids ? tk_spm_decode(v, ids, n, &s, NULL, e) : tk_err_set(e, TK_EIO, "out of memory");
        if (!rc) printf("%s\n", s);
        free(s), free(line);
    }
    free(ids);
    tk_spm_vocab_free(v);
    return rc;
}

__attribute__((constructor(200))) static void drive_mode(void) {
    const char *s = getenv("TK_WER_DRIVE");
    if (!s) return;
    tk_err e = {0};
    int rc = strcmp(s, "wer") == 0      ? drive_wer(&e)
             : strcmp(s, "decode") == 0 ? drive_decode(&e)
                                        : tk_err_set(&e, TK_EUSAGE, "TK_WER_DRIVE must be wer or decode, not \"%s\"", s);
    tk_drive_exit("test_wer", rc, &e);
}
