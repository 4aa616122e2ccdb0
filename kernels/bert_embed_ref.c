// CPU reference of kernels/bert_embed.h: fp32, fp64 sums in token order.
#include <stdlib.h>
#include <string.h>

#include "bert_embed.h"

static int check(tk_dtype wt, tk_dtype act, const char *op, tk_err *e) {
    if (act != TK_F32 || wt != TK_F32)
        return tk_err_set(e, TK_EINTERNAL, "%s (cpu): %s tables and %s activations, want F32", op, tk_dtype_name(wt),
                          tk_dtype_name(act));
    return 0;
}

int tk_bert_embed_fwd_ref(tk_dtype wt, tk_dtype act, int B, int L, int H, const int32_t *ids, const uint8_t *seg,
                          const void *word, const void *pos, const void *type, void *e_out, tk_err *e) {
    TRY(check(wt, act, "bert_embed_fwd", e));
    const float *w = word, *p = pos, *ty = type;
    float *o = e_out;
    const int64_t n = (int64_t)B * L;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < n; t++) {
        const float *a = w + (size_t)ids[t] * H, *b = p + (size_t)(t % L) * H, *c = ty + (size_t)seg[t] * H;
        for (int h = 0; h < H; h++) o[(size_t)t * H + h] = a[h] + b[h] + c[h];
    }
    return 0;
}

int tk_bert_embed_bwd_ref(tk_dtype act, int B, int L, int H, int T, int npos, const int32_t *ids, const uint8_t *seg,
                          const int32_t *len, const void *de, float *dword, float *dpos, float *dtype, void *ws,
                          tk_err *e) {
    (void)ws;
    TRY(check(TK_F32, act, "bert_embed_bwd", e));
    if (T < 1 || T > TK_BERT_MAX_TYPES || npos < L)
        return tk_err_set(e, TK_EINTERNAL, "bert_embed_bwd: %d types, %d positions for L %d", T, npos, L);
    const float *g = de;
    const int64_t n = (int64_t)B * L;
    // dword: each column of each id's run in token order (parallel over columns, the sums per
    // id kept in the row of dword itself would change its order: accumulate in a double row).
    double *acc = calloc((size_t)H, sizeof(double));
    if (!acc) return tk_err_set(e, TK_EIO, "bert_embed_bwd: out of host memory");
    // The tokens of each id, in order: a counting sort.
    int32_t maxid = 0;
    for (int64_t t = 0; t < n; t++) maxid = ids[t] > maxid ? ids[t] : maxid;
    int64_t *start = calloc((size_t)maxid + 3, sizeof *start), *order = malloc(sizeof *order * (size_t)(n + 1));
    if (!start || !order) {
        free(acc), free(start), free(order);
        return tk_err_set(e, TK_EIO, "bert_embed_bwd: out of host memory");
    }
    // (the padding tokens, with len, in no run: their id counted as maxid + 1)
#define KEY(t) (len && (t) % L >= len[(t) / L] ? maxid + 1 : ids[t])
    for (int64_t t = 0; t < n; t++) start[KEY(t) + 1]++;
    for (int32_t v = 0; v <= maxid; v++) start[v + 1] += start[v];
    int64_t nreal = 0;
    for (int64_t t = 0; t < n; t++)
        if (KEY(t) <= maxid) order[start[KEY(t)]++] = t, nreal++;
#undef KEY
    for (int32_t v = maxid; v > 0; v--) start[v] = start[v - 1]; // back to the run starts
    start[0] = 0;
    for (int32_t v = 0; v <= maxid; v++) {
        int64_t a = start[v], b = v < maxid ? start[v + 1] : nreal;
        if (a == b) continue;
        memset(acc, 0, sizeof(double) * (size_t)H);
        for (int64_t k = a; k < b; k++)
            for (int h = 0; h < H; h++) acc[h] += g[(size_t)order[k] * H + h];
        float *row = dword + (size_t)v * H;
        for (int h = 0; h < H; h++) row[h] = (float)((double)row[h] + acc[h]);
    }
    free(acc), free(start), free(order);
#pragma omp parallel for schedule(static)
    for (int l = 0; l < npos; l++)
        for (int h = 0; h < H; h++) {
            double s = 0;
            for (int b = 0; b < B && l < L; b++) s += g[((size_t)b * L + l) * H + h];
            dpos[(size_t)l * H + h] = (float)s;
        }
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        double s[TK_BERT_MAX_TYPES] = {0};
        for (int64_t t = 0; t < n; t++) s[seg[t]] += g[(size_t)t * H + h];
        for (int k = 0; k < T; k++) dtype[(size_t)k * H + h] = (float)s[k];
    }
    return 0;
}
