// CPU reference of kernels/rnnt.h: the joint's ReLU + dropout and its sums in fp64, the loss's
// log-softmax, alpha, beta and gradient in fp64, one utterance at a time, straight from the
// recursions of the header (Graves 2012, "Sequence Transduction with Recurrent Neural Networks",
// as warp-transducer computes them).
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "act_io.h"
#include "rnnt.h"

int64_t tk_rnnt_layout(int B, int Tmax, int Umax, const int *T, const int *U, int packed, int64_t *row0, tk_err *e) {
    if (B < 1 || Tmax < 1 || Umax < 0)
        return tk_err_set(e, TK_EINTERNAL, "rnnt: bad extents B %d Tmax %d Umax %d", B, Tmax, Umax), -1;
    row0[0] = 0;
    for (int b = 0; b < B; b++) {
        if (T[b] < 1 || T[b] > Tmax || U[b] < 0 || U[b] > Umax)
            return tk_err_set(e, TK_EINTERNAL, "rnnt: utterance %d: %d frames, %d labels (1..%d, 0..%d)", b, T[b],
                              U[b], Tmax, Umax),
                   -1;
        row0[b + 1] = row0[b] + (packed ? (int64_t)T[b] * (U[b] + 1) : (int64_t)Tmax * (Umax + 1));
    }
    return row0[B];
}

// The row stride of utterance b's frames.
static int64_t ld_of(const tk_rnnt_lay *L, int b) { return L->packed ? L->U[b] + 1 : L->Umax + 1; }

// The lengths and row0 agree with the layout (what tk_rnnt_layout would have filled).
static int check_rows(const tk_rnnt_lay *L, tk_err *e) {
    for (int b = 0; b < L->B; b++) {
        if (L->T[b] < 1 || L->T[b] > L->Tmax || L->U[b] < 0 || L->U[b] > L->Umax)
            return tk_err_set(e, TK_EINTERNAL, "rnnt: utterance %d: %d frames, %d labels (1..%d, 0..%d)", b, L->T[b],
                              L->U[b], L->Tmax, L->Umax);
        const int64_t n = L->packed ? (int64_t)L->T[b] * (L->U[b] + 1) : (int64_t)L->Tmax * (L->Umax + 1);
        if (L->row0[b] < 0 || L->row0[b + 1] - L->row0[b] != n)
            return tk_err_set(e, TK_EINTERNAL, "rnnt: utterance %d: row0 does not match its lengths", b);
    }
    if (L->row0[0] != 0 || (L->packed ? L->row0[L->B] > L->rows : L->row0[L->B] != L->rows))
        return tk_err_set(e, TK_EINTERNAL, "rnnt: row0 does not end at the %lld rows", (long long)L->rows);
    return 0;
}

// relu(f + g) of element j of cell (b, t, u), the sum in fp32 as the kernels add it.
static float joint_sum(tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g, int b, int ti, int u,
                       int j) {
    return tk_act_ld(f, t, ((size_t)b * L->Tmax + ti) * H + j) +
           tk_act_ld(g, t, ((size_t)b * (L->Umax + 1) + u) * H + j);
}

int tk_rnnt_joint_fwd_ref(tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                          const tk_dropout *drop, void *h, tk_err *e) {
    TRY(tk_rnnt_check(t, L, H, e));
    TRY(check_rows(L, e));
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    // padding rows (the padded layout's; the packed one's past row0[B]) are zeros
    for (size_t i = L->packed ? (size_t)L->row0[L->B] * H : 0; i < (size_t)L->rows * H; i++) tk_act_st(h, t, i, 0);
    for (int b = 0; b < L->B; b++)
        for (int ti = 0; ti < L->T[b]; ti++)
            for (int u = 0; u <= L->U[b]; u++) {
                const size_t row = (size_t)(L->row0[b] + ti * ld_of(L, b) + u);
                for (int j = 0; j < H; j++) {
                    const float s = joint_sum(t, L, H, f, g, b, ti, u, j);
                    const size_t i = row * H + j;
                    tk_act_st(h, t, i, s > 0 ? s * tk_dropout_factor(drop, th, step, (int64_t)i) : 0.0f);
                }
            }
    return 0;
}

