// BERT's records in .tks files (prep bert; man/man5/trainkit-bert.5): the reader and the eval set.
// A record's fields, by name: input_ids i16[Lf], segment_ids u8[Lf], seq_len i16,
// masked_lm_positions i16[Pf], masked_lm_ids i16[Pf], num_masked i16, next_sentence_labels u8,
// padded with 0. A file's Lf and Pf may exceed the model's L and P (a shard made for 512 tokens
// feeds a 128-token model) as long as no record is longer: every record is checked, and a bad one
// is TK_EDATA naming the file and the record.
#include <stdlib.h>
#include <string.h>

#include "engine/data.h"
#include "engine/evalset.h"
#include "workloads/bert/bert.h"

enum { F_IDS, F_SEG, F_LEN, F_POS, F_MID, F_NMASK, F_NSP, NF };

struct tk_bert_data {
    tk_records *r;
    int L, P, vocab, types;
    int B;           // the global batch (read_batch)
    int *order;      // model.unpad (B > 1): B positions, then B scratch; read_batch puts the batch
                     // in tk_bert_balance_order's order
    void *tmp;       // one field of the global batch (reordering)
};

// Every rank reads the whole global batch and trains its rows.
int tk_bert_data_open(const void *config, int rank, int world, char *const *paths, int npaths, void **out, tk_err *e) {
    (void)rank, (void)world;
    const tk_bert_config *c = config;
    *out = NULL;
    tk_bert_data *d = calloc(1, sizeof *d);
    if (!d) return tk_err_set(e, TK_EIO, "out of host memory");
    d->L = c->L, d->P = c->P, d->vocab = c->vocab, d->types = c->types, d->B = c->batch;
    const int wide = d->L > d->P ? d->L : d->P;
    if (c->unpad && d->B > 1 &&
        (!(d->order = malloc((size_t)d->B * 2 * sizeof *d->order)) || !(d->tmp = malloc((size_t)d->B * wide * 4)))) {
        free(d->order), free(d);
        return tk_err_set(e, TK_EIO, "out of host memory");
    }
    // (the token fields as long as each file makes them, Lf and Pf: the records are checked)
    const tk_record_field f[NF] = {{"input_ids", TKS_I16, TK_RECORDS_ANY},
                                   {"segment_ids", TKS_U8, TK_RECORDS_AS(F_IDS)},
                                   {"seq_len", TKS_I16, 0},
                                   {"masked_lm_positions", TKS_I16, TK_RECORDS_ANY},
                                   {"masked_lm_ids", TKS_I16, TK_RECORDS_AS(F_POS)},
                                   {"num_masked", TKS_I16, 0},
                                   {"next_sentence_labels", TKS_U8, 0}};
    int rc = tk_records_open(&d->r, paths, npaths, f, NF, "a BERT record from prep bert", e);
    if (rc) free(d);
    else *out = d;
    return rc;
}

void tk_bert_data_close(void *rd) {
    tk_bert_data *d = rd;
    if (d) tk_records_close(d->r), free(d->order), free(d->tmp);
    free(d);
}

uint64_t tk_bert_data_count(void *rd) { return tk_records_count(((tk_bert_data *)rd)->r); }

// Records that tk_records_next returned: the fields' columns, the file's lengths, where they are.
typedef struct {
    const void *col[NF];
    int Lf, Pf;
    const char *file;
    uint64_t rec0;   // the first one's index in the file
} chunk;

static int bad(const chunk *ch, size_t j, tk_err *e, const char *fmt, int a, int b) {
    tk_err_set(e, TK_EDATA, fmt, a, b);
    tk_err_where(e, "%s: record %llu", ch->file, (unsigned long long)(ch->rec0 + j));
    return TK_EDATA;
}

