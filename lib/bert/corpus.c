// Reading one text file of the MLPerf layout into token ids: the lines are read whole (plain,
// gzip or zstd), tokenized in parallel chunks, then put together in order into sentences and
// documents, so the result is the same for any number of threads.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bert/pretrain.h"
#include "core/lines.h" // tk_lines: line input over plain, gzip and zstd files

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct {
    size_t first, last;      // lines [first, last)
    bert_ids ids;
    int rc;
    tk_err err;
} chunk;

static int read_lines(const char *path, char **text, uint64_t **off, size_t *nlines, uint64_t *bytes,
                      tk_err *e) {
    tk_lines *l;
    TRY(tk_lines_open(&l, path, e));
    size_t tcap = 1 << 20, ocap = 1 << 14, tn = 0, n = 0;
    char *t = malloc(tcap);
    uint64_t *o = malloc(ocap * sizeof *o);
    int rc = t && o ? 0 : tk_err_errno(e, ENOMEM, "out of memory");
    while (!rc) {
        const char *line;
        size_t len;
        int nl;
        if ((rc = tk_lines_next(l, &line, &len, &nl, e)) || !line) break;
        if (tn + len > tcap) {
            while (tn + len > tcap) tcap *= 2;
            char *nt = realloc(t, tcap);
            if (!nt) {
                rc = tk_err_errno(e, ENOMEM, "out of memory");
                break;
            }
            t = nt;
        }
        if (n + 2 > ocap) {
            uint64_t *no = realloc(o, (ocap *= 2) * sizeof *o);
            if (!no) {
                rc = tk_err_errno(e, ENOMEM, "out of memory");
                break;
            }
            o = no;
        }
        o[n++] = tn;
        memcpy(t + tn, line, len);
        tn += len;
    }
    *bytes = tk_lines_bytes_in(l);
    tk_lines_close(l);
    if (rc) {
        free(t);
        free(o);
        return rc;
    }
    o[n] = tn;
    *text = t;
    *off = o;
    *nlines = n;
    return 0;
}

int bert_corpus_read(bert_corpus *c, const bert_tokenizer *t, const char *path, int threads, tk_err *e) {
    memset(c, 0, sizeof *c);
    char *text = NULL;
    uint64_t *off = NULL;
    size_t nl = 0;
    TRY(read_lines(path, &text, &off, &nl, &c->bytes, e));
    c->lines = nl;
    uint32_t *count = malloc((nl + 1) * sizeof *count); // tokens of each line; UINT32_MAX = blank
    int nchunks = threads > 1 ? threads * 8 : 1;
    if ((size_t)nchunks > nl) nchunks = nl ? (int)nl : 1;
    chunk *ch = calloc((size_t)nchunks, sizeof *ch);
    int rc = count && ch ? 0 : tk_err_errno(e, ENOMEM, "out of memory");
    // Chunks of about equal bytes.
    for (int k = 0, line = 0; !rc && k < nchunks; k++) {
        uint64_t goal = off[nl] / (uint64_t)nchunks * (uint64_t)(k + 1);
        ch[k].first = (size_t)line;
        while ((size_t)line < nl && (k == nchunks - 1 || off[line] < goal)) line++;
        ch[k].last = (size_t)line;
    }
    if (!rc) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads > 1 ? threads : 1) if (threads > 1)
        for (int k = 0; k < nchunks; k++) {
            chunk *h = &ch[k];
            bert_tok_ws ws = {0};
            for (size_t i = h->first; i < h->last && !h->rc; i++) {
                const char *s = text + off[i];
                size_t len = (size_t)(off[i + 1] - off[i]);
                if (bert_line_is_blank(s, len)) {
                    count[i] = UINT32_MAX;
                    continue;
                }
                size_t before = h->ids.n;
                h->rc = bert_tokenize(t, &ws, s, len, &h->ids, &h->err);
                if (h->rc && !h->err.where[0]) tk_err_where(&h->err, "%s: line %zu", path, i + 1);
                count[i] = (uint32_t)(h->ids.n - before);
            }
            bert_tok_ws_free(&ws);
        }
        for (int k = 0; k < nchunks && !rc; k++)
            if (ch[k].rc) {
                rc = ch[k].rc;
                *e = ch[k].err;
            }
    }
    size_t total = 0;
    for (int k = 0; !rc && k < nchunks; k++) total += ch[k].ids.n;
    if (!rc) {
        c->tok = malloc((total + 1) * sizeof *c->tok);
        c->sent = malloc((nl + 1) * sizeof *c->sent);
        c->doc = malloc((nl + 2) * sizeof *c->doc);
        if (!c->tok || !c->sent || !c->doc) rc = tk_err_errno(e, ENOMEM, "out of memory");
    }
    if (!rc) {
        for (int k = 0; k < nchunks; k++) {
            if (ch[k].ids.n) memcpy(c->tok + c->ntok, ch[k].ids.v, ch[k].ids.n * sizeof *c->tok); // v is NULL when empty
            c->ntok += ch[k].ids.n;
        }
        // Sentences and documents: a blank line closes the document so far, if it has any
        // sentence; lines without tokens are skipped (the reference drops empty lists).
        size_t pos = 0, doc_start = 0;
        for (size_t i = 0; i < nl; i++) {
            if (count[i] == UINT32_MAX) {
                if (c->nsent > doc_start) {
                    c->doc[c->ndoc++] = doc_start;
                    doc_start = c->nsent;
                }
                continue;
            }
            if (count[i] == 0) continue;
            c->sent[c->nsent++] = pos;
            pos += count[i];
        }
        if (c->nsent > doc_start) c->doc[c->ndoc++] = doc_start;
        c->sent[c->nsent] = pos;
        c->doc[c->ndoc] = c->nsent;
    }
    for (int k = 0; ch && k < nchunks; k++) bert_ids_free(&ch[k].ids);
    free(ch);
    free(count);
    free(text);
    free(off);
    if (rc) bert_corpus_free(c);
    return rc;
}

void bert_corpus_free(bert_corpus *c) {
    free(c->tok);
    free(c->sent);
    free(c->doc);
    memset(c, 0, sizeof *c);
}
