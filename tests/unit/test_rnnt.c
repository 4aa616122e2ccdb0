// The CPU reference of the RNN-T joint and loss (kernels/rnnt_ref.c): cases whose loss and
// gradient are worked out here by hand (one cell; uniform logits, where every alignment path has
// the same probability and the paths can be counted), a brute-force sum over every alignment path
// written independently of the recursions (in double) with its finite differences for the
// gradient, packed against padded layouts, and the joint's backward as the exact adjoint of its
// forward (piecewise linear: on half-integer sums nothing crosses the ReLU's kink).
// With TK_RNNT_DRIVE=f32|bf16 in the environment the binary is instead the C side of
// tests/cli/rnnt-oracle.bats: it reads "B V blank packed scale", then B lines "T U y_1 .. y_U",
// then the logits (rows x V numbers, rows in the layout's order) from stdin, runs tk_rnnt_loss_ref
// on them (rounded to bf16 first for bf16) and prints "loss L", "costs c_0 .. c_{B-1}" and the
// gradient "dz N" then N values one a line (padding rows included); then it exits before its TAP
// tests: 0, or the error's code with a message on stderr.
#include <errno.h>
#include <math.h>
#include <string.h>

#include "core/bf16.h"
#include "rnnt.h"
#include "tk_drive.h"
#include "tk_test.h"
#include "tk_test_cpu.h"

// A batch's layout on the cpu (host arrays).
typedef struct {
    tk_rnnt_lay L;
    int T[8], U[8];
    int64_t row0[9];
} batch;
static void batch_init(batch *s, int B, const int *T, const int *U, int packed) {
    memset(s, 0, sizeof *s);
    int Tmax = 1, Umax = 0;
    for (int b = 0; b < B; b++) {
        s->T[b] = T[b], s->U[b] = U[b];
        Tmax = T[b] > Tmax ? T[b] : Tmax, Umax = U[b] > Umax ? U[b] : Umax;
    }
    tk_err e = {0};
    s->L = (tk_rnnt_lay){B, Tmax, Umax, packed, tk_rnnt_layout(B, Tmax, Umax, T, U, packed, s->row0, &e),
                         s->T, s->U, s->row0};
}

// ---- hand-worked cases ----

// T = 1, U = 0: the one path emits blank once. Logits (0, 0, 0), blank 2: loss = log 3 and
// dz = softmax - onehot(blank) = (1/3, 1/3, -2/3); with logits (0, log 2, 0) and blank 1,
// p = (1/4, 1/2, 1/4): loss = log 2, dz = (1/4, -1/2, 1/4).
TK_TEST(rnnt_one_cell) {
    tk_err e = {0};
    batch s;
    batch_init(&s, 1, (int[]){1}, (int[]){0}, 1);
    CHECK_EQ_INT(s.L.rows, 1);
    float z[3] = {0, 0, 0}, dz[3], loss = 0, cost = 0;
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &s.L, 3, 2, NULL, z, 1.0f, NULL, &loss, &cost, dz, &e), 0);
    CHECK_NEAR(loss, log(3.0), 1e-7);
    CHECK_NEAR(cost, log(3.0), 1e-7);
    CHECK_NEAR(dz[0], 1 / 3.0, 1e-7);
    CHECK_NEAR(dz[1], 1 / 3.0, 1e-7);
    CHECK_NEAR(dz[2], -2 / 3.0, 1e-7);
    float z2[3] = {0, (float)log(2.0), 0};
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &s.L, 3, 1, NULL, z2, 0.5f, NULL, &loss, NULL, z2, &e), 0); // in place
    CHECK_NEAR(loss, 0.5 * log(2.0), 1e-7);
    CHECK_NEAR(z2[0], 0.125, 1e-7);
    CHECK_NEAR(z2[1], -0.25, 1e-7);
    CHECK_NEAR(z2[2], 0.125, 1e-7);
}