// Record j of the chunk into slot o of the output arrays, checked.
static int take(const tk_bert_data *d, const chunk *ch, size_t j, size_t o, int32_t *ids, uint8_t *seg, int32_t *len,
                int32_t *pos, int32_t *mid, int32_t *nmask, int32_t *nsp, tk_err *e) {
    const int L = d->L, P = d->P, Lf = ch->Lf, Pf = ch->Pf;
    const int16_t *fi = (const int16_t *)ch->col[F_IDS] + j * Lf;
    const uint8_t *fs = (const uint8_t *)ch->col[F_SEG] + j * Lf;
    const int16_t *fp = (const int16_t *)ch->col[F_POS] + j * Pf;
    const int16_t *fm = (const int16_t *)ch->col[F_MID] + j * Pf;
    int n = ((const int16_t *)ch->col[F_LEN])[j], k = ((const int16_t *)ch->col[F_NMASK])[j];
    int y = ((const uint8_t *)ch->col[F_NSP])[j];
    if (n < 1 || n > Lf) return bad(ch, j, e, "seq_len %d is outside [1, %d]", n, Lf);
    if (n > L) return bad(ch, j, e, "a sequence of %d tokens is longer than model.max_seq_length %d", n, L);
    if (k < 0 || k > Pf) return bad(ch, j, e, "num_masked %d is outside [0, %d]", k, Pf);
    if (k > P) return bad(ch, j, e, "%d masked positions, more than model.max_predictions_per_seq %d", k, P);
    if (y > 1) return bad(ch, j, e, "next_sentence_labels %d is not 0 or 1%.0d", y, 0);
    for (int t = 0; t < n; t++) {
        if (fi[t] < 0 || fi[t] >= d->vocab)
            return bad(ch, j, e, "input_ids[%d] = %d is not a token id of the model's vocabulary", t, fi[t]);
        if (fs[t] >= d->types) return bad(ch, j, e, "segment_ids[%d] = %d is not a token type", t, fs[t]);
    }
    for (int q = 0; q < k; q++) {
        if (fp[q] < 0 || fp[q] >= n)
            return bad(ch, j, e, "masked_lm_positions[%d] = %d is outside the sequence", q, fp[q]);
        if (fm[q] < 0 || fm[q] >= d->vocab)
            return bad(ch, j, e, "masked_lm_ids[%d] = %d is not a token id of the model's vocabulary", q, fm[q]);
    }
    for (int t = 0; t < L; t++) {
        ids[o * L + t] = t < n ? fi[t] : 0;
        seg[o * L + t] = t < n ? fs[t] : 0;
    }
    for (int q = 0; q < P; q++) {
        pos[o * P + q] = q < k ? fp[q] : 0;
        mid[o * P + q] = q < k ? fm[q] : 0;
    }
    len[o] = n, nmask[o] = k;
    if (nsp) nsp[o] = y;
    return 0;
}

int tk_bert_data_read(tk_bert_data *d, uint64_t first, int n, int32_t *ids, uint8_t *seg, int32_t *len, int32_t *pos,
                      int32_t *mid, int32_t *nmask, int32_t *nsp, tk_err *e) {
    if (first + (uint64_t)n > tk_records_count(d->r))
        return tk_err_set(e, TK_EINTERNAL, "bert: read past the end of the data");
    TRY(tk_records_seek(d->r, first, e));
    for (int r = 0; r < n;) {
        chunk ch;
        size_t got;
        TRY(tk_records_next(d->r, (size_t)(n - r), ch.col, &got, &ch.file, &ch.rec0, e));
        if (got == 0) return tk_err_set(e, TK_EINTERNAL, "bert: the data ended early");
        ch.Lf = (int)tk_records_len(d->r, F_IDS), ch.Pf = (int)tk_records_len(d->r, F_POS);
        for (size_t j = 0; j < got; j++, r++) TRY(take(d, &ch, j, (size_t)r, ids, seg, len, pos, mid, nmask, nsp, e));
    }
    return 0;
}

// ---- the batch's order across ranks ----
//
// With model.unpad a rank's step costs about its sequences' real tokens, and at the gradients'
// all-reduce every rank waits for the slowest: with MLPerf's Wikipedia lengths two ranks' slices
// of a batch of 64 in the data's order differ by ~1,000 of ~8,000 tokens (measured on 2 H200:
// 1.75x one GPU's rate at lengths drawn from that distribution, 1.89x when every sequence is 512
// long). So the global batch is put in an order whose contiguous rank slices carry nearly equal
// token counts, for every world size 2^k that divides the batch, and the SAME order for every
// world size (1 rank and N ranks then train the same sequence at the same position, dropout masks
// included): sorted by length (longest first, ties by position in the data), the list is dealt
// into two halves in the pattern A B B A A B B A ..., each half ordered the same way in turn, the
// first half before the second. The halves' token counts differ by the alternating sum of the
// sorted list's pair gaps, at most the longest length minus the shortest (typically a few tokens).
// Only the positions change: the batch is the same set of sequences.

