// Word error rate and sentencepiece detokenization (wer.h says which reference code it follows).
#include "speech/wer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Python's str.split() separators among ASCII bytes.
static int is_space(unsigned char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f); }

typedef struct {
    const char *p;
    size_t n;
} word;

// The words of s[0 .. n) into *w (malloc'd; *nw of them).
static int split_words(const char *s, size_t n, word **w, int64_t *nw, tk_err *e) {
    int64_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_space((unsigned char)s[i]) && (i == 0 || is_space((unsigned char)s[i - 1]))) count++;
    *w = malloc((size_t)(count ? count : 1) * sizeof **w);
    if (!*w) return tk_err_errno(e, ENOMEM, "out of memory for %lld words", (long long)count);
    int64_t k = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && is_space((unsigned char)s[i])) i++;
        size_t j = i;
        while (j < n && !is_space((unsigned char)s[j])) j++;
        if (j > i) (*w)[k++] = (word){s + i, j - i};
        i = j;
    }
    *nw = k;
    return 0;
}

static int same(const word *a, const word *b) { return a->n == b->n && memcmp(a->p, b->p, a->n) == 0; }

int tk_wer_distance(const char *hyp, size_t hn, const char *ref, size_t rn, int64_t *dist, int64_t *ref_words,
                    tk_err *e) {
    word *h = NULL, *r = NULL;
    int64_t nh = 0, nr = 0;
    int rc = split_words(hyp, hn, &h, &nh, e);
    if (!rc) rc = split_words(ref, rn, &r, &nr, e);
    // one row of the edit-distance table over the reference's words
    int64_t *row = rc ? NULL : malloc((size_t)(nr + 1) * sizeof *row);
    if (!rc && !row) rc = tk_err_errno(e, ENOMEM, "out of memory for %lld words", (long long)nr);
    if (!rc) {
        for (int64_t j = 0; j <= nr; j++) row[j] = j;
        for (int64_t i = 1; i <= nh; i++) {
            int64_t diag = row[0];
            row[0] = i;
            for (int64_t j = 1; j <= nr; j++) {
                int64_t up = row[j], best = diag + !same(&h[i - 1], &r[j - 1]);
                if (up + 1 < best) best = up + 1;
                if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
                row[j] = best, diag = up;
            }
        }
        *dist = row[nr];
        if (ref_words) *ref_words = nr;
    }
    free(row), free(h), free(r);
    return rc;
}

int tk_wer_add(tk_wer *w, const char *hyp, const char *ref, tk_err *e) {
    int64_t d, n;
    TRY(tk_wer_distance(hyp, strlen(hyp), ref, strlen(ref), &d, &n, e));
    w->errors += d, w->words += n;
    return 0;
}

double tk_wer_value(const tk_wer *w) { return w->words ? (double)w->errors / (double)w->words : INFINITY; }

// ---- sentencepiece pieces ----

enum { PIECE_NORMAL, PIECE_UNK, PIECE_CONTROL };

struct tk_spm_vocab {
    int n;
    char *text;                  // the pieces as decode writes them (▁ already a space)
    int64_t *off;                // n + 1
    uint8_t *kind;
};

void tk_spm_vocab_free(tk_spm_vocab *v) {
    if (!v) return;
    free(v->text), free(v->off), free(v->kind), free(v);
}

int tk_spm_vocab_size(const tk_spm_vocab *v) { return v->n; }

// Room for n pieces of textcap bytes in all.
static tk_spm_vocab *vocab_alloc(size_t textcap, int n) {
    tk_spm_vocab *v = calloc(1, sizeof *v);
    if (v) v->text = malloc(textcap + 1), v->off = malloc((size_t)(n + 1) * sizeof *v->off), v->kind = malloc((size_t)n);
    if (!v || !v->text || !v->off || !v->kind) {
        tk_spm_vocab_free(v);
        return NULL;
    }
    v->off[0] = 0;
    return v;
}

// Appends piece s[0 .. pl) of a kind; its U+2581 (E2 96 81 in UTF-8) become spaces.
static void add_piece(tk_spm_vocab *v, const char *s, size_t pl, int kind) {
    int64_t t = v->off[v->n];
    for (size_t i = 0; i < pl; i++) {
        if (i + 2 < pl && (unsigned char)s[i] == 0xE2 && (unsigned char)s[i + 1] == 0x96 && (unsigned char)s[i + 2] == 0x81) {
            v->text[t++] = ' ';
            i += 2;
        } else
            v->text[t++] = s[i];
    }
    v->kind[v->n++] = (uint8_t)kind;
    v->off[v->n] = t;
}

static int bad_line(tk_err *e, const char *name, int line, const char *what) {
    tk_err_set(e, TK_EDATA, "%s", what);
    tk_err_where(e, "%s: line %d", name, line);
    return tk_err_hint(e, "a sentencepiece .vocab file (spm_train writes it beside the .model) has lines PIECE<TAB>SCORE");
}