// Uniform logits: every emission has probability 1/V, every path T + U emissions, and the paths
// are the orders of T blanks and U labels ending in a blank: C(T + U - 1, U) of them, so
// loss = (T + U) log V - log C(T + U - 1, U). T = 2, U = 1: 2 paths; T = 3, U = 2: 6; T = 4,
// U = 3: 20. Each row's gradient sums to 0 (a softmax's), and at the cell (T-1, U) the only edge
// left is the final blank, taken by every path: its gradient is p - onehot(blank) exactly.
TK_TEST(rnnt_uniform_logits_count_paths) {
    static const struct {
        int T, U, paths;
    } cases[] = {{2, 1, 2}, {3, 2, 6}, {4, 3, 20}, {5, 0, 1}, {1, 4, 1}};
    const int V = 5, blank = 4;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tk_err e = {0};
        batch s;
        const int T = cases[k].T, U = cases[k].U;
        batch_init(&s, 1, &T, &U, 1);
        const int rows = T * (U + 1);
        float z[64 * 5], loss, cost;
        int y[4] = {0, 3, 1, 2};
        for (int i = 0; i < rows * V; i++) z[i] = 0.75f;
        CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &s.L, V, blank, y, z, 1.0f, NULL, &loss, &cost, z, &e), 0);
        CHECK_NEAR(loss, (T + U) * log((double)V) - log((double)cases[k].paths), 1e-6);
        for (int r = 0; r < rows; r++) {
            double sum = 0;
            for (int v = 0; v < V; v++) sum += z[r * V + v];
            CHECK_NEAR(sum, 0, 1e-6);
        }
        const float *last = z + (size_t)(rows - 1) * V;
        for (int v = 0; v < V; v++) CHECK_NEAR(last[v], 1.0 / V - (v == blank), 1e-6);
    }
}

// ---- brute force ----

// -log P(y|x) as the sum over every alignment path, walked recursively from cell (t, u) in double.
typedef struct {
    const double *z;
    int T, U, V, blank;
    const int *y;
} walk;
static double lp_of(const walk *w, int t, int u, int v) {
    const double *r = w->z + ((size_t)t * (w->U + 1) + u) * w->V;
    double s = 0;
    for (int k = 0; k < w->V; k++) s += exp(r[k]);
    return r[v] - log(s);
}
static double paths_from(const walk *w, int t, int u) {
    double p = 0;
    if (t == w->T - 1 && u == w->U) return exp(lp_of(w, t, u, w->blank));
    if (t < w->T - 1) p += exp(lp_of(w, t, u, w->blank)) * paths_from(w, t + 1, u);
    if (u < w->U) p += exp(lp_of(w, t, u, w->y[u])) * paths_from(w, t, u + 1);
    return p;
}
static double brute_nll(const walk *w) { return -log(paths_from(w, 0, 0)); }

// The reference against the brute-force sum and its central differences (step 1e-4 in double:
// error ~1e-9), on random logits, one utterance (packed rows: (t, u) at t (U + 1) + u).
TK_TEST(rnnt_brute_force_and_finite_differences) {
    static const struct {
        int T, U, V;
    } cases[] = {{1, 0, 3}, {2, 1, 4}, {3, 2, 5}, {4, 3, 3}, {2, 4, 6}, {5, 1, 4}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tk_err e = {0};
        const int T = cases[k].T, U = cases[k].U, V = cases[k].V, rows = T * (U + 1), blank = k % 2 ? V - 1 : 0;
        batch s;
        batch_init(&s, 1, &T, &U, 1);
        float z[30 * 6], dz[30 * 6], loss, cost;
        double zd[30 * 6];
        int y[4];
        for (int u = 0; u < U; u++) y[u] = blank == 0 ? 1 + (u * 7 + 3) % (V - 1) : (u * 5 + 2) % (V - 1);
        tk_test_fill(z, (size_t)rows * V, 0x7217, (uint32_t)k, -3, 3);
        for (int i = 0; i < rows * V; i++) zd[i] = z[i];
        const double scale = 0.25;
        double acc[2] = {1, 2};
        CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &s.L, V, blank, y, z, (float)scale, acc, &loss, &cost, dz, &e), 0);
        walk w = {zd, T, U, V, blank, y};
        const double nll = brute_nll(&w);
        CHECK_NEAR(cost, nll, 1e-6);
        CHECK_NEAR(loss, scale * nll, 1e-6);
        CHECK_NEAR(acc[0], 1 + scale * nll, 1e-12);
        CHECK(acc[1] == 3);
        double err = 0, norm = 0;
        for (int i = 0; i < rows * V; i++) {
            const double h = 1e-4, z0 = zd[i];
            zd[i] = z0 + h;
            const double up = brute_nll(&w);
            zd[i] = z0 - h;
            const double dn = brute_nll(&w);
            zd[i] = z0;
            const double fd = scale * (up - dn) / (2 * h);
            err = fmax(err, fabs(dz[i] - fd)), norm = fmax(norm, fabs(fd));
        }
        if (!(err <= 1e-6 * fmax(norm, 1e-3)))
            printf("# T %d U %d V %d: max |dz - fd| %.3g of %.3g\n", T, U, V, err, norm);
        CHECK(err <= 1e-6 * fmax(norm, 1e-3));
    }
}