int tk_rnnt_joint_bwd_ref(tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                          const tk_dropout *drop, const void *dh, void *df, void *dg, tk_err *e) {
    TRY(tk_rnnt_check(t, L, H, e));
    TRY(check_rows(L, e));
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    const size_t nf = (size_t)L->B * L->Tmax * H, ng = (size_t)L->B * (L->Umax + 1) * H;
    double *sf = calloc(nf, sizeof(double)), *sg = calloc(ng, sizeof(double));
    if (!sf || !sg) {
        free(sf), free(sg);
        return tk_err_errno(e, ENOMEM, "rnnt: out of memory");
    }
    for (int b = 0; b < L->B; b++)
        for (int ti = 0; ti < L->T[b]; ti++)
            for (int u = 0; u <= L->U[b]; u++) {
                const size_t row = (size_t)(L->row0[b] + ti * ld_of(L, b) + u);
                for (int j = 0; j < H; j++) {
                    const size_t i = row * H + j;
                    if (!(joint_sum(t, L, H, f, g, b, ti, u, j) > 0)) continue;
                    const double d = (double)tk_act_ld(dh, t, i) * tk_dropout_factor(drop, th, step, (int64_t)i);
                    sf[((size_t)b * L->Tmax + ti) * H + j] += d;
                    sg[((size_t)b * (L->Umax + 1) + u) * H + j] += d;
                }
            }
    for (size_t i = 0; i < nf; i++) tk_act_st(df, t, i, (float)sf[i]);
    for (size_t i = 0; i < ng; i++) tk_act_st(dg, t, i, (float)sg[i]);
    free(sf), free(sg);
    return 0;
}

