// CPU reference of kernels/hybrid_plan.h (and the plan the cpu backend uses).
#include <string.h>

#include "hybrid_plan.h"

void tk_hybrid_plan_layout(int B, int T, int W, int rank, int tm, size_t off[7]) {
    int t0 = rank * tm, tn = t0 >= T ? 0 : (T - t0 < tm ? T - t0 : tm);
    size_t bT = (size_t)(B / W) * (size_t)T;
    off[0] = 0;
    off[1] = (size_t)B * (size_t)tn;
    for (int k = 2; k <= 5; k++) off[k] = off[k - 1] + bT;
    off[6] = off[5] + bT + 1;
}

int tk_hybrid_plan_check(const tk_hybrid_plan_args *a, int *tn, tk_err *e) {
    if (a->B < 0 || a->W < 1 || a->B % a->W != 0 || a->rank < 0 || a->rank >= a->W || a->T < 1 || a->tm < 1 ||
        (int64_t)a->tm * a->W < a->T || a->nf < 0 || a->nf > INT32_MAX ||
        (int64_t)a->B * a->T >= INT32_MAX || (int64_t)a->B * a->tm >= INT32_MAX) // int32 positions
        return tk_err_set(e, TK_EINTERNAL, "hybrid_plan: bad shape B %d T %d W %d rank %d tm %d nf %lld", a->B, a->T,
                          a->W, a->rank, a->tm, (long long)a->nf);
    int t0 = a->rank * a->tm;
    *tn = t0 >= a->T ? 0 : (a->T - t0 < a->tm ? a->T - t0 : a->tm);
    return 0;
}

int tk_hybrid_plan_ref(const tk_hybrid_plan_args *a, tk_err *e) {
    int tn;
    TRY(tk_hybrid_plan_check(a, &tn, e));
    const int T = a->T, W = a->W, r = a->rank, tm = a->tm, t0 = r * tm;
    const int64_t B = a->B, b = B / W, s0 = r * b;
    size_t off[7];
    tk_hybrid_plan_layout(a->B, T, W, r, tm, off);
    int32_t *send_rows = a->out + off[0], *recv_pos = a->out + off[1], *fpos = a->out + off[2];
    int32_t *frow = a->out + off[3], *seg_row = a->out + off[4], *seg_off = a->out + off[5];
    int32_t *fidx = a->ws, *fpos_u = fidx + B * T, *frow_u = fpos_u + b * T, *cnt = frow_u + b * T;
    // The replica row (or -1) of every use either side needs: the owned tables for all B samples,
    // every table for this rank's b samples.
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < B; s++) {
        int mine = s >= s0 && s < s0 + b, ta = mine ? 0 : t0, tz = mine ? T : t0 + tn;
        for (int t = ta; t < tz; t++)
            fidx[s * T + t] = tk_hset_find(a->hset, a->hoff, a->hbits, a->fbase, t, a->cat[s * T + t]);
    }
    // Owner side: the order in which each peer lists what it receives (below).
    int64_t k = 0;
    for (int j = 0; j < W; j++) {
        int64_t k0 = k;
        for (int64_t s = j * b; s < (j + 1) * b; s++)
            for (int lt = 0; lt < tn; lt++)
                if (fidx[s * T + t0 + lt] < 0) send_rows[k++] = (int32_t)(a->own_off[lt] + a->cat[s * T + t0 + lt]);
        a->counts[j] = k - k0;
    }
    // Receiver side: this rank's samples, owner-major.
    int64_t nr = 0, nq = 0;
    for (int i = 0; i < W; i++) {
        int64_t r0 = nr;
        int ti0 = i * tm, tni = T - ti0 < tm ? T - ti0 : tm;
        for (int64_t sl = 0; sl < b && tni > 0; sl++) {
            const int32_t *row = fidx + (s0 + sl) * T;
            for (int q = 0; q < tni; q++) {
                int32_t pos = (int32_t)((i * b + sl) * tm + q), f = row[ti0 + q];
                if (f < 0) {
                    recv_pos[nr++] = pos;
                } else {
                    fpos_u[nq] = pos;
                    frow_u[nq++] = f;
                }
            }
        }
        a->counts[W + i] = nr - r0;
    }
    // The frequent uses by replica row: a stable counting sort.
    memset(cnt, 0, ((size_t)a->nf + 1) * 4);
    for (int64_t q = 0; q < nq; q++) cnt[frow_u[q] + 1]++;
    int32_t nseg = 0;
    for (int64_t f = 0; f < a->nf; f++) {
        if (cnt[f + 1]) seg_row[nseg++] = (int32_t)f;
        cnt[f + 1] += cnt[f];
    }
    for (int32_t g = 0; g < nseg; g++) seg_off[g] = cnt[seg_row[g]];
    seg_off[nseg] = (int32_t)nq;
    for (int64_t q = 0; q < nq; q++) {
        int32_t at = cnt[frow_u[q]]++;
        fpos[at] = fpos_u[q];
        frow[at] = frow_u[q];
    }
    a->counts[2 * W] = k;
    a->counts[2 * W + 1] = nr;
    a->counts[2 * W + 2] = nq;
    a->counts[2 * W + 3] = nseg;
    return 0;
}

int tk_hybrid_exchange_counts_ref(const tk_hybrid_plan_args *a, int64_t *mat, tk_err *e) {
    int tn;
    TRY(tk_hybrid_plan_check(a, &tn, e));
    const int T = a->T, W = a->W, tm = a->tm;
    const int64_t b = a->B / W;
    memset(mat, 0, (size_t)W * W * sizeof *mat);
    for (int64_t s = 0; s < a->B; s++)
        for (int t = 0; t < T; t++)
            if (tk_hset_find(a->hset, a->hoff, a->hbits, a->fbase, t, a->cat[s * T + t]) < 0)
                mat[(int64_t)(t / tm) * W + s / b]++;
    return 0;
}

// The argument checks of tk_hybrid_plan_fixed (both sides).
int tk_hybrid_plan_fixed_check(const tk_hybrid_plan_args *a, int64_t cap, tk_err *e) {
    int tn;
    TRY(tk_hybrid_plan_check(a, &tn, e));
    if (cap < 0 || cap > (int64_t)(a->B / a->W) * a->tm || (int64_t)a->W * cap > INT32_MAX)
        return tk_err_set(e, TK_EINTERNAL, "hybrid_plan_fixed: capacity %lld outside [0, b*tm = %lld]", (long long)cap,
                          (long long)(a->B / a->W) * a->tm);
    return 0;
}

int tk_hybrid_plan_fixed_ref(const tk_hybrid_plan_args *a, int64_t cap, int32_t pad_row, int32_t *send_pad,
                             int32_t *recv_src, tk_err *e) {
    TRY(tk_hybrid_plan_fixed_check(a, cap, e));
    const int W = a->W;
    size_t off[7];
    tk_hybrid_plan_layout(a->B, a->T, W, a->rank, a->tm, off);
    const int32_t *send_rows = a->out + off[0];
    int64_t from = 0, k = 0;
    for (int j = 0; j < W; j++) {
        for (int64_t q = 0; q < cap; q++) send_pad[j * cap + q] = q < a->counts[j] ? send_rows[from + q] : pad_row;
        from += a->counts[j];
    }
    for (int i = 0; i < W; i++)
        for (int64_t q = 0; q < a->counts[W + i]; q++) recv_src[k++] = q < cap ? (int32_t)(i * cap + q) : -1;
    return 0;
}
