// Examples from a corpus with the reference's create_pretraining_data.py semantics (pretrain.h),
// the draws in the reference's order so BERT_RNG_MT reproduces its output, and the parallel
// writer of `prep bert`.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bert/pretrain.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void bert_pretrain_defaults(bert_pretrain_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_seq_length = 512;
    o->max_predictions = 76;
    o->masked_lm_prob = 0.15;
    o->short_seq_prob = 0.1;
    o->dupe_factor = 10;
    o->seed = 12345;
    o->rng = BERT_RNG_PHILOX;
}

typedef struct {
    bert_examples *x;
    const bert_pretrain_opts *o;
    const bert_special *sp;
    int32_t vocab;
    bert_rng r;
    uint32_t *docs;          // the shuffled documents (indices into the corpus)
    uint16_t *cand;          // scratch: candidate positions for masking
} maker;

static int grow(void **p, size_t *cap, size_t need, size_t sz, tk_err *e) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *np = realloc(*p, c * sz);
    if (!np) return tk_err_errno(e, ENOMEM, "out of memory");
    *p = np;
    *cap = c;
    return 0;
}

// The original token at position p of [CLS] A [SEP] B [SEP].
static int32_t token_at(const bert_corpus *c, const bert_inst *in, int p) {
    return (uint32_t)p <= in->la ? c->tok[in->a + (uint64_t)p - 1] : c->tok[in->b + ((uint64_t)p - in->la - 2)];
}

// create_masked_lm_predictions: shuffle the candidates, take the first num_to_predict, draw what
// each shows, sort them by position.
static int mask_instance(maker *mk, bert_inst *in, tk_err *e) {
    bert_examples *x = mk->x;
    int n = (int)(in->la + in->lb) + 3, nc = 0;
    for (int p = 1; p < n - 1; p++)
        if (p != (int)in->la + 1) mk->cand[nc++] = (uint16_t)p;
    // Python's round() rounds half to even, as nearbyint does in the default rounding mode.
    long k = (long)nearbyint((double)n * mk->o->masked_lm_prob);
    if (k < 1) k = 1;
    if (k > mk->o->max_predictions) k = mk->o->max_predictions;
    if (k > nc) k = nc;
    if (mk->o->rng == BERT_RNG_MT) {
        bert_rng_shuffle(&mk->r, mk->cand, (uint32_t)nc, sizeof *mk->cand); // the reference's draws
    } else {
        // Only the first k matter: a partial Fisher-Yates gives them the same distribution (a
        // uniform random k-subset in random order) with k draws instead of nc - 1.
        for (long i = 0; i < k; i++) {
            uint32_t j = (uint32_t)i + bert_rng_below(&mk->r, (uint32_t)(nc - i));
            uint16_t t = mk->cand[i];
            mk->cand[i] = mk->cand[j];
            mk->cand[j] = t;
        }
    }
    TRY(grow((void **)&x->m, &x->mcap, x->nm + (size_t)k, sizeof *x->m, e));
    bert_masked *m = x->m + x->nm;
    for (long i = 0; i < k; i++) {
        int p = mk->cand[i];
        int32_t shown;
        if (bert_rng_random(&mk->r) < 0.8) shown = mk->sp->mask;
        else if (bert_rng_random(&mk->r) < 0.5) shown = token_at(&x->c, in, p);
        else shown = (int32_t)bert_rng_below(&mk->r, (uint32_t)mk->vocab);
        // insertion by position (k is small)
        long j = i;
        while (j > 0 && m[j - 1].pos > p) {
            m[j] = m[j - 1];
            j--;
        }
        m[j].pos = (uint16_t)p;
        m[j].shown = shown;
    }
    in->moff = x->nm;
    in->nmask = (uint16_t)k;
    x->nm += (size_t)k;
    return 0;
}

// truncate_seq_pair: the longer segment (B on a tie) loses its first or last token.
static void truncate_pair(maker *mk, bert_inst *in, int max_tokens) {
    while ((uint64_t)in->la + in->lb > (uint64_t)max_tokens) {
        int front = bert_rng_random(&mk->r) < 0.5;
        if (in->la > in->lb) {
            if (front) in->a++;
            in->la--;
        } else {
            if (front) in->b++;
            in->lb--;
        }
    }
}

#define SENT_LEN(c, s) ((c)->sent[(s) + 1] - (c)->sent[(s)])