// The .vocab text: a piece's kind from its name (spm_train's defaults: <unk>, <s>, </s>, <pad>).
static int vocab_text(const char *buf, size_t n, const char *name, tk_spm_vocab **out, tk_err *e) {
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    lines += n && buf[n - 1] != '\n';
    if (lines == 0 || lines > (1 << 24)) {
        tk_err_set(e, TK_EDATA, lines ? "more than 2^24 pieces" : "no pieces");
        return tk_err_where(e, "%s", name);
    }
    tk_spm_vocab *v = vocab_alloc(n, lines);
    if (!v) return tk_err_errno(e, ENOMEM, "out of memory for %s", name);
    int rc = 0;
    size_t at = 0;
    for (int l = 0; !rc && l < lines; l++) {
        const char *s = buf + at;
        const char *nl = memchr(s, '\n', n - at);
        size_t len = nl ? (size_t)(nl - s) : n - at;
        at += len + (nl != NULL);
        const char *tab = memchr(s, '\t', len);
        if (memchr(s, '\0', len)) {
            rc = bad_line(e, name, l + 1, "a NUL byte");
            break;
        }
        if (!tab || tab == s) {
            rc = bad_line(e, name, l + 1, tab ? "an empty piece" : "no tab between the piece and its score");
            break;
        }
        // the score: a number (spm_train writes floats; it is not used)
        char num[64];
        size_t sl = len - (size_t)(tab + 1 - s);
        if (sl == 0 || sl >= sizeof num) {
            rc = bad_line(e, name, l + 1, "the score is not a number");
            break;
        }
        memcpy(num, tab + 1, sl);
        num[sl] = 0;
        char *end;
        double score = strtod(num, &end);
        if (*end || isnan(score)) {
            rc = bad_line(e, name, l + 1, "the score is not a number");
            break;
        }
        size_t pl = (size_t)(tab - s);
        int kind = pl == 5 && memcmp(s, "<unk>", 5) == 0 ? PIECE_UNK : PIECE_NORMAL;
        if ((pl == 3 && memcmp(s, "<s>", 3) == 0) || (pl == 4 && memcmp(s, "</s>", 4) == 0) ||
            (pl == 5 && memcmp(s, "<pad>", 5) == 0))
            kind = PIECE_CONTROL;
        add_piece(v, s, pl, kind);
    }
    if (rc) {
        tk_spm_vocab_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

// ---- the .model: a protobuf ModelProto (sentencepiece_model.proto: field 1 the repeated pieces,
// each a SentencePiece message of piece = 1 (string), score = 2 (float), type = 3 (enum: 1
// normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte)); every other field skipped ----

static int pb_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
    uint64_t x = 0;
    for (int sh = 0; sh < 64 && *i < n; sh += 7) {
        uint8_t b = p[(*i)++];
        x |= (uint64_t)(b & 0x7f) << sh;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

// Skips a value of wire type wt, or reads a length-delimited one's span (*len).
static int pb_value(const uint8_t *p, size_t n, size_t *i, int wt, size_t *len) {
    uint64_t v;
    switch (wt) {
    case 0: return pb_varint(p, n, i, &v);
    case 1: return n - *i < 8 ? -1 : (*i += 8, 0);
    case 2:
        if (pb_varint(p, n, i, &v) || v > n - *i) return -1;
        *len = (size_t)v;
        return 0;
    case 5: return n - *i < 4 ? -1 : (*i += 4, 0);
    }
    return -1;
}

static int bad_model(tk_err *e, const char *name, size_t at, const char *what) {
    tk_err_set(e, TK_EDATA, "%s", what);
    tk_err_where(e, "%s: byte %zu", name, at);
    return tk_err_hint(e, "give a sentencepiece .model (spm_train's) or its .vocab");
}

// One SentencePiece message p[0 .. n) (at: its offset in the file) appended to v (v NULL: checked
// only).
static int model_piece(const uint8_t *p, size_t n, size_t at, const char *name, tk_spm_vocab *v, tk_err *e) {
    const uint8_t *piece = NULL;
    size_t pl = 0, i = 0;
    uint64_t type = 1;
    while (i < n) {
        uint64_t key;
        size_t len = 0, f0 = i;
        if (pb_varint(p, n, &i, &key) || pb_value(p, n, &i, (int)(key & 7), &len))
            return bad_model(e, name, at + f0, "a truncated field in a piece");
        if ((key >> 3) == 1 && (key & 7) == 2) piece = p + i, pl = len;
        if ((key >> 3) == 3 && (key & 7) == 0) {
            size_t j = f0;
            pb_varint(p, n, &j, &key);
            pb_varint(p, n, &j, &type);
        }
        if ((key & 7) == 2) i += len;
    }
    if (!piece) return bad_model(e, name, at, "a piece without its text");
    if (memchr(piece, '\0', pl)) return bad_model(e, name, at, "a NUL byte in a piece");
    if (!v) return 0;
    // a byte piece <0xHH> decodes to that byte (byte_fallback models)
    if (type == 6 && pl == 6 && memcmp(piece, "<0x", 3) == 0 && piece[5] == '>') {
        char hex[3] = {(char)piece[3], (char)piece[4], 0}, *end;
        long b = strtol(hex, &end, 16);
        if (!*end && b > 0) {
            char c = (char)b;
            add_piece(v, &c, 1, PIECE_NORMAL);
            return 0;
        }
    }
    add_piece(v, (const char *)piece, pl, type == 2 ? PIECE_UNK : type == 3 ? PIECE_CONTROL : PIECE_NORMAL);
    return 0;
}

static int vocab_model(const uint8_t *p, size_t n, const char *name, tk_spm_vocab **out, tk_err *e) {
    tk_spm_vocab *v = NULL;
    for (int pass = 0; pass < 2; pass++) {
        size_t i = 0;
        int k = 0;
        while (i < n) {
            uint64_t key;
            size_t len = 0, f0 = i;
            if (pb_varint(p, n, &i, &key) || pb_value(p, n, &i, (int)(key & 7), &len)) {
                tk_spm_vocab_free(v);
                return bad_model(e, name, f0, "a truncated or malformed protobuf field (not a sentencepiece .model)");
            }
            if ((key >> 3) == 1 && (key & 7) == 2) {
                if (k == (1 << 24)) return bad_model(e, name, f0, "more than 2^24 pieces");
                int rc = model_piece(p + i, len, i, name, v, e);
                if (rc) {
                    tk_spm_vocab_free(v);
                    return rc;
                }
                k++;
            }
            if ((key & 7) == 2) i += len;
        }
        if (k == 0) return bad_model(e, name, 0, "no pieces");
        if (pass == 0 && !(v = vocab_alloc(n, k))) return tk_err_errno(e, ENOMEM, "out of memory for %s", name);
    }
    *out = v;
    return 0;
}

int tk_spm_vocab_parse(const char *buf, size_t n, const char *name, tk_spm_vocab **out, tk_err *e) {
    *out = NULL;
    // a .model's first byte is field 1's key (0x0A); a .vocab line never starts with a newline
    if (n && buf[0] == 0x0A) return vocab_model((const uint8_t *)buf, n, name, out, e);
    return vocab_text(buf, n, name, out, e);
}

int tk_spm_vocab_load(const char *path, tk_spm_vocab **v, tk_err *e) {
    *v = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        tk_err_errno(e, errno, "cannot open");
        return tk_err_where(e, "%s", path);
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= ((size_t)1 << 30)) {
                rc = tk_err_set(e, TK_EDATA, "over 1 GiB: not a sentencepiece vocabulary");
                tk_err_where(e, "%s", path);
                break;
            }
            char *q = realloc(buf, cap ? 2 * cap : 65536);
            if (!q) {
                rc = tk_err_errno(e, ENOMEM, "out of memory reading %s", path);
                break;
            }
            buf = q, cap = cap ? 2 * cap : 65536;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                rc = tk_err_errno(e, errno ? errno : EIO, "read error");
                tk_err_where(e, "%s", path);
            }
            break;
        }
    }
    fclose(f);
    if (!rc) rc = tk_spm_vocab_parse(buf ? buf : "", n, path, v, e);
    free(buf);
    return rc;
}

