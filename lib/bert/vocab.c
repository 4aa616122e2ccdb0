// WordPiece vocabularies: strict reading of vocab.txt and the two hash tables the greedy matcher
// looks pieces up in (word-initial pieces, and continuations keyed without their "##").
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert/tokenizer.h"
#include "bert/unicode.h"
#include "bert/vocab_int.h"

#define MAX_TOKENS (1 << 24)

static int table_init(bert_vtable *t, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    t->slot = malloc(cap * sizeof *t->slot);
    if (!t->slot) return -1;
    memset(t->slot, 0xff, cap * sizeof *t->slot);
    t->mask = cap - 1;
    return 0;
}

// Inserts id under key; returns the id already there for an equal key, or -1.
static int32_t table_put(const bert_vocab *v, bert_vtable *t, const char *key, size_t len, int32_t id) {
    size_t k = (size_t)bert_hash(key, len) & t->mask;
    for (;; k = (k + 1) & t->mask) {
        int32_t s = t->slot[k];
        if (s < 0) {
            t->slot[k] = id;
            return -1;
        }
        size_t skip = bert_vkey_skip(v, s);
        if (v->len[s] - skip == len && memcmp(v->pool + v->off[s] + skip, key, len) == 0) return s;
    }
}

static int fail_line(tk_err *e, const char *name, size_t line, const char *hint, const char *fmt, const char *tok,
                     size_t len) {
    char shown[96];
    size_t m = len < 60 ? len : 60;
    memcpy(shown, tok, m);
    snprintf(shown + m, sizeof shown - m, "%s", len > m ? "..." : "");
    tk_err_set(e, TK_EDATA, fmt, shown);
    tk_err_where(e, "%s: line %zu", name, line);
    if (hint) tk_err_hint(e, "%s", hint);
    return TK_EDATA;
}

static const char ONE_TOKEN[] = "a vocabulary file holds one token a line, with no blank lines";

int bert_vocab_parse(bert_vocab **vp, const char *data, size_t n, const char *name, tk_err *e) {
    *vp = NULL;
    if (bert_unicode_init()) return tk_err_errno(e, ENOMEM, "out of memory");
    if (n == 0) {
        tk_err_set(e, TK_EDATA, "empty vocabulary");
        return tk_err_where(e, "%s: line 1", name);
    }
    bert_vocab *v = calloc(1, sizeof *v);
    size_t lines = 1;
    for (size_t i = 0; i + 1 < n; i++) lines += data[i] == '\n';
    if (v) {
        snprintf(v->name, sizeof v->name, "%s", name);
        v->pool = malloc(n + 1);
    }
    if (v && lines <= MAX_TOKENS) {
        v->off = malloc(lines * sizeof *v->off);
        v->len = malloc(lines * sizeof *v->len);
    }
    uint32_t *cps = malloc((n + 1) * sizeof *cps);
    int rc = 0;
    if (!v || !v->pool || !cps || (lines <= MAX_TOKENS && (!v->off || !v->len)) ||
        table_init(&v->init, lines) || table_init(&v->cont, lines))
        rc = tk_err_errno(e, ENOMEM, "out of memory");
    else if (lines > MAX_TOKENS)
        rc = tk_err_set(e, TK_EDATA, "%s: more than %d tokens", name, MAX_TOKENS);
    size_t pos = 0;
    for (size_t line = 1; !rc && pos < n; line++) {
        const char *nl = memchr(data + pos, '\n', n - pos);
        size_t end = nl ? (size_t)(nl - data) : n, len = end - pos;
        const char *tok = data + pos;
        if (len && tok[len - 1] == '\r') len--; // CRLF files
        size_t bad;
        long ncp = bert_utf8_decode(tok, len, cps, &bad);
        if (len == 0) {
            rc = fail_line(e, name, line, ONE_TOKEN, "empty line%s", "", 0);
        } else if (ncp < 0) {
            char what[64];
            snprintf(what, sizeof what, "invalid UTF-8 at byte %zu", bad);
            rc = fail_line(e, name, line, NULL, "%s", what, strlen(what));
        } else {
            for (long i = 0; i < ncp && !rc; i++)
                if (bert_uclass(cps[i]) & BU_PYSPACE)
                    rc = fail_line(e, name, line, ONE_TOKEN, "'%s' is not one token (it contains whitespace)", tok, len);
        }
        if (rc) break;
        int32_t id = v->n;
        memcpy(v->pool + pos, tok, len);
        v->pool[pos + len] = '\0';
        v->off[id] = pos;
        v->len[id] = (uint32_t)len;
        size_t skip = bert_vkey_skip(v, id);
        bert_vtable *t = skip ? &v->cont : &v->init;
        int32_t prev = table_put(v, t, tok + skip, len - skip, id);
        if (prev >= 0) {
            char what[160];
            snprintf(what, sizeof what, "token '%.60s' repeats line %d", v->pool + v->off[prev], prev + 1);
            rc = fail_line(e, name, line, "every token of a vocabulary is on one line only", "%s", what,
                           strlen(what));
            break;
        }
        size_t nchars = (size_t)ncp - (skip ? 2 : 0);
        if (skip && nchars > v->max_cont_chars) v->max_cont_chars = nchars;
        if (!skip && nchars > v->max_init_chars) v->max_init_chars = nchars;
        v->n++;
        pos = nl ? end + 1 : n;
    }
    free(cps);
    if (rc) {
        bert_vocab_free(v);
        return rc;
    }
    *vp = v;
    return 0;
}

int bert_vocab_load(bert_vocab **v, const char *path, tk_err *e) {
    *v = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tk_err_errno(e, errno, "%s: cannot open", path);
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? 0 : tk_err_errno(e, ENOMEM, "out of memory");
    while (!rc) {
        if (n == cap) {
            char *nb = cap < ((size_t)1 << 31) ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                rc = tk_err_errno(e, ENOMEM, "%s: too large for memory", path);
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) {
            if (ferror(f)) rc = tk_err_errno(e, errno, "%s: read failed", path);
            break;
        }
    }
    fclose(f);
    if (!rc) rc = bert_vocab_parse(v, buf, n, path, e);
    free(buf);
    return rc;
}

void bert_vocab_free(bert_vocab *v) {
    if (!v) return;
    free(v->pool);
    free(v->off);
    free(v->len);
    free(v->init.slot);
    free(v->cont.slot);
    free(v);
}

int32_t bert_vocab_size(const bert_vocab *v) { return v->n; }

const char *bert_vocab_token(const bert_vocab *v, int32_t id) {
    return id >= 0 && id < v->n ? v->pool + v->off[id] : NULL;
}

int32_t bert_vocab_id(const bert_vocab *v, const char *tok, size_t len) {
    if (len > 2 && tok[0] == '#' && tok[1] == '#') return bert_vlookup(v, &v->cont, tok + 2, len - 2);
    return bert_vlookup(v, &v->init, tok, len);
}

int bert_vocab_special(const bert_vocab *v, bert_special *s, tk_err *e) {
    static const char *names[] = {"[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    int32_t *dst[] = {&s->unk, &s->cls, &s->sep, &s->mask};
    s->pad = bert_vocab_id(v, "[PAD]", 5);
    for (int i = 0; i < 4; i++) {
        *dst[i] = bert_vocab_id(v, names[i], strlen(names[i]));
        if (*dst[i] < 0) {
            tk_err_set(e, TK_EDATA, "the vocabulary has no %s token", names[i]);
            tk_err_where(e, "%s", v->name);
            return tk_err_hint(e, "BERT vocabularies hold [PAD] [UNK] [CLS] [SEP] [MASK]");
        }
    }
    return 0;
}