// create_instances_from_document for the document at position di of the shuffled list.
static int from_document(maker *mk, uint32_t di, tk_err *e) {
    bert_examples *x = mk->x;
    const bert_corpus *c = &x->c;
    uint32_t ndocs = (uint32_t)c->ndoc;
    size_t s0 = c->doc[mk->docs[di]], s1 = c->doc[mk->docs[di] + 1];
    long max_tokens = mk->o->max_seq_length - 3, target = max_tokens;
    if (bert_rng_random(&mk->r) < mk->o->short_seq_prob) target = 2 + (long)bert_rng_below(&mk->r, (uint32_t)(max_tokens - 1));
    size_t chunk0 = s0, nchunk = 0;
    uint64_t cur = 0;
    for (size_t i = s0; i < s1; i++) {
        if (nchunk == 0) chunk0 = i;
        nchunk++;
        cur += SENT_LEN(c, i);
        if (i != s1 - 1 && cur < (uint64_t)target) continue;
        size_t a_end = 1;
        if (nchunk >= 2) a_end = 1 + bert_rng_below(&mk->r, (uint32_t)(nchunk - 1));
        bert_inst in = {0};
        in.a = c->sent[chunk0];
        uint64_t la = c->sent[chunk0 + a_end] - in.a, lb;
        if (nchunk == 1 || bert_rng_random(&mk->r) < 0.5) {
            in.random_next = 1;
            long target_b = target - (long)la;
            uint32_t rdi = 0;
            for (int tries = 0; tries < 10; tries++) {
                rdi = bert_rng_below(&mk->r, ndocs);
                if (rdi != di) break;
            }
            size_t r0 = c->doc[mk->docs[rdi]], r1 = c->doc[mk->docs[rdi] + 1];
            size_t rs = r0 + bert_rng_below(&mk->r, (uint32_t)(r1 - r0)), j = rs;
            lb = 0;
            while (j < r1) { // whole sentences until the target is reached (at least one)
                lb += SENT_LEN(c, j);
                j++;
                if ((long)lb >= target_b) break;
            }
            in.b = c->sent[rs];
            i -= nchunk - a_end; // the unused sentences are put back
        } else {
            in.b = c->sent[chunk0 + a_end];
            lb = c->sent[chunk0 + nchunk] - in.b;
        }
        if (la > UINT32_MAX || lb > UINT32_MAX) return tk_err_set(e, TK_EDATA, "a segment of 2^32 tokens or more");
        in.la = (uint32_t)la;
        in.lb = (uint32_t)lb;
        truncate_pair(mk, &in, (int)max_tokens);
        TRY(mask_instance(mk, &in, e));
        TRY(grow((void **)&x->inst, &x->icap, x->ninst + 1, sizeof *x->inst, e));
        x->inst[x->ninst++] = in;
        nchunk = 0;
        cur = 0;
    }
    return 0;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int bert_examples_make(bert_examples *x, bert_corpus *c, const char *name, const bert_pretrain_opts *o,
                       const bert_special *sp, int32_t vocab, tk_err *e) {
    memset(x, 0, sizeof *x);
    x->c = *c;
    memset(c, 0, sizeof *c);
    maker mk = {.x = x, .o = o, .sp = sp, .vocab = vocab};
    bert_rng_init(&mk.r, o->rng, o->seed, bert_rng_tag(base_name(name)));
    size_t nd = x->c.ndoc;
    mk.docs = malloc((nd + 1) * sizeof *mk.docs);
    mk.cand = malloc((size_t)o->max_seq_length * sizeof *mk.cand);
    int rc = mk.docs && mk.cand ? 0 : tk_err_errno(e, ENOMEM, "out of memory");
    if (!rc && nd > UINT32_MAX / 2) rc = tk_err_set(e, TK_EDATA, "%s: too many documents", name);
    for (size_t d = 0; d < nd; d++) mk.docs[d] = (uint32_t)d;
    if (!rc) bert_rng_shuffle(&mk.r, mk.docs, (uint32_t)nd, sizeof *mk.docs);
    for (int dupe = 0; !rc && dupe < o->dupe_factor; dupe++)
        for (size_t d = 0; !rc && d < nd; d++) rc = from_document(&mk, (uint32_t)d, e);
    if (!rc && x->ninst > UINT32_MAX) rc = tk_err_set(e, TK_EDATA, "%s: more than 2^32 examples", name);
    if (!rc) {
        x->order = malloc((x->ninst + 1) * sizeof *x->order);
        if (!x->order) rc = tk_err_errno(e, ENOMEM, "out of memory");
    }
    if (!rc) {
        for (size_t i = 0; i < x->ninst; i++) x->order[i] = (uint32_t)i;
        bert_rng_shuffle(&mk.r, x->order, (uint32_t)x->ninst, sizeof *x->order);
        x->norder = x->ninst;
        if (o->pick > 0 && x->ninst > 0) {
            // pick_eval_samples.py: record int(i * pick_ratio), pick_ratio = count / N.
            uint32_t *picked = malloc((size_t)o->pick * sizeof *picked);
            if (!picked) rc = tk_err_errno(e, ENOMEM, "out of memory");
            double ratio = (double)x->ninst / (double)o->pick;
            for (int64_t i = 0; !rc && i < o->pick; i++) picked[i] = x->order[(size_t)((double)i * ratio)];
            if (!rc) {
                free(x->order);
                x->order = picked;
                x->norder = (size_t)o->pick;
            }
        }
    }
    free(mk.docs);
    free(mk.cand);
    if (rc) bert_examples_free(x);
    return rc;
}

void bert_examples_free(bert_examples *x) {
    bert_corpus_free(&x->c);
    free(x->inst);
    free(x->m);
    free(x->order);
    memset(x, 0, sizeof *x);
}

void bert_examples_fill(const bert_examples *x, const bert_special *sp, size_t first, size_t n, bert_records *b) {
    size_t L = (size_t)b->L, P = (size_t)b->P;
    for (size_t r = 0; r < n; r++) {
        const bert_inst *in = &x->inst[x->order[first + r]];
        bert_records_clear(b, r);
        int16_t *ids = b->input_ids + r * L;
        uint8_t *seg = b->segment_ids + r * L;
        int la = (int)in->la, lb = (int)in->lb, len = la + lb + 3;
        ids[0] = (int16_t)sp->cls;
        for (int i = 0; i < la; i++) ids[1 + i] = (int16_t)x->c.tok[in->a + (uint64_t)i];
        ids[la + 1] = (int16_t)sp->sep;
        for (int i = 0; i < lb; i++) ids[la + 2 + i] = (int16_t)x->c.tok[in->b + (uint64_t)i];
        ids[len - 1] = (int16_t)sp->sep;
        memset(seg + la + 2, 1, (size_t)lb + 1);
        const bert_masked *m = x->m + in->moff;
        for (int k = 0; k < in->nmask; k++) {
            b->mlm_pos[r * P + (size_t)k] = (int16_t)m[k].pos;
            b->mlm_ids[r * P + (size_t)k] = ids[m[k].pos];
            ids[m[k].pos] = (int16_t)m[k].shown;
        }
        b->seq_len[r] = (int16_t)len;
        b->num_masked[r] = (int16_t)in->nmask;
        b->nsp[r] = in->random_next;
    }
    b->n = n;
}

int bert_pretrain_write(tks_writer *w, char *const *files, int nfiles, const bert_tokenizer *t,
                        const bert_vocab *v, const bert_pretrain_opts *o, int threads, bert_progress_fn progress,
                        void *pctx, uint64_t *nwritten, tk_err *e) {
    bert_special sp;
    TRY(bert_vocab_special(v, &sp, e));
    int32_t vocab = bert_vocab_size(v);
    bert_records buf;
    TRY(bert_records_init(&buf, o->max_seq_length, o->max_predictions, 1024, e));
    int rc = 0, failed = 0, outer = nfiles > 1 && threads > 1;
    uint64_t written = 0;
    // Files in parallel, written in file order: a thread that has made its file's examples waits
    // in the ordered block for the files before it, so at most `threads` files are in memory.
#pragma omp parallel for schedule(dynamic, 1) ordered num_threads(outer ? threads : 1) if (outer)
    for (int i = 0; i < nfiles; i++) {
        bert_examples x;
        memset(&x, 0, sizeof x);
        tk_err le;
        int lrc = 0, skip;
#pragma omp atomic read
        skip = failed;
        if (!skip) {
            bert_corpus c;
            lrc = bert_corpus_read(&c, t, files[i], outer ? 1 : threads, &le);
            if (!lrc) lrc = bert_examples_make(&x, &c, files[i], o, &sp, vocab, &le);
        }
#pragma omp ordered
        {
            if (!failed && lrc) {
                rc = lrc;
                *e = le;
            }
            for (size_t k = 0; !failed && !rc && k < x.norder; k += buf.cap) {
                size_t n = x.norder - k < buf.cap ? x.norder - k : buf.cap;
                bert_examples_fill(&x, &sp, k, n, &buf);
                const void *cols[BERT_NFIELDS];
                bert_records_cols(&buf, cols);
                rc = tks_writer_append(w, cols, n, e);
                written += n;
                if (progress) progress(pctx, written);
            }
            if (rc) {
#pragma omp atomic write
                failed = 1;
            }
        }
        bert_examples_free(&x);
    }
    bert_records_free(&buf);
    if (nwritten) *nwritten = written;
    return rc;
}