// ---- layouts ----

// Three utterances of different lengths: the packed rows and the padded (B, Tmax, Umax + 1) rows
// (padding filled with large values that must not matter) give the same losses bit for bit, the
// same gradient on the lattice rows and 0 on the padding; the gradient in place equals the
// gradient into its own buffer. bf16 logits likewise.
TK_TEST(rnnt_packed_and_padded_agree) {
    const int B = 3, V = 7, blank = V - 1, T[3] = {4, 2, 3}, U[3] = {2, 0, 3};
    batch p, q;
    batch_init(&p, B, T, U, 1), batch_init(&q, B, T, U, 0);
    CHECK_EQ_INT(p.L.rows, 4 * 3 + 2 * 1 + 3 * 4);
    CHECK_EQ_INT(q.L.rows, 3 * 4 * 4);
    const int labels[3 * 3] = {0, 5, 0, /**/ 0, 0, 0, /**/ 2, 2, 4}; // (B, Umax): unused ones 0
    for (int t = 0; t < 2; t++) {
        const tk_dtype dt = t ? TK_BF16 : TK_F32;
        const size_t es = tk_dtype_size(dt), np = (size_t)p.L.rows * V, nq = (size_t)q.L.rows * V;
        float zf[48 * 7];
        tk_test_fill(zf, nq, 0x7218, 1, -4, 4);
        char *zp = malloc(np * es), *zq = malloc(nq * es), *dp = malloc(np * es), *dq = malloc(nq * es);
        for (size_t i = 0; i < nq; i++) {
            if (t) ((uint16_t *)zq)[i] = tk_f32_to_bf16(zf[i]);
            else ((float *)zq)[i] = zf[i];
        }
        for (int b = 0; b < B; b++) // copy the lattice rows, mark the padding
            for (int ti = 0; ti < q.L.Tmax; ti++)
                for (int u = 0; u <= q.L.Umax; u++) {
                    const size_t rq = (size_t)(q.row0[b] + ti * (q.L.Umax + 1) + u);
                    if (ti < T[b] && u <= U[b])
                        memcpy(zp + (size_t)(p.row0[b] + ti * (U[b] + 1) + u) * V * es, zq + rq * V * es, V * es);
                    else
                        for (int v = 0; v < V; v++)
                            if (t) ((uint16_t *)zq)[rq * V + v] = tk_f32_to_bf16(1e30f);
                            else ((float *)zq)[rq * V + v] = 1e30f;
                }
        float lp, lq, cp[3], cq[3];
        tk_err e = {0};
        CHECK_EQ_INT(tk_rnnt_loss_ref(dt, &p.L, V, blank, labels, zp, 1.0f / B, NULL, &lp, cp, dp, &e), 0);
        CHECK_EQ_INT(tk_rnnt_loss_ref(dt, &q.L, V, blank, labels, zq, 1.0f / B, NULL, &lq, cq, dq, &e), 0);
        CHECK(lp == lq && isfinite(lp) && lp > 0);
        for (int b = 0; b < B; b++) CHECK(cp[b] == cq[b]);
        CHECK_NEAR(lp, (cp[0] + cp[1] + cp[2]) / 3.0, 1e-6);
        size_t diff = 0, pad_nonzero = 0;
        for (int b = 0; b < B; b++)
            for (int ti = 0; ti < q.L.Tmax; ti++)
                for (int u = 0; u <= q.L.Umax; u++) {
                    const size_t rq = (size_t)(q.row0[b] + ti * (q.L.Umax + 1) + u);
                    if (ti < T[b] && u <= U[b])
                        diff += memcmp(dp + (size_t)(p.row0[b] + ti * (U[b] + 1) + u) * V * es, dq + rq * V * es,
                                       V * es) != 0;
                    else
                        for (int v = 0; v < V; v++)
                            pad_nonzero += t ? ((uint16_t *)dq)[rq * V + v] != 0 : ((float *)dq)[rq * V + v] != 0;
                }
        CHECK_EQ_INT(diff, 0);
        CHECK_EQ_INT(pad_nonzero, 0);
        float li;
        // in place
        CHECK_EQ_INT(tk_rnnt_loss_ref(dt, &q.L, V, blank, labels, zq, 1.0f / B, NULL, &li, NULL, zq, &e), 0);
        CHECK(li == lq);
        CHECK(memcmp(zq, dq, nq * es) == 0);
        free(zp), free(zq), free(dp), free(dq);
    }
}

