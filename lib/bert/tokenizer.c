// The basic tokenizer and the greedy WordPiece matcher (tokenizer.h). Lines of plain ASCII, most
// of Wikipedia, take a byte path; others are decoded and go through the Unicode steps in the
// reference's order: clean, space out CJK, split on whitespace, lower + strip accents per word,
// split punctuation.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bert/tokenizer.h"
#include "bert/unicode.h"
#include "bert/vocab_int.h"

struct bert_tokenizer {
    const bert_vocab *v;
    int cased, max_word_chars;
    int32_t unk;
};

// ASCII classes: what the reference does to each byte.
enum { A_WORD, A_SPACE, A_DROP, A_PUNCT };
static unsigned char aclass[128];

static void ascii_init(void) {
    for (int c = 0; c < 128; c++) {
        unsigned f = bert_uclass((uint32_t)c);
        aclass[c] = f & BU_WS ? A_SPACE : f & BU_CTRL ? A_DROP : f & BU_PUNCT ? A_PUNCT : A_WORD;
        if (c == 0) aclass[c] = A_DROP;
        // \v \f \x1c-\x1f are control characters: removed before str.split() could see them
    }
}

int bert_tokenizer_new(bert_tokenizer **tp, const bert_vocab *v, const bert_tok_opts *o, tk_err *e) {
    *tp = NULL;
    if (bert_unicode_init()) return tk_err_errno(e, ENOMEM, "out of memory");
    bert_special sp;
    TRY(bert_vocab_special(v, &sp, e));
    bert_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return tk_err_errno(e, ENOMEM, "out of memory");
    t->v = v;
    t->cased = o ? o->cased : 0;
    t->max_word_chars = o && o->max_word_chars > 0 ? o->max_word_chars : BERT_REF_MAX_WORD_CHARS;
    t->unk = sp.unk;
    ascii_init(); // idempotent: every call writes the same bytes
    *tp = t;
    return 0;
}

void bert_tokenizer_free(bert_tokenizer *t) { free(t); }

int bert_ids_push(bert_ids *a, int32_t id) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        int32_t *nv = realloc(a->v, cap * sizeof *nv);
        if (!nv) return -1;
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}

void bert_ids_free(bert_ids *a) {
    free(a->v);
    memset(a, 0, sizeof *a);
}

void bert_tok_ws_free(bert_tok_ws *ws) {
    free(ws->cp);
    free(ws->tmp);
    free(ws->utf8);
    memset(ws, 0, sizeof *ws);
}

// Room for n code points in each of cp and tmp (tmp holds 16 per input: lower x3, NFD x4, slack)
// and 4n bytes of UTF-8.
static int ws_reserve(bert_tok_ws *ws, size_t n, tk_err *e) {
    if (n <= ws->cap) return 0;
    size_t cap = n < 256 ? 256 : n;
    uint32_t *cp = realloc(ws->cp, cap * sizeof *cp);
    if (cp) ws->cp = cp;
    uint32_t *tmp = cp ? realloc(ws->tmp, cap * 16 * sizeof *tmp) : NULL;
    if (tmp) ws->tmp = tmp;
    char *u = tmp ? realloc(ws->utf8, cap * 16 * 4) : NULL;
    if (!u) return tk_err_errno(e, ENOMEM, "out of memory");
    ws->utf8 = u;
    ws->cap = cap;
    return 0;
}

static int oom(tk_err *e) { return tk_err_errno(e, ENOMEM, "out of memory"); }

int bert_wordpiece(const bert_tokenizer *t, const char *w, size_t len, size_t nchars, bert_ids *out, tk_err *e) {
    if (nchars == 0) return 0;
    if (nchars > (size_t)t->max_word_chars) return bert_ids_push(out, t->unk) ? oom(e) : 0;
    const bert_vocab *v = t->v;
    // Byte offset of each character (ASCII words: the index itself).
    size_t stack[257], *off = NULL;
    int ascii = len == nchars;
    if (!ascii) {
        off = nchars < 257 ? stack : malloc((nchars + 1) * sizeof *off);
        if (!off) return oom(e);
        size_t k = 0;
        for (size_t i = 0; i < len; i++)
            if (((unsigned char)w[i] & 0xC0) != 0x80) off[k++] = i;
        off[k] = len;
    }
#define OFF(i) (ascii ? (i) : off[i])
    size_t first = out->n, start = 0;
    int rc = 0;
    while (start < nchars) {
        const bert_vtable *tab = start ? &v->cont : &v->init;
        size_t maxc = start ? v->max_cont_chars : v->max_init_chars;
        size_t end = nchars - start < maxc ? nchars : start + maxc;
        int32_t id = -1;
        for (; end > start; end--) {
            id = bert_vlookup(v, tab, w + OFF(start), OFF(end) - OFF(start));
            if (id >= 0) break;
        }
        if (id < 0) { // no piece matches here: the whole word is unknown
            out->n = first;
            id = t->unk;
            end = nchars;
        }
        if (bert_ids_push(out, id)) {
            rc = oom(e);
            break;
        }
        start = end;
    }
#undef OFF
    if (off != stack) free(off);
    return rc;
}

