// CPU reference of kernels/embedding.h: the specification of the lookup and of the fused
// backward + SGD update (duplicate rows within a batch are summed first, in sample order, in fp64).
#include <stdlib.h>

#include "embedding.h"
#include "sgd.h"

static inline float emb_load(const void *w, tk_dtype t, size_t i) {
    return t == TK_BF16 ? tk_bf16_to_f32(((const uint16_t *)w)[i]) : ((const float *)w)[i];
}

// w[i] -= rate * sum: fp64 product and difference, rounded to the table type once (through
// float for bf16). The one update of both the sparse and the dense variant.
static inline void sgd_store(void *w, tk_dtype t, size_t i, double rate, double sum) {
    double v = (double)emb_load(w, t, i) - rate * sum;
    if (t == TK_BF16) ((uint16_t *)w)[i] = tk_f32_to_bf16((float)v);
    else ((float *)w)[i] = (float)v;
}

static int check_type(tk_dtype t, const char *op, tk_err *e) {
    if (t == TK_F32 || t == TK_BF16) return 0;
    return tk_err_set(e, TK_EINTERNAL, "%s: table dtype %s not supported (F32 or BF16)", op,
                      tk_dtype_name(t));
}

int tk_embedding_fwd_ref(const void *w, tk_dtype wtype, const int64_t *row_off,
                         const int32_t *idx, int B, int T, int D, float *out, tk_err *e) {
    return tk_embedding_fwd_act_ref(w, wtype, row_off, idx, B, T, D, out, TK_F32, e);
}

int tk_embedding_fwd_act_ref(const void *w, tk_dtype wtype, const int64_t *row_off,
                             const int32_t *idx, int B, int T, int D, void *out, tk_dtype otype,
                             tk_err *e) {
    TRY(check_type(wtype, "embedding_fwd", e));
    TRY(check_type(otype, "embedding_fwd (output)", e));
    int bad = -1;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            int64_t rows = row_off[t + 1] - row_off[t];
            int32_t r = idx[(size_t)b * T + t];
            size_t o = ((size_t)b * T + t) * D;
            int ok = r >= 0 && r < rows;
            if (r >= rows) { // (a negative index is padding: a zero row, embedding.h)
#pragma omp critical
                bad = b * T + t;
            }
            size_t base = ok ? (size_t)(row_off[t] + r) * D : 0;
            for (int d = 0; d < D; d++) {
                float v = ok ? emb_load(w, wtype, base + d) : 0.0f;
                if (otype == TK_BF16) ((uint16_t *)out)[o + d] = tk_f32_to_bf16(v);
                else ((float *)out)[o + d] = v;
            }
        }
    }
    if (bad >= 0)
        return tk_err_set(e, TK_EDATA, "embedding_fwd: sample %d: index %d out of range for table %d",
                          bad / T, idx[bad], bad % T);
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int tk_embedding_bwd_sgd_ref(void *w, tk_dtype wtype, const int64_t *row_off, const int32_t *idx,
                             int B, int T, int D, const float *dout, const float *lr, void *ws,
                             tk_err *e) {
    return tk_embedding_bwd_sgd_act_ref(w, wtype, row_off, idx, B, T, D, dout, TK_F32, lr, ws, e);
}

int tk_embedding_bwd_sgd_act_ref(void *w, tk_dtype wtype, const int64_t *row_off,
                                 const int32_t *idx, int B, int T, int D, const void *dout,
                                 tk_dtype gtype, const float *lr, void *ws, tk_err *e) {
    TRY(check_type(wtype, "embedding_bwd_sgd", e));
    TRY(check_type(gtype, "embedding_bwd_sgd (gradient)", e));
    uint64_t *keys = ws; // per table: B keys (row << 32 | sample), sorted: groups of equal rows
    double rate = *lr;
    int bad = -1;
#pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < T; t++) {
        uint64_t *k = keys + (size_t)t * B;
        int64_t rows = row_off[t + 1] - row_off[t];
        int n = 0;
        for (int b = 0; b < B; b++) {
            int32_t r = idx[(size_t)b * T + t];
            if (r < 0) continue; // padding: no gradient (embedding.h)
            if (r >= rows) {
#pragma omp critical
                bad = b * T + t;
                continue;
            }
            k[n++] = (uint64_t)r << 32 | (uint32_t)b;
        }
        qsort(k, (size_t)n, sizeof *k, cmp_u64);
        double acc[D];
        for (int i = 0; i < n;) {
            uint32_t r = (uint32_t)(k[i] >> 32);
            for (int d = 0; d < D; d++) acc[d] = 0;
            for (; i < n && (uint32_t)(k[i] >> 32) == r; i++) {
                size_t g = ((size_t)(uint32_t)k[i] * T + t) * D;
                for (int d = 0; d < D; d++) acc[d] += emb_load(dout, gtype, g + d);
            }
            size_t base = (size_t)(row_off[t] + r) * D;
            for (int d = 0; d < D; d++) sgd_store(w, wtype, base + d, rate, acc[d]);
        }
    }
    if (bad >= 0)
        return tk_err_set(e, TK_EDATA,
                          "embedding_bwd_sgd: sample %d: index %d out of range for table %d",
                          bad / T, idx[bad], bad % T);
    return 0;
}

int tk_embedding_dense_sgd_ref(void *w, tk_dtype wtype, int64_t n, const float *g, const float *lr, tk_err *e) {
    TRY(check_type(wtype, "embedding_dense_sgd", e));
    double rate = *lr;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) sgd_store(w, wtype, (size_t)i, rate, (double)g[i]);
    return 0;
}