// The value only (dz NULL) and costs NULL; the dispatcher on the cpu backend is the reference.
TK_TEST(rnnt_value_only_and_dispatch) {
    const int T = 3, U = 2, V = 4, y[2] = {1, 2};
    batch s;
    batch_init(&s, 1, &T, &U, 1);
    float z[9 * 4], dz[9 * 4], l1, l2;
    tk_test_fill(z, 36, 0x7219, 0, -2, 2);
    tk_err e = {0};
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &s.L, V, 0, y, z, 1.0f, NULL, &l1, NULL, NULL, &e), 0);
    CHECK_EQ_INT(tk_rnnt_loss(tk_test_cpu(), TK_F32, &s.L, V, 0, y, z, 1.0f, NULL, &l2, NULL, dz, NULL, &e), 0);
    CHECK(l1 == l2 && l1 > 0);
    CHECK_EQ_INT(tk_rnnt_loss_ws_bytes(TK_BACKEND_CPU, 1, 9), 0);
}

// Packed rows with a capacity past row0[B] (a captured step's fixed rows): the loss, the costs and
// the lattice rows' gradient equal those at the exact rows bit for bit; the joint's rows and the
// gradient's rows past row0[B] are written 0 (filled with garbage first); the joint's backward
// ignores them. row0[B] past the capacity is refused.
TK_TEST(rnnt_packed_row_capacity) {
    const int B = 2, V = 5, H = 6, T[2] = {3, 2}, U[2] = {1, 2}, y[2 * 2] = {2, 0, 1, 3};
    batch s;
    batch_init(&s, B, T, U, 1);
    const int64_t rows = s.L.rows, cap = rows + 7;
    batch c = s;
    c.L.T = c.T, c.L.U = c.U, c.L.row0 = c.row0, c.L.rows = cap;
    float z[(3 * 2 + 2 * 3 + 7) * 5], zc[(3 * 2 + 2 * 3 + 7) * 5], l1, l2, c1[2], c2[2];
    tk_test_fill(z, (size_t)rows * V, 0x721b, 0, -3, 3);
    memcpy(zc, z, sizeof z);
    for (size_t i = (size_t)rows * V; i < (size_t)cap * V; i++) zc[i] = 1e30f;
    tk_err e = {0};
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &s.L, V, V - 1, y, z, 0.5f, NULL, &l1, c1, z, &e), 0);
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &c.L, V, V - 1, y, zc, 0.5f, NULL, &l2, c2, zc, &e), 0);
    CHECK(l1 == l2 && c1[0] == c2[0] && c1[1] == c2[1] && isfinite(l1));
    CHECK(memcmp(z, zc, (size_t)rows * V * 4) == 0);
    int nonzero = 0;
    for (size_t i = (size_t)rows * V; i < (size_t)cap * V; i++) nonzero += zc[i] != 0;
    CHECK_EQ_INT(nonzero, 0);
    float f[2 * 3 * 6], g[2 * 3 * 6], h[19 * 6], hc[19 * 6], df[2 * 3 * 6], dfc[2 * 3 * 6], dg[2 * 3 * 6],
        dgc[2 * 3 * 6];
    tk_test_fill(f, sizeof f / 4, 0x721c, 0, -1, 1);
    tk_test_fill(g, sizeof g / 4, 0x721c, 1, -1, 1);
    for (size_t i = 0; i < sizeof hc / 4; i++) hc[i] = 7;
    int64_t step = 2;
    tk_dropout d = {0.3f, 4, 1, &step, 0};
    CHECK_EQ_INT(tk_rnnt_joint_fwd_ref(TK_F32, &s.L, H, f, g, &d, h, &e), 0);
    CHECK_EQ_INT(tk_rnnt_joint_fwd_ref(TK_F32, &c.L, H, f, g, &d, hc, &e), 0);
    CHECK(memcmp(h, hc, (size_t)rows * H * 4) == 0);
    nonzero = 0;
    for (size_t i = (size_t)rows * H; i < (size_t)cap * H; i++) nonzero += hc[i] != 0, hc[i] = 1e30f;
    CHECK_EQ_INT(nonzero, 0);
    CHECK_EQ_INT(tk_rnnt_joint_bwd_ref(TK_F32, &s.L, H, f, g, &d, h, df, dg, &e), 0);
    CHECK_EQ_INT(tk_rnnt_joint_bwd_ref(TK_F32, &c.L, H, f, g, &d, hc, dfc, dgc, &e), 0);
    CHECK(memcmp(df, dfc, sizeof df) == 0 && memcmp(dg, dgc, sizeof dg) == 0);
    c.L.rows = rows - 1;
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &c.L, V, V - 1, y, zc, 0.5f, NULL, &l2, NULL, NULL, &e), TK_EINTERNAL);
}