// The ASCII path. Classes per byte: whitespace ends a word, control bytes vanish (joining their
// neighbours, as _clean_text removes them before splitting), punctuation stands alone.
static int basic_ascii(const bert_tokenizer *t, bert_tok_ws *ws, const char *s, size_t n, bert_word_fn fn,
                       void *ctx, tk_err *e) {
    char *w = ws->utf8;
    size_t k = 0;
    for (size_t i = 0; i <= n; i++) {
        int c = i < n ? (unsigned char)s[i] : ' ';
        int cls = aclass[c];
        if (cls == A_WORD) {
            w[k++] = (char)(!t->cased && c >= 'A' && c <= 'Z' ? c + 32 : c);
            continue;
        }
        if (cls == A_DROP) continue;
        if (k) TRY(fn(ctx, w, k, k, e));
        k = 0;
        if (cls == A_PUNCT) {
            char p = (char)c;
            TRY(fn(ctx, &p, 1, 1, e));
        }
    }
    return 0;
}

// Emits the pieces of one processed word: split so that each punctuation character stands alone
// (and, to be exact, on any whitespace that lower-casing or NFD might have produced).
static int emit_pieces(bert_tok_ws *ws, const uint32_t *c, size_t n, bert_word_fn fn, void *ctx, tk_err *e) {
    char *u = ws->utf8;
    size_t k = 0, nch = 0;
    for (size_t i = 0; i <= n; i++) {
        unsigned f = i < n ? bert_uclass(c[i]) : BU_PYSPACE;
        if (!(f & (BU_PUNCT | BU_PYSPACE))) {
            k += (size_t)bert_utf8_put(c[i], u + k);
            nch++;
            continue;
        }
        if (nch) TRY(fn(ctx, u, k, nch, e));
        k = nch = 0;
        if (f & BU_PUNCT) {
            char p[4];
            int m = bert_utf8_put(c[i], p);
            TRY(fn(ctx, p, (size_t)m, 1, e));
        }
    }
    return 0;
}

// Lower-cases and strips the accents of one word (unless cased), then emits its pieces.
static int finish_word(const bert_tokenizer *t, bert_tok_ws *ws, const uint32_t *w, size_t n, size_t line_len,
                       bert_word_fn fn, void *ctx, tk_err *e) {
    if (!t->cased) {
        uint32_t *lw = ws->tmp + line_len, *st = ws->tmp + 4 * line_len;
        n = bert_lower_word(w, n, lw);
        n = bert_strip_accents(lw, n, st);
        w = st;
    }
    return emit_pieces(ws, w, n, fn, ctx, e);
}

static int basic_unicode(const bert_tokenizer *t, bert_tok_ws *ws, const char *s, size_t n, bert_word_fn fn,
                         void *ctx, tk_err *e) {
    size_t bad;
    long m = bert_utf8_decode(s, n, ws->tmp, &bad);
    if (m < 0) return tk_err_set(e, TK_EDATA, "invalid UTF-8 at byte %zu", bad);
    // _clean_text and _tokenize_chinese_chars, then str.split(): collect each word in cp. The
    // decoded line sits in tmp[0, n); finish_word uses tmp[n, 16n) (lower-casing can triple a
    // word, NFD quadruple that).
    uint32_t *w = ws->cp;
    size_t k = 0;
    for (long i = 0; i <= m; i++) {
        uint32_t c = i < m ? ws->tmp[i] : ' ';
        unsigned f = bert_uclass(c);
        if (c == 0 || c == 0xFFFD || (f & BU_CTRL)) continue;
        if (!(f & (BU_WS | BU_PYSPACE | BU_CJK))) {
            w[k++] = c;
            continue;
        }
        if (k) TRY(finish_word(t, ws, w, k, n, fn, ctx, e));
        k = 0;
        if (f & BU_CJK) { // a word of its own, lower-cased and decomposed like any other
            w[0] = c;
            TRY(finish_word(t, ws, w, 1, n, fn, ctx, e));
        }
    }
    return 0;
}

int bert_basic_tokenize(const bert_tokenizer *t, bert_tok_ws *ws, const char *s, size_t n, bert_word_fn fn,
                        void *ctx, tk_err *e) {
    TRY(ws_reserve(ws, n + 1, e));
    size_t i = 0;
    while (i < n && !((unsigned char)s[i] & 0x80)) i++;
    if (i == n) return basic_ascii(t, ws, s, n, fn, ctx, e);
    return basic_unicode(t, ws, s, n, fn, ctx, e);
}

typedef struct {
    const bert_tokenizer *t;
    bert_ids *out;
} wp_ctx;

static int wp_word(void *ctx, const char *w, size_t len, size_t nchars, tk_err *e) {
    wp_ctx *c = ctx;
    return bert_wordpiece(c->t, w, len, nchars, c->out, e);
}

int bert_tokenize(const bert_tokenizer *t, bert_tok_ws *ws, const char *line, size_t len, bert_ids *out,
                  tk_err *e) {
    wp_ctx c = {t, out};
    return bert_basic_tokenize(t, ws, line, len, wp_word, &c, e);
}

int bert_line_is_blank(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            if (!(c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f))) return 0;
            i++;
            continue;
        }
        uint32_t cp[4];
        size_t bad, len = (c >= 0xF0) ? 4 : (c >= 0xE0) ? 3 : 2;
        if (i + len > n || bert_utf8_decode(s + i, len, cp, &bad) != 1) return 0;
        if (!(bert_uclass(cp[0]) & BU_PYSPACE)) return 0;
        i += len;
    }
    return 1;
}