int tk_spm_decode(const tk_spm_vocab *v, const int32_t *ids, int n, char **out, size_t *len, tk_err *e) {
    static const char unk[] = " \xE2\x81\x87 ";
    *out = NULL;
    size_t need = 1;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->n)
            return tk_err_set(e, TK_EDATA, "token %d (position %d) outside the vocabulary of %d pieces", ids[i], i, v->n);
        need += v->kind[ids[i]] == PIECE_UNK ? sizeof unk - 1 : (size_t)(v->off[ids[i] + 1] - v->off[ids[i]]);
    }
    char *s = malloc(need);
    if (!s) return tk_err_errno(e, ENOMEM, "out of memory for a text of %zu bytes", need);
    size_t t = 0;
    for (int i = 0; i < n; i++) {
        const int k = v->kind[ids[i]];
        if (k == PIECE_CONTROL) continue;
        const char *p = k == PIECE_UNK ? unk : v->text + v->off[ids[i]];
        size_t pl = k == PIECE_UNK ? sizeof unk - 1 : (size_t)(v->off[ids[i] + 1] - v->off[ids[i]]);
        // the first piece's leading word boundary is not written (sentencepiece's decode)
        if (t == 0 && k == PIECE_NORMAL && pl && p[0] == ' ') p++, pl--;
        memcpy(s + t, p, pl);
        t += pl;
    }
    s[t] = 0;
    *out = s;
    if (len) *len = t;
    return 0;
}