// Labels equal to the blank or outside 0..V-1, lengths outside their extents, a padded layout
// of the wrong row count, row0 that does not match the lengths: refused, naming the utterance.
TK_TEST(rnnt_bad_input_refused) {
    tk_err e = {0};
    const int T[2] = {2, 1}, U[2] = {1, 2};
    batch s;
    batch_init(&s, 2, T, U, 1);
    float z[7 * 4] = {0}, loss;
    int y[4] = {0, 0, 1, 2};
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &s.L, 3, 2, y, z, 1.0f, NULL, &loss, NULL, NULL, &e), TK_EINTERNAL);
    CHECK(strstr(e.what, "utterance 1: label 2 at 1") != NULL);
    y[3] = 3, e = (tk_err){0};
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &s.L, 4, 2, y, z, 1.0f, NULL, &loss, NULL, NULL, &e), 0);
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &s.L, 3, 1, y, z, 1.0f, NULL, &loss, NULL, NULL, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &s.L, 3, 3, y, z, 1.0f, NULL, &loss, NULL, NULL, &e), TK_EINTERNAL);
    int64_t row0[3];
    e = (tk_err){0};
    CHECK_EQ_INT(tk_rnnt_layout(2, 2, 2, (int[]){2, 3}, U, 1, row0, &e), -1);
    CHECK(strstr(e.what, "utterance 1: 3 frames") != NULL);
    CHECK_EQ_INT(tk_rnnt_layout(2, 2, 2, T, (int[]){0, -1}, 0, row0, &e), -1);
    batch q = s;
    q.L.T = q.T, q.L.U = q.U, q.L.row0 = q.row0;
    q.row0[1] = 5, e = (tk_err){0};
    y[3] = 0;
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &q.L, 3, 2, y, z, 1.0f, NULL, &loss, NULL, NULL, &e), TK_EINTERNAL);
    CHECK(strstr(e.what, "utterance 0: row0") != NULL);
    q = s, q.L.T = q.T, q.L.U = q.U, q.L.row0 = q.row0;
    q.L.packed = 0;
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F32, &q.L, 3, 2, y, z, 1.0f, NULL, &loss, NULL, NULL, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_rnnt_loss_ref(TK_F16, &s.L, 3, 2, y, z, 1.0f, NULL, &loss, NULL, NULL, &e), TK_EINTERNAL);
}

// ---- joint ----