// idx[0, n): positions sorted by their length, longest first; into the halves' order (tmp: n ints).
static void deal(int *idx, int n, int *tmp) {
    if (n < 2) return;
    const int na = (n + 1) / 2;
    int a = 0, b = na;
    for (int k = 0; k < n; k++) { // pair k / 2: A first on even pairs, B first on odd ones
        const int to_a = ((k & 1) ^ ((k >> 1) & 1)) == 0;
        if ((to_a && a < na) || b == n) tmp[a++] = idx[k];
        else tmp[b++] = idx[k];
    }
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
    deal(idx, na, tmp);
    deal(idx + na, n - na, tmp);
}


typedef struct {
    int32_t len;
    int pos;
} len_pos;

static int by_len_desc(const void *x, const void *y) {
    const len_pos *a = x, *b = y;
    return a->len != b->len ? (a->len < b->len ? 1 : -1) : (a->pos > b->pos) - (a->pos < b->pos);
}

int tk_bert_balance_order(const int32_t *len, int n, int *order, int *tmp, tk_err *e) {
    len_pos *lp = malloc((size_t)n * sizeof *lp);
    if (!lp) return tk_err_set(e, TK_EIO, "out of host memory");
    for (int i = 0; i < n; i++) lp[i] = (len_pos){len[i], i};
    qsort(lp, (size_t)n, sizeof *lp, by_len_desc);
    for (int i = 0; i < n; i++) order[i] = lp[i].pos;
    free(lp);
    deal(order, n, tmp);
    return 0;
}

// Field f (n records of `bytes` each) into the order: record i <- record order[i].
static void permute(void *f, size_t bytes, const int *order, int n, void *tmp) {
    char *src = f, *dst = tmp;
    for (int i = 0; i < n; i++) memcpy(dst + (size_t)i * bytes, src + (size_t)order[i] * bytes, bytes);
    memcpy(f, tmp, (size_t)n * bytes);
}

// Batch `step` is the global batch of records [s B, s B + B) of the data, s = step within the
// epoch (prep bert shuffles the examples it writes, as the reference's create_pretraining_data),
// in the data's order or, with model.unpad, in the balanced order above; every rank reads all of
// it and trains on its own rows.
int tk_bert_read_batch(void *rd, int64_t step, int64_t steps_per_epoch, void *const *f, tk_err *e) {
    tk_bert_data *d = rd;
    uint64_t first = (uint64_t)(step % steps_per_epoch) * (uint64_t)d->B;
    TRY(tk_bert_data_read(d, first, d->B, f[0], f[1], f[2], f[3], f[4], f[5], f[6], e));
    if (!d->order) return 0;
    TRY(tk_bert_balance_order(f[2], d->B, d->order, d->order + d->B, e));
    const size_t L = (size_t)d->L, P = (size_t)d->P, bytes[7] = {L * 4, L, 4, P * 4, P * 4, 4, 4};
    for (int k = 0; k < 7; k++) permute(f[k], bytes[k], d->order, d->B, d->tmp);
    return 0;
}

// ---- the eval set ----

// The records into the eval set's fields (types.h), the padding sequences of length 1.
static int fill(void *arg, void *rd, int n, int64_t cached, void *const *host, tk_err *e) {
    (void)arg;
    int32_t *len = host[2];
    for (int64_t i = n; i < cached; i++) len[i] = 1;
    return tk_bert_data_read(rd, 0, n, host[0], host[1], len, host[3], host[4], host[5], NULL, e);
}

int tk_bert_evalset_load(void *model, char *const *paths, int npaths, void **out, tk_err *e) {
    tk_bert *m = model;
    const size_t L = (size_t)m->cfg.L, P = (size_t)m->cfg.P;
    const tk_evalset_spec s = {.open = tk_bert_data_open, .count = tk_bert_data_count, .close = tk_bert_data_close,
                               .cfg = &m->cfg, .nf = 6, .bytes = {L * 4, L, 4, P * 4, P * 4, 4},
                               .max = INT32_MAX / 1024, .batch = m->b, .fill = fill};
    return tk_evalset_load(m->c, &s, paths, npaths, (tk_evalset **)out, e);
}