// log(exp(a) + exp(b)) without overflow; -inf when both are.
static double logadd(double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

// One utterance: fills lpb, lpy (log-probabilities of blank and of the next label per cell),
// alpha and beta (T (U + 1) each, cell (t, u) at t (U + 1) + u); returns log P(y|x).
static double lattice(tk_dtype t, const tk_rnnt_lay *L, int V, int blank, const int *y, const void *z, int b,
                      double *lse, double *lpb, double *lpy, double *alpha, double *beta) {
    const int T = L->T[b], U = L->U[b], W = U + 1;
    for (int ti = 0; ti < T; ti++)
        for (int u = 0; u <= U; u++) {
            const size_t row = (size_t)(L->row0[b] + ti * ld_of(L, b) + u), c = (size_t)ti * W + u;
            double mx = -INFINITY, s = 0;
            for (int v = 0; v < V; v++) mx = fmax(mx, tk_act_ld(z, t, row * V + v));
            for (int v = 0; v < V; v++) s += exp(tk_act_ld(z, t, row * V + v) - mx);
            lse[c] = mx + log(s);
            lpb[c] = tk_act_ld(z, t, row * V + blank) - lse[c];
            lpy[c] = u < U ? tk_act_ld(z, t, row * V + y[u]) - lse[c] : -INFINITY;
        }
    for (int ti = 0; ti < T; ti++)
        for (int u = 0; u <= U; u++) {
            const size_t c = (size_t)ti * W + u;
            double a = ti == 0 && u == 0 ? 0 : -INFINITY;
            if (ti > 0) a = logadd(a, alpha[c - W] + lpb[c - W]);
            if (u > 0) a = logadd(a, alpha[c - 1] + lpy[c - 1]);
            alpha[c] = a;
        }
    for (int ti = T - 1; ti >= 0; ti--)
        for (int u = U; u >= 0; u--) {
            const size_t c = (size_t)ti * W + u;
            double bt = ti == T - 1 && u == U ? lpb[c] : -INFINITY;
            if (ti < T - 1) bt = logadd(bt, beta[c + W] + lpb[c]);
            if (u < U) bt = logadd(bt, beta[c + 1] + lpy[c]);
            beta[c] = bt;
        }
    return beta[0];
}

int tk_rnnt_loss_ref(tk_dtype t, const tk_rnnt_lay *L, int V, int blank, const int *labels, const void *z,
                     float scale, double *acc, float *loss, float *costs, void *dz, tk_err *e) {
    TRY(tk_rnnt_check(t, L, V, e));
    TRY(check_rows(L, e));
    if (blank < 0 || blank >= V) return tk_err_set(e, TK_EINTERNAL, "rnnt: blank %d outside 0..%d", blank, V - 1);
    for (int b = 0; b < L->B; b++)
        for (int u = 0; u < L->U[b]; u++) {
            const int y = labels[(size_t)b * L->Umax + u];
            if (y < 0 || y >= V || y == blank)
                return tk_err_set(e, TK_EINTERNAL, "rnnt: utterance %d: label %d at %d (0..%d, not the blank %d)", b,
                                  y, u, V - 1, blank);
        }
    int64_t cells = 1;
    for (int b = 0; b < L->B; b++) {
        const int64_t n = (int64_t)L->T[b] * (L->U[b] + 1);
        cells = n > cells ? n : cells;
    }
    double *buf = malloc((size_t)cells * 5 * sizeof(double));
    if (!buf) return tk_err_errno(e, ENOMEM, "rnnt: out of memory");
    double *lse = buf, *lpb = lse + cells, *lpy = lpb + cells, *alpha = lpy + cells, *beta = alpha + cells;
    if (dz && !L->packed) // padding rows: no gradient (before any row of z is overwritten: dz may be z)
        for (int b = 0; b < L->B; b++)
            for (int ti = 0; ti < L->Tmax; ti++)
                for (int u = 0; u <= L->Umax; u++)
                    if (ti >= L->T[b] || u > L->U[b])
                        for (int v = 0; v < V; v++)
                            tk_act_st(dz, t, (size_t)(L->row0[b] + ti * ld_of(L, b) + u) * V + v, 0);
    if (dz && L->packed)
        for (size_t i = (size_t)L->row0[L->B] * V; i < (size_t)L->rows * V; i++) tk_act_st(dz, t, i, 0);
    double sum = 0;
    for (int b = 0; b < L->B; b++) {
        const int *y = labels + (size_t)b * L->Umax;
        const double ll = lattice(t, L, V, blank, y, z, b, lse, lpb, lpy, alpha, beta);
        sum += -ll;
        if (costs) costs[b] = (float)-ll;
        if (!dz) continue;
        const int T = L->T[b], U = L->U[b], W = U + 1;
        for (int ti = 0; ti < T; ti++)
            for (int u = 0; u <= U; u++) {
                const size_t row = (size_t)(L->row0[b] + ti * ld_of(L, b) + u), c = (size_t)ti * W + u;
                const double occ = alpha[c] + beta[c] - ll;
                const double nb = ti < T - 1 ? beta[c + W] : u == U ? 0 : -INFINITY; // after the blank
                const double gb = exp(alpha[c] + lpb[c] + nb - ll);
                const double gy = u < U ? exp(alpha[c] + lpy[c] + beta[c + 1] - ll) : 0;
                for (int v = 0; v < V; v++) {
                    double d = exp(tk_act_ld(z, t, row * V + v) - lse[c] + occ);
                    if (v == blank) d -= gb;
                    if (u < U && v == y[u]) d -= gy;
                    tk_act_st(dz, t, row * V + v, (float)(scale * d));
                }
            }
    }
    *loss = (float)(scale * sum);
    if (acc) acc[0] += scale * sum, acc[1] += 1;
    free(buf);
    return 0;
}