// f integers, g half-integers: every sum s = f + g is a nonzero multiple of 1/2. Forward without
// dropout is relu(s) exactly, on every lattice row; with p = 0.5 each element is 0 or 2 relu(s),
// about half of the positive ones dropped, the padding rows 0. The backward is the adjoint:
// perturbing f and g by eps (df0, dg0), eps = 1/64, crosses no kink, so
// sum dh (h(f + eps df0, g + eps dg0) - h(f, g)) / eps = sum df df0 + sum dg dg0, exactly (all
// values are short binary fractions).
static void joint_case(int packed, float p, int *tk_failed_) {
    const int B = 2, H = 11, T[2] = {3, 2}, U[2] = {1, 2};
    batch s;
    batch_init(&s, B, T, U, packed);
    const int Tm = s.L.Tmax, Um = s.L.Umax;
    const size_t nf = (size_t)B * Tm * H, ng = (size_t)B * (Um + 1) * H, nh = (size_t)s.L.rows * H;
    float *f = malloc(nf * 4), *g = malloc(ng * 4), *f2 = malloc(nf * 4), *g2 = malloc(ng * 4), *h = malloc(nh * 4),
          *h2 = malloc(nh * 4), *dh = malloc(nh * 4), *df = malloc(nf * 4), *dg = malloc(ng * 4);
    for (size_t i = 0; i < nf; i++) f[i] = (float)((int)(tk_philox_uniform(0x721a, 0, i) * 9) - 4);
    for (size_t i = 0; i < ng; i++) g[i] = (float)((int)(tk_philox_uniform(0x721a, 1, i) * 8) - 4) + 0.5f;
    for (size_t i = 0; i < nh; i++) dh[i] = (float)((int)(tk_philox_uniform(0x721a, 2, i) * 7) - 3);
    for (size_t i = 0; i < nf; i++) f2[i] = f[i] + (float)((int)(tk_philox_uniform(0x721a, 3, i) * 3) - 1) / 64;
    for (size_t i = 0; i < ng; i++) g2[i] = g[i] + (float)((int)(tk_philox_uniform(0x721a, 4, i) * 3) - 1) / 64;
    int64_t step = 3;
    tk_dropout d = {p, 11, 5, &step, 1000};
    tk_err e = {0};
    CHECK_EQ_INT(tk_rnnt_joint_fwd_ref(TK_F32, &s.L, H, f, g, &d, h, &e), 0);
    CHECK_EQ_INT(tk_rnnt_joint_fwd_ref(TK_F32, &s.L, H, f2, g2, &d, h2, &e), 0);
    CHECK_EQ_INT(tk_rnnt_joint_bwd_ref(TK_F32, &s.L, H, f, g, &d, dh, df, dg, &e), 0);
    size_t pos = 0, kept = 0, bad = 0, pad = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tm; t++)
            for (int u = 0; u <= Um; u++) {
                const int in = t < T[b] && u <= U[b];
                if (!in && packed) continue;
                const size_t row = (size_t)(s.row0[b] + t * (packed ? U[b] + 1 : Um + 1) + u);
                for (int j = 0; j < H; j++) {
                    const float sum = f[((size_t)b * Tm + t) * H + j] + g[((size_t)b * (Um + 1) + u) * H + j],
                                got = h[row * H + j];
                    if (!in) {
                        pad += got != 0;
                        continue;
                    }
                    pos += sum > 0;
                    kept += sum > 0 && got != 0;
                    bad += !(got == 0 || got == (p > 0 ? 2 : 1) * fmaxf(sum, 0)) || (p == 0 && got != fmaxf(sum, 0));
                }
            }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(pad, 0);
    if (p > 0) CHECK(kept * 4 > pos && kept * 4 < 3 * pos); // ~half of ~half the 2 x 11 x 12 elements kept
    else CHECK_EQ_INT(kept, pos);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < nh; i++) lhs += (double)dh[i] * (h2[i] - h[i]) * 64;
    for (size_t i = 0; i < nf; i++) rhs += (double)df[i] * (f2[i] - f[i]) * 64;
    for (size_t i = 0; i < ng; i++) rhs += (double)dg[i] * (g2[i] - g[i]) * 64;
    double mass = 0;
    for (size_t i = 0; i < nf; i++) mass += fabs(df[i]);
    if (lhs != rhs) printf("# packed %d p %g: %.17g vs %.17g\n", packed, p, lhs, rhs);
    CHECK(lhs == rhs && mass > 0);
    // outside the lattice the gradients are 0: frame 2 of utterance 1, label position 2 of utterance 0
    for (int j = 0; j < H; j++) CHECK(df[((size_t)1 * Tm + 2) * H + j] == 0 && dg[(size_t)2 * H + j] == 0);
    free(f), free(g), free(f2), free(g2), free(h), free(h2), free(dh), free(df), free(dg);
}
TK_TEST(rnnt_joint_exact_and_adjoint) {
    joint_case(1, 0, tk_failed_);
    joint_case(0, 0, tk_failed_);
    joint_case(1, 0.5f, tk_failed_);
    joint_case(0, 0.5f, tk_failed_);
}

