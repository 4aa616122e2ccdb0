// BERT example records: column buffers, the .tks schema and its meta, and the checks a record
// read from outside (HDF5) must pass.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert/record.h"

int bert_records_init(bert_records *b, int L, int P, size_t cap, tk_err *e) {
    memset(b, 0, sizeof *b);
    b->L = L;
    b->P = P;
    b->cap = cap;
    b->input_ids = malloc(cap * (size_t)L * sizeof *b->input_ids);
    b->segment_ids = malloc(cap * (size_t)L);
    b->seq_len = malloc(cap * sizeof *b->seq_len);
    b->mlm_pos = malloc(cap * (size_t)P * sizeof *b->mlm_pos);
    b->mlm_ids = malloc(cap * (size_t)P * sizeof *b->mlm_ids);
    b->num_masked = malloc(cap * sizeof *b->num_masked);
    b->nsp = malloc(cap);
    if (!b->input_ids || !b->segment_ids || !b->seq_len || !b->mlm_pos || !b->mlm_ids || !b->num_masked ||
        !b->nsp) {
        bert_records_free(b);
        return tk_err_errno(e, ENOMEM, "out of memory");
    }
    return 0;
}

void bert_records_free(bert_records *b) {
    free(b->input_ids);
    free(b->segment_ids);
    free(b->seq_len);
    free(b->mlm_pos);
    free(b->mlm_ids);
    free(b->num_masked);
    free(b->nsp);
    memset(b, 0, sizeof *b);
}

void bert_records_clear(bert_records *b, size_t i) {
    size_t L = (size_t)b->L, P = (size_t)b->P;
    memset(b->input_ids + i * L, 0, L * sizeof *b->input_ids);
    memset(b->segment_ids + i * L, 0, L);
    memset(b->mlm_pos + i * P, 0, P * sizeof *b->mlm_pos);
    memset(b->mlm_ids + i * P, 0, P * sizeof *b->mlm_ids);
    b->seq_len[i] = 0;
    b->num_masked[i] = 0;
    b->nsp[i] = 0;
}

void bert_records_cols(const bert_records *b, const void *cols[BERT_NFIELDS]) {
    cols[0] = b->input_ids;
    cols[1] = b->segment_ids;
    cols[2] = b->seq_len;
    cols[3] = b->mlm_pos;
    cols[4] = b->mlm_ids;
    cols[5] = b->num_masked;
    cols[6] = b->nsp;
}

static void field(tks_schema *s, const char *name, tks_dtype t, int64_t dim) {
    tks_field *f = &s->f[s->nfields++];
    snprintf(f->name, sizeof f->name, "%s", name);
    f->dtype = t;
    f->ndim = dim ? 1 : 0;
    f->shape[0] = dim;
}

void bert_schema(tks_schema *s, const bert_meta *m) {
    memset(s, 0, sizeof *s);
    field(s, "input_ids", TKS_I16, m->L);
    field(s, "segment_ids", TKS_U8, m->L);
    field(s, "seq_len", TKS_I16, 0);
    field(s, "masked_lm_positions", TKS_I16, m->P);
    field(s, "masked_lm_ids", TKS_I16, m->P);
    field(s, "num_masked", TKS_I16, 0);
    field(s, "next_sentence_labels", TKS_U8, 0);
    char *j = s->meta_json;
    size_t cap = sizeof s->meta_json, k = 0;
#define PUT(...) k += (size_t)snprintf(j + k, k < cap ? cap - k : 0, __VA_ARGS__)
    PUT("{\"source\":\"bert\",\"input\":\"%s\",\"vocab_size\":%d,\"max_seq_length\":%d,"
        "\"max_predictions_per_seq\":%d", m->input, m->vocab_size, m->L, m->P);
    if (m->have_special)
        PUT(",\"special_ids\":{\"pad\":%d,\"unk\":%d,\"cls\":%d,\"sep\":%d,\"mask\":%d}", m->special.pad,
            m->special.unk, m->special.cls, m->special.sep, m->special.mask);
    if (m->rng)
        PUT(",\"do_lower_case\":%s,\"max_word_chars\":%d,\"masked_lm_prob\":%.17g,\"short_seq_prob\":%.17g,"
            "\"dupe_factor\":%d,\"seed\":%llu,\"rng\":\"%s\",\"pick\":%lld",
            m->cased ? "false" : "true", m->max_word_chars, m->masked_lm_prob, m->short_seq_prob, m->dupe_factor,
            (unsigned long long)m->seed, m->rng, (long long)m->pick);
    PUT("}");
#undef PUT
}

int bert_records_check(const bert_records *b, size_t i, int32_t vocab, tk_err *e) {
    size_t L = (size_t)b->L, P = (size_t)b->P;
    int n = b->seq_len[i], m = b->num_masked[i];
    const int16_t *ids = b->input_ids + i * L, *pos = b->mlm_pos + i * P, *mid = b->mlm_ids + i * P;
    const uint8_t *seg = b->segment_ids + i * L;
    for (int t = 0; t < n; t++) {
        if (ids[t] < 0 || ids[t] >= vocab)
            return tk_err_set(e, TK_EDATA, "input_ids[%d] = %d is not a token id (vocabulary of %d)", t, ids[t], vocab);
        if (seg[t] > 1) return tk_err_set(e, TK_EDATA, "segment_ids[%d] = %d (expected 0 or 1)", t, seg[t]);
    }
    for (int k = 0; k < m; k++) {
        if (pos[k] < 0 || pos[k] >= n)
            return tk_err_set(e, TK_EDATA, "masked_lm_positions[%d] = %d is outside the sequence of %d tokens", k,
                              pos[k], n);
        if (mid[k] < 0 || mid[k] >= vocab)
            return tk_err_set(e, TK_EDATA, "masked_lm_ids[%d] = %d is not a token id (vocabulary of %d)", k, mid[k],
                              vocab);
    }
    if (b->nsp[i] > 1) return tk_err_set(e, TK_EDATA, "next_sentence_labels = %d (expected 0 or 1)", b->nsp[i]);
    return 0;
}