// ---- the oracle driver (see the top of the file) ----

static int drive(const char *type, tk_err *e) {
    tk_dtype t = strcmp(type, "bf16") == 0 ? TK_BF16 : strcmp(type, "f32") == 0 ? TK_F32 : TK_U8;
    if (t == TK_U8) return tk_err_set(e, TK_EUSAGE, "TK_RNNT_DRIVE must be f32 or bf16, not \"%s\"", type);
    int B, V, blank, packed;
    float scale;
    if (scanf("%d %d %d %d %f", &B, &V, &blank, &packed, &scale) != 5 || B < 1 || B > 64 || V < 1 || V > 4096)
        return tk_err_set(e, TK_EDATA, "stdin: no \"B V blank packed scale\" line (B 1..64, V 1..4096)");
    int T[64], U[64], Tmax = 1, Umax = 0;
    int *y = malloc((size_t)B * 256 * sizeof(int));
    if (!y) return tk_err_errno(e, ENOMEM, "out of memory");
    for (int b = 0; b < B; b++) {
        if (scanf("%d %d", &T[b], &U[b]) != 2 || T[b] < 1 || T[b] > 256 || U[b] < 0 || U[b] > 255) {
            free(y);
            return tk_err_set(e, TK_EDATA, "stdin: utterance %d: no \"T U\" (T 1..256, U 0..255)", b);
        }
        for (int u = 0; u < U[b]; u++)
            if (scanf("%d", &y[b * 256 + u]) != 1) {
                free(y);
                return tk_err_set(e, TK_EDATA, "stdin: utterance %d: label %d of %d missing", b, u, U[b]);
            }
        Tmax = T[b] > Tmax ? T[b] : Tmax, Umax = U[b] > Umax ? U[b] : Umax;
    }
    int *labels = calloc((size_t)B * (Umax ? Umax : 1), sizeof(int));
    int64_t row0[65];
    const int64_t rows = labels ? tk_rnnt_layout(B, Tmax, Umax, T, U, packed, row0, e) : -1;
    const size_t n = rows > 0 ? (size_t)rows * V : 0;
    float *z = n ? malloc(n * 4) : NULL, *dz = n ? malloc(n * 4) : NULL, costs[64], loss = 0;
    uint16_t *zb = n ? malloc(n * 2) : NULL;
    int rc = e->code ? e->code : !labels || !z || !dz || !zb ? tk_err_errno(e, ENOMEM, "out of memory") : 0;
    for (int b = 0; b < B && !rc; b++)
        for (int u = 0; u < U[b]; u++) labels[(size_t)b * Umax + u] = y[b * 256 + u];
    for (size_t i = 0; i < n && !rc; i++)
        if (scanf("%f", &z[i]) != 1) rc = tk_err_set(e, TK_EDATA, "stdin: logit %zu of %zu missing", i, n);
    if (!rc) {
        tk_rnnt_lay L = {B, Tmax, Umax, packed, rows, T, U, row0};
        for (size_t i = 0; i < n; i++) zb[i] = tk_f32_to_bf16(z[i]);
        rc = tk_rnnt_loss_ref(t, &L, V, blank, labels, t == TK_BF16 ? (void *)zb : z, scale, NULL, &loss, costs,
                              t == TK_BF16 ? (void *)zb : dz, e);
    }
    if (!rc) {
        printf("loss %.9g\ncosts", loss);
        for (int b = 0; b < B; b++) printf(" %.9g", costs[b]);
        printf("\ndz %zu\n", n);
        for (size_t i = 0; i < n; i++) printf("%.9g\n", t == TK_BF16 ? tk_bf16_to_f32(zb[i]) : dz[i]);
    }
    free(y), free(labels), free(z), free(dz), free(zb);
    return rc;
}

__attribute__((constructor(200))) static void drive_mode(void) {
    const char *s = getenv("TK_RNNT_DRIVE");
    if (!s) return;
    tk_err e = {0};
    int rc = drive(s, &e);
    tk_drive_exit("test_rnnt", rc, &e);
}
