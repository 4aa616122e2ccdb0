// The CPU reference of the LSTM (kernels/lstm_ref.c): one step worked out by hand (gates at
// sigmoid(+-ln 3) = 3/4, 1/4, tanh(ln 2) = 3/5) with its gradients; the lengths' masking (a padded
// batch equals each sequence run alone, outputs 0 and the state frozen past the lengths); every
// gradient (weights, biases, x, h0, c0; with inter-layer dropout, hn and cn in the loss) against
// central differences of an fp64 forward written here; (h0, c0) carry (two half runs equal one
// full run, bit for bit); the workload's initialization helper; and the refusals.
// With TK_LSTM_DRIVE=f32|bf16 in the environment the binary is instead the C side of
// tests/cli/lstm-oracle.bats: it reads "L T B I H p last seed step" (last: drop_last), then B
// lengths, then every parameter (per layer w_ih, w_hh, b_ih, b_hh, PyTorch's layout), x, h0, c0, dy, dhn, dcn as
// numbers from stdin, runs the reference's forward and backward (inputs rounded to bf16 first for
// bf16) and prints "NAME N" then N values one a line for y hn cn dx dh0 dc0, then per layer
// dw_ih dw_hh db_ih db_hh, then (p > 0) the dropout factors of each dropped layer output "mask N";
// then it exits before its TAP tests: 0, or the error's code with a message on stderr.
#include <errno.h>
#include <math.h>
#include <string.h>

#include "core/bf16.h"
#include "lstm.h"
#include "tk_drive.h"
#include "tk_test.h"
#include "tk_test_cpu.h"

// A model and its inputs on the cpu, every float tensor in one vector p (per layer w_ih, w_hh,
// b_ih, b_hh; then x, h0, c0) and the gradients in g with the same layout.
typedef struct {
    tk_lstm_shape s;
    int len[16];
    size_t off_w[TK_LSTM_MAX_LAYERS][4], off_x, off_h0, off_c0, n;
    float *p, *g;
    float *y, *hn, *cn, *dy, *dhn, *dcn; // outputs; the loss's weights (the backward's inputs)
    void *ws;
    tk_lstm_w w;
    tk_lstm_dw dw;
    tk_dropout drop;
    int64_t step;
} mdl;

static mdl *mdl_new(int L, int T, int B, int I, int H, const int *len, uint64_t key) {
    mdl *m = calloc(1, sizeof *m);
    m->s = (tk_lstm_shape){L, T, B, I, H, 0};
    size_t o = 0;
    for (int k = 0; k < L; k++) {
        const size_t Ik = k ? H : I, sz[4] = {4 * H * Ik, (size_t)4 * H * H, (size_t)4 * H, (size_t)4 * H};
        for (int q = 0; q < 4; q++) m->off_w[k][q] = o, o += sz[q];
    }
    const size_t LBH = (size_t)L * B * H;
    m->off_x = o, o += (size_t)T * B * I;
    m->off_h0 = o, o += LBH;
    m->off_c0 = o, o += LBH;
    m->n = o;
    m->p = malloc(o * 4), m->g = calloc(o, 4);
    tk_test_fill(m->p, o, key, 1, -1, 1);
    for (int b = 0; b < B; b++) m->len[b] = len ? len[b] : T;
    m->y = calloc((size_t)T * B * H, 4), m->dy = malloc((size_t)T * B * H * 4);
    m->hn = calloc(LBH, 4), m->cn = calloc(LBH, 4), m->dhn = malloc(LBH * 4), m->dcn = malloc(LBH * 4);
    tk_test_fill(m->dy, (size_t)T * B * H, key, 2, -1, 1);
    tk_test_fill(m->dhn, LBH, key, 3, -1, 1);
    tk_test_fill(m->dcn, LBH, key, 4, -1, 1);
    m->ws = calloc(1, tk_lstm_ws_bytes(TK_F32, &m->s));
    for (int k = 0; k < L; k++) {
        m->w.w_ih[k] = m->p + m->off_w[k][0], m->w.w_hh[k] = m->p + m->off_w[k][1];
        m->w.b_ih[k] = m->p + m->off_w[k][2], m->w.b_hh[k] = m->p + m->off_w[k][3];
        m->dw.w_ih[k] = m->g + m->off_w[k][0], m->dw.w_hh[k] = m->g + m->off_w[k][1];
        m->dw.b_ih[k] = m->g + m->off_w[k][2], m->dw.b_hh[k] = m->g + m->off_w[k][3];
    }
    m->step = 5;
    m->drop = (tk_dropout){0, 77, 3, &m->step, 0};
    return m;
}
static void mdl_free(mdl *m) {
    free(m->p), free(m->g), free(m->y), free(m->dy), free(m->hn), free(m->cn), free(m->dhn), free(m->dcn);
    free(m->ws), free(m);
}
static int mdl_fwd(mdl *m, int with_state) {
    tk_err e = {0};
    return tk_lstm_fwd_ref(TK_F32, &m->s, &m->w, m->len, m->p + m->off_x, with_state ? m->p + m->off_h0 : NULL,
                           with_state ? m->p + m->off_c0 : NULL, &m->drop, m->y, m->hn, m->cn, m->ws, &e);
}
static int mdl_bwd(mdl *m) {
    tk_err e = {0};
    return tk_lstm_bwd_ref(TK_F32, &m->s, &m->w, m->len, m->p + m->off_x, &m->drop, m->dy, m->dhn, m->dcn,
                           m->g + m->off_x, m->g + m->off_h0, m->g + m->off_c0, &m->dw, m->ws, &e);
}

// ---- an fp64 forward, written from the equations of kernels/lstm.h ----

static double sig_d(double a) { return 1 / (1 + exp(-a)); }

// loss = sum y dy + sum hn dhn + sum cn dcn for the parameters and inputs q (m's layout, fp64);
// y (may be NULL) gets the outputs.
static double loss_d(const mdl *m, const double *q, double *yout) {
    const int L = m->s.L, T = m->s.T, B = m->s.B, H = m->s.H;
    const uint32_t th = tk_dropout_thresh(m->drop.p);
    double *in = malloc(sizeof(double) * (size_t)T * B * (m->s.I > H ? m->s.I : H));
    double *out = malloc(sizeof(double) * (size_t)T * B * H), *a = malloc(sizeof(double) * 4 * H);
    double *h = malloc(sizeof(double) * H), *c = malloc(sizeof(double) * H), *hp = malloc(sizeof(double) * H);
    for (size_t i = 0; i < (size_t)T * B * m->s.I; i++) in[i] = q[m->off_x + i];
    double loss = 0;
    for (int k = 0; k < L; k++) {
        const int Ik = k ? H : m->s.I;
        const double *wih = q + m->off_w[k][0], *whh = q + m->off_w[k][1], *bi = q + m->off_w[k][2],
                     *bh = q + m->off_w[k][3];
        for (int b = 0; b < B; b++) {
            const size_t sb = ((size_t)k * B + b) * H;
            for (int j = 0; j < H; j++) h[j] = q[m->off_h0 + sb + j], c[j] = q[m->off_c0 + sb + j];
            for (int t = 0; t < T; t++) {
                double *o = out + ((size_t)t * B + b) * H;
                if (t >= m->len[b]) {
                    for (int j = 0; j < H; j++) o[j] = 0;
                    continue;
                }
                const double *x = in + ((size_t)t * B + b) * Ik;
                for (int r = 0; r < 4 * H; r++) {
                    a[r] = bi[r] + bh[r];
                    for (int i = 0; i < Ik; i++) a[r] += wih[(size_t)r * Ik + i] * x[i];
                    for (int j = 0; j < H; j++) a[r] += whh[(size_t)r * H + j] * h[j];
                }
                for (int j = 0; j < H; j++) hp[j] = h[j];
                for (int j = 0; j < H; j++) {
                    c[j] = sig_d(a[H + j]) * c[j] + sig_d(a[j]) * tanh(a[2 * H + j]);
                    h[j] = sig_d(a[3 * H + j]) * tanh(c[j]);
                    o[j] = h[j];
                }
            }
            for (int j = 0; j < H; j++) loss += h[j] * m->dhn[sb + j] + c[j] * m->dcn[sb + j];
        }
        if (k < L - 1 || m->s.drop_last) {
            tk_dropout dk = m->drop;
            dk.site += (uint32_t)k;
            for (size_t i = 0; i < (size_t)T * B * H; i++) out[i] *= tk_dropout_factor(&dk, th, m->step, i);
        }
        if (k < L - 1) memcpy(in, out, sizeof(double) * (size_t)T * B * H);
    }
    for (size_t i = 0; i < (size_t)T * B * H; i++) {
        loss += out[i] * m->dy[i];
        if (yout) yout[i] = out[i];
    }
    free(in), free(out), free(a), free(h), free(c), free(hp);
    return loss;
}

// ---- hand-worked step ----

// H = I = 1, x = 1, h0 = 1, c0 = 2; a = (ln 3, ln 3, ln 2, -ln 3) (the input gate's ln 3 split
// over both biases, the forget gate's from W_hh h0): i = 3/4, f = 3/4, g = 3/5, o = 1/4,
// c = 3/4 * 2 + 3/4 * 3/5 = 1.95, h = tanh(1.95) / 4. Loss h: dh = 1, dc = o (1 - tanh^2 c),
// da = (dc g i(1-i), dc c0 f(1-f), dc i (1-g^2), tanh(c) o(1-o)); dx = W_ih^T da, dh0 = W_hh^T da,
// dc0 = dc f, dW_ih = da x, dW_hh = da h0, db = da.
TK_TEST(lstm_one_step_by_hand) {
    const float l3 = (float)log(3.0), l2 = (float)log(2.0);
    float wih[4] = {0, 0, l2, -l3}, whh[4] = {0, l3, 0, 0}, bi[4] = {l3 / 2, 0, 0, 0}, bh[4] = {l3 / 2, 0, 0, 0};
    float x = 1, h0 = 1, c0 = 2, y = 0, hn = 0, cn = 0, dy = 1, dx = 0, dh0 = 0, dc0 = 0;
    float gwih[4] = {0}, gwhh[4] = {0}, gbi[4] = {0}, gbh[4] = {0};
    const tk_lstm_shape s = {1, 1, 1, 1, 1, 0};
    tk_lstm_w w = {{wih}, {whh}, {bi}, {bh}};
    tk_lstm_dw dw = {{gwih}, {gwhh}, {gbi}, {gbh}};
    void *ws = calloc(1, tk_lstm_ws_bytes(TK_F32, &s));
    tk_err e = {0};
    CHECK_EQ_INT(tk_lstm_fwd_ref(TK_F32, &s, &w, NULL, &x, &h0, &c0, NULL, &y, &hn, &cn, ws, &e), 0);
    const double c = 1.95, tc = tanh(c), h = tc / 4;
    CHECK_NEAR(cn, c, 1e-6);
    CHECK_NEAR(y, h, 1e-6);
    CHECK_NEAR(hn, h, 1e-6);
    CHECK_EQ_INT(tk_lstm_bwd_ref(TK_F32, &s, &w, NULL, &x, NULL, &dy, NULL, NULL, &dx, &dh0, &dc0, &dw, ws, &e), 0);
    const double dc = 0.25 * (1 - tc * tc);
    const double da[4] = {dc * 0.6 * 3 / 16, dc * 2 * 3 / 16, dc * 0.75 * 0.64, tc * 3 / 16};
    for (int r = 0; r < 4; r++) {
        CHECK_NEAR(gwih[r], da[r], 1e-6); // x = 1
        CHECK_NEAR(gwhh[r], da[r], 1e-6); // h0 = 1
        CHECK_NEAR(gbi[r], da[r], 1e-6);
        CHECK_NEAR(gbh[r], da[r], 1e-6);
    }
    CHECK_NEAR(dx, l2 * da[2] - l3 * da[3], 1e-6);
    CHECK_NEAR(dh0, l3 * da[1], 1e-6);
    CHECK_NEAR(dc0, dc * 0.75, 1e-6);
    // the gradients are added to: a second backward doubles them
    CHECK_EQ_INT(tk_lstm_bwd_ref(TK_F32, &s, &w, NULL, &x, NULL, &dy, NULL, NULL, &dx, &dh0, &dc0, &dw, ws, &e), 0);
    CHECK_NEAR(gwih[3], 2 * da[3], 1e-6);
    CHECK_NEAR(dx, l2 * da[2] - l3 * da[3], 1e-6);
    free(ws);
}

// ---- lengths ----

// A padded batch with lengths (5, 2, 3) equals each sequence run alone over its own length:
// outputs, hn, cn and dx bit for bit, outputs and dx 0 past the lengths, the weight gradients
// the sum of the three runs'.
TK_TEST(lstm_lengths_mask_like_packed_sequences) {
    const int len[3] = {5, 2, 3}, L = 2, T = 5, B = 3, I = 3, H = 4;
    mdl *m = mdl_new(L, T, B, I, H, len, 11);
    CHECK_EQ_INT(mdl_fwd(m, 1), 0);
    CHECK_EQ_INT(mdl_bwd(m), 0);
    double *gsum = calloc(m->off_x, sizeof(double));
    for (int b = 0; b < B; b++) {
        mdl *o = mdl_new(L, len[b], 1, I, H, NULL, 11);
        memcpy(o->p, m->p, m->off_x * 4);
        for (int t = 0; t < len[b]; t++)
            memcpy(o->p + o->off_x + (size_t)t * I, m->p + m->off_x + ((size_t)t * B + b) * I, I * 4);
        for (int k = 0; k < L; k++) {
            memcpy(o->p + o->off_h0 + (size_t)k * H, m->p + m->off_h0 + ((size_t)k * B + b) * H, H * 4);
            memcpy(o->p + o->off_c0 + (size_t)k * H, m->p + m->off_c0 + ((size_t)k * B + b) * H, H * 4);
            memcpy(o->dhn + (size_t)k * H, m->dhn + ((size_t)k * B + b) * H, H * 4);
            memcpy(o->dcn + (size_t)k * H, m->dcn + ((size_t)k * B + b) * H, H * 4);
        }
        for (int t = 0; t < len[b]; t++) memcpy(o->dy + (size_t)t * H, m->dy + ((size_t)t * B + b) * H, H * 4);
        CHECK_EQ_INT(mdl_fwd(o, 1), 0);
        CHECK_EQ_INT(mdl_bwd(o), 0);
        int same = 1;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < H; j++) {
                const size_t i = ((size_t)t * B + b) * H + j;
                same &= m->y[i] == (t < len[b] ? o->y[(size_t)t * H + j] : 0.0f);
            }
        for (int t = 0; t < T; t++)
            for (int i = 0; i < I; i++)
                same &= m->g[m->off_x + ((size_t)t * B + b) * I + i] ==
                        (t < len[b] ? o->g[o->off_x + (size_t)t * I + i] : 0.0f);
        for (int k = 0; k < L; k++)
            for (int j = 0; j < H; j++) {
                const size_t i = ((size_t)k * B + b) * H + j, u = (size_t)k * H + j;
                same &= m->hn[i] == o->hn[u] && m->cn[i] == o->cn[u];
                same &= m->g[m->off_h0 + i] == o->g[o->off_h0 + u] && m->g[m->off_c0 + i] == o->g[o->off_c0 + u];
            }
        CHECK(same);
        for (size_t i = 0; i < m->off_x; i++) gsum[i] += o->g[i];
        mdl_free(o);
    }
    for (size_t i = 0; i < m->off_x; i++) CHECK_NEAR(m->g[i], gsum[i], 1e-6);
    free(gsum);
    mdl_free(m);
}

// ---- gradients against finite differences ----

static void check_fd(int *tk_failed_, int L, int T, int B, int I, int H, const int *len, float p, int last) {
    mdl *m = mdl_new(L, T, B, I, H, len, 21 + L);
    m->drop.p = p, m->s.drop_last = last;
    CHECK_EQ_INT(mdl_fwd(m, 1), 0);
    CHECK_EQ_INT(mdl_bwd(m), 0);
    double *q = calloc(m->n, sizeof(double)), *yd = calloc((size_t)T * B * H, sizeof(double));
    for (size_t i = 0; i < m->n; i++) q[i] = m->p[i];
    loss_d(m, q, yd);
    double ey = 0;
    for (size_t i = 0; i < (size_t)T * B * H; i++) ey = fmax(ey, fabs(m->y[i] - yd[i]));
    CHECK(ey < 1e-6);
    double num = 0, den = 0;
    int nz = 0;
    for (size_t i = 0; i < m->n; i++) {
        const double v = q[i], eps = 1e-6;
        q[i] = v + eps;
        const double lp = loss_d(m, q, NULL);
        q[i] = v - eps;
        const double lm = loss_d(m, q, NULL);
        q[i] = v;
        const double fd = (lp - lm) / (2 * eps);
        num += (fd - m->g[i]) * (fd - m->g[i]), den += fd * fd;
        if (fabs(fd - m->g[i]) > 1e-4 * (1 + fabs(fd))) {
            if (nz++ < 5) printf("#   element %zu: analytic %.9g fd %.9g\n", i, m->g[i], fd);
        }
    }
    CHECK_EQ_INT(nz, 0);
    CHECK(den > 0 && sqrt(num / den) < 1e-5);
    free(q), free(yd);
    mdl_free(m);
}

TK_TEST(lstm_gradients_match_finite_differences) {
    check_fd(tk_failed_, 1, 3, 2, 3, 2, (int[]){3, 2}, 0, 0);
    check_fd(tk_failed_, 2, 4, 3, 3, 4, (int[]){4, 1, 3}, 0, 0);
    check_fd(tk_failed_, 3, 4, 3, 2, 3, (int[]){2, 4, 3}, 0.3f, 0); // inter-layer dropout
    check_fd(tk_failed_, 2, 5, 2, 3, 4, (int[]){3, 5}, 0.4f, 1);    // and after the last layer
}

// Dropout really drops: with p = 0.5 the second layer sees about half its inputs zeroed, and
// the backward's gradients still match (check_fd above); a different update step changes y.
TK_TEST(lstm_dropout_between_layers) {
    mdl *m = mdl_new(2, 6, 4, 3, 8, NULL, 5);
    m->drop.p = 0.5f;
    CHECK_EQ_INT(mdl_fwd(m, 1), 0);
    const tk_lstm_ws W = tk_lstm_ws_layout(TK_F32, &m->s);
    const float *in1 = (const float *)((char *)m->ws + W.in[1]);
    const size_t n = (size_t)6 * 4 * 8;
    size_t zeros = 0;
    for (size_t i = 0; i < n; i++) zeros += in1[i] == 0;
    CHECK(zeros > n / 4 && zeros < 3 * n / 4);
    for (size_t i = 0; i < n; i++) zeros -= m->y[i] == 0; // the last layer's output is not dropped
    CHECK(zeros > n / 4);
    m->s.drop_last = 1;
    CHECK_EQ_INT(mdl_fwd(m, 1), 0);
    size_t zl = 0;
    for (size_t i = 0; i < n; i++) zl += m->y[i] == 0; // unless drop_last
    CHECK(zl > n / 4 && zl < 3 * n / 4);
    m->s.drop_last = 0;
    CHECK_EQ_INT(mdl_fwd(m, 1), 0);
    float *y1 = malloc(n * 4);
    memcpy(y1, m->y, n * 4);
    m->step = 6;
    CHECK_EQ_INT(mdl_fwd(m, 1), 0);
    CHECK(memcmp(y1, m->y, n * 4) != 0);
    m->drop.p = 0;
    CHECK_EQ_INT(mdl_fwd(m, 1), 0);
    size_t z0 = 0; // without dropout nothing is zeroed
    for (size_t i = 0; i < n; i++) z0 += in1[i] == 0;
    CHECK(z0 == 0);
    free(y1);
    mdl_free(m);
}

// ---- state carry ----

// The prediction network's greedy decoding steps with the state carried: T = 6 run as 3 + 3
// with (h0, c0) of the second half the first's (hn, cn) gives the full run's outputs and final
// state bit for bit.
TK_TEST(lstm_state_carry_two_halves_equal_one_run) {
    const int L = 2, T = 6, B = 2, I = 3, H = 5;
    mdl *f = mdl_new(L, T, B, I, H, NULL, 31), *a = mdl_new(L, 3, B, I, H, NULL, 31);
    mdl *b = mdl_new(L, 3, B, I, H, NULL, 31);
    memcpy(a->p, f->p, f->off_x * 4), memcpy(b->p, f->p, f->off_x * 4);
    const size_t half = (size_t)3 * B * I, LBH = (size_t)L * B * H;
    memcpy(a->p + a->off_x, f->p + f->off_x, half * 4);
    memcpy(b->p + b->off_x, f->p + f->off_x + half, half * 4);
    memcpy(a->p + a->off_h0, f->p + f->off_h0, LBH * 4), memcpy(a->p + a->off_c0, f->p + f->off_c0, LBH * 4);
    CHECK_EQ_INT(mdl_fwd(f, 1), 0);
    CHECK_EQ_INT(mdl_fwd(a, 1), 0);
    memcpy(b->p + b->off_h0, a->hn, LBH * 4), memcpy(b->p + b->off_c0, a->cn, LBH * 4);
    CHECK_EQ_INT(mdl_fwd(b, 1), 0);
    const size_t hy = (size_t)3 * B * H;
    CHECK(memcmp(a->y, f->y, hy * 4) == 0);
    CHECK(memcmp(b->y, f->y + hy, hy * 4) == 0);
    CHECK(memcmp(b->hn, f->hn, LBH * 4) == 0);
    CHECK(memcmp(b->cn, f->cn, LBH * 4) == 0);
    // without h0 and c0 the state starts at zero: not the carried run
    CHECK_EQ_INT(mdl_fwd(b, 0), 0);
    CHECK(memcmp(b->y, f->y + hy, hy * 4) != 0);
    mdl_free(f), mdl_free(a), mdl_free(b);
}

// ---- the workload's initialization ----

TK_TEST(lstm_init_as_the_reference) {
    const int I = 6, H = 64;
    float *wih = malloc(4 * H * I * 4), *whh = malloc(4 * H * H * 4), bi[256], bh[256];
    float *w2 = malloc(4 * H * I * 4), *w3 = malloc(4 * H * H * 4), b2[256], b3[256];
    tk_lstm_init_layer(9, 1, I, H, 1.0f, 0.0f, 0.5f, wih, whh, bi, bh);
    const double bound = 0.5 / sqrt(H);
    double s2 = 0, mx = 0;
    int inside = 1;
    for (int i = 0; i < 4 * H * H; i++) {
        inside &= fabs(whh[i]) <= bound;
        s2 += (double)whh[i] * whh[i], mx = fmax(mx, fabs(whh[i]));
    }
    for (int i = 0; i < 4 * H * I; i++) inside &= fabs(wih[i]) <= bound;
    for (int r = 0; r < 4 * H; r++)
        if (r < H || r >= 2 * H) inside &= fabs(bi[r]) <= bound && fabs(bh[r]) <= bound && bh[r] != 0;
    CHECK(inside);
    CHECK(mx > 0.95 * bound);                                          // uniform over the whole range
    CHECK_NEAR(sqrt(s2 / (4 * H * H)), bound / sqrt(3.0), 0.03 * bound); // U(-a, a) has sd a / sqrt 3
    for (int j = H; j < 2 * H; j++) {
        CHECK(bi[j] == 0.5f); // forget_gate_bias 1, times weights_init_scale 0.5
        CHECK(bh[j] == 0.0f); // hidden_hidden_bias_scale 0
    }
    tk_lstm_init_layer(9, 1, I, H, 1.0f, 0.0f, 0.5f, w2, w3, b2, b3);
    CHECK(memcmp(wih, w2, 4 * H * I * 4) == 0 && memcmp(bh, b3, sizeof bh) == 0); // deterministic
    tk_lstm_init_layer(9, 2, I, H, 1.0f, 1.0f, 1.0f, w2, w3, b2, b3);           // another tensor
    CHECK(memcmp(wih, w2, 4 * H * I * 4) != 0);
    CHECK(b2[H] == 1.0f && b3[H] != 0.0f && fabs(b3[H]) <= 2 * bound);
    free(wih), free(whh), free(w2), free(w3);
}

// ---- refusals ----

TK_TEST(lstm_refuses_bad_lengths_and_types) {
    mdl *m = mdl_new(1, 3, 2, 2, 2, (int[]){3, 4}, 41);
    tk_err e = {0};
    CHECK_EQ_INT(tk_lstm_fwd_ref(TK_F32, &m->s, &m->w, m->len, m->p + m->off_x, NULL, NULL, NULL, m->y, NULL, NULL,
                                 m->ws, &e),
                 TK_EINTERNAL);
    CHECK_STR(e.what, "lstm: sequence 1: length 4 (1..3)");
    m->len[1] = 0;
    CHECK_EQ_INT(tk_lstm_bwd_ref(TK_F32, &m->s, &m->w, m->len, m->p + m->off_x, NULL, m->dy, NULL, NULL, NULL, NULL,
                                 NULL, &m->dw, m->ws, &e),
                 TK_EINTERNAL);
    CHECK_STR(e.what, "lstm: sequence 1: length 0 (1..3)");
    m->len[1] = 1;
    CHECK_EQ_INT(tk_lstm_fwd_ref(TK_F16, &m->s, &m->w, m->len, m->p + m->off_x, NULL, NULL, NULL, m->y, NULL, NULL,
                                 m->ws, &e),
                 TK_EINTERNAL);
    tk_lstm_shape bad = m->s;
    bad.L = TK_LSTM_MAX_LAYERS + 1;
    CHECK_EQ_INT(tk_lstm_fwd_ref(TK_F32, &bad, &m->w, m->len, m->p + m->off_x, NULL, NULL, NULL, m->y, NULL, NULL,
                                 m->ws, &e),
                 TK_EINTERNAL);
    CHECK_EQ_INT(mdl_fwd(m, 0), 0);
    mdl_free(m);
}

// ---- driver mode (tests/cli/lstm-oracle.bats) ----

static void print_arr(const char *name, const float *v, size_t n) {
    printf("%s %zu\n", name, n);
    for (size_t i = 0; i < n; i++) printf("%.9g\n", v[i]);
}

static int drive(const char *type, tk_err *e) {
    const tk_dtype t = !strcmp(type, "f32") ? TK_F32 : !strcmp(type, "bf16") ? TK_BF16 : TK_U8;
    if (t == TK_U8) return tk_err_set(e, TK_EUSAGE, "TK_LSTM_DRIVE must be f32 or bf16, not \"%s\"", type);
    int L, T, B, I, H, last;
    float p;
    unsigned long long seed;
    long long step;
    if (scanf("%d %d %d %d %d %f %d %llu %lld", &L, &T, &B, &I, &H, &p, &last, &seed, &step) != 9 || L < 1 ||
        L > TK_LSTM_MAX_LAYERS || T < 1 || T > 64 || B < 1 || B > 16 || I < 1 || I > 64 || H < 1 || H > 64 ||
        !(p >= 0 && p < 1) || (last != 0 && last != 1))
        return tk_err_set(e, TK_EDATA, "stdin: no \"L T B I H p last seed step\" line (L 1..%d, T 1..64, B 1..16, "
                                       "I and H 1..64, p in [0, 1), last 0 or 1)", TK_LSTM_MAX_LAYERS);
    mdl *m = mdl_new(L, T, B, I, H, NULL, 1);
    m->drop.p = p, m->drop.seed = seed, m->step = step, m->s.drop_last = last;
    int rc = 0;
    for (int b = 0; b < B && !rc; b++)
        if (scanf("%d", &m->len[b]) != 1) rc = tk_err_set(e, TK_EDATA, "stdin: length %d of %d missing", b, B);
    const size_t TBH = (size_t)T * B * H, LBH = (size_t)L * B * H;
    float *rest[3] = {m->dy, m->dhn, m->dcn};
    const size_t nrest[3] = {TBH, LBH, LBH};
    for (size_t i = 0; i < m->n && !rc; i++)
        if (scanf("%f", &m->p[i]) != 1) rc = tk_err_set(e, TK_EDATA, "stdin: value %zu of %zu missing", i, m->n);
    for (int q = 0; q < 3 && !rc; q++)
        for (size_t i = 0; i < nrest[q] && !rc; i++)
            if (scanf("%f", &rest[q][i]) != 1) rc = tk_err_set(e, TK_EDATA, "stdin: gradient input %d missing", q);
    // bf16: the tensors in t rounded (and handed over as bf16), the biases and states fp32
    uint16_t *pb = malloc(m->n * 2), *yb = malloc(TBH * 2), *dyb = malloc(TBH * 2);
    uint16_t *dxb = malloc((size_t)T * B * I * 2);
    void *ws = rc ? NULL : calloc(1, tk_lstm_ws_bytes(t, &m->s));
    if (!rc && (!pb || !yb || !dyb || !dxb || !ws)) rc = tk_err_errno(e, ENOMEM, "out of memory");
    tk_lstm_w w = m->w;
    if (!rc && t == TK_BF16) {
        for (size_t i = 0; i < m->n; i++) pb[i] = tk_f32_to_bf16(m->p[i]);
        for (size_t i = 0; i < TBH; i++) dyb[i] = tk_f32_to_bf16(m->dy[i]);
        for (int k = 0; k < L; k++) w.w_ih[k] = pb + m->off_w[k][0], w.w_hh[k] = pb + m->off_w[k][1];
    }
    const int bf = t == TK_BF16;
    if (!rc)
        rc = tk_lstm_fwd_ref(t, &m->s, &w, m->len, bf ? (void *)(pb + m->off_x) : m->p + m->off_x, m->p + m->off_h0,
                             m->p + m->off_c0, &m->drop, bf ? (void *)yb : m->y, m->hn, m->cn, ws, e);
    if (!rc)
        rc = tk_lstm_bwd_ref(t, &m->s, &w, m->len, bf ? (void *)(pb + m->off_x) : m->p + m->off_x, &m->drop,
                             bf ? (void *)dyb : m->dy, m->dhn, m->dcn, bf ? (void *)dxb : m->g + m->off_x,
                             m->g + m->off_h0, m->g + m->off_c0, &m->dw, ws, e);
    if (!rc) {
        if (bf) {
            for (size_t i = 0; i < TBH; i++) m->y[i] = tk_bf16_to_f32(yb[i]);
            for (size_t i = 0; i < (size_t)T * B * I; i++) m->g[m->off_x + i] = tk_bf16_to_f32(dxb[i]);
        }
        print_arr("y", m->y, TBH);
        print_arr("hn", m->hn, LBH);
        print_arr("cn", m->cn, LBH);
        print_arr("dx", m->g + m->off_x, (size_t)T * B * I);
        print_arr("dh0", m->g + m->off_h0, LBH);
        print_arr("dc0", m->g + m->off_c0, LBH);
        static const char *nm[4] = {"dw_ih", "dw_hh", "db_ih", "db_hh"};
        for (int k = 0; k < L; k++)
            for (int q = 0; q < 4; q++) {
                const size_t end = q < 3 ? m->off_w[k][q + 1] : k + 1 < L ? m->off_w[k + 1][0] : m->off_x;
                print_arr(nm[q], m->g + m->off_w[k][q], end - m->off_w[k][q]);
            }
        const uint32_t th = tk_dropout_thresh(p);
        for (int k = 0; p > 0 && k < L - 1 + last; k++) {
            tk_dropout dk = m->drop;
            dk.site += (uint32_t)k;
            printf("mask %zu\n", TBH);
            for (size_t i = 0; i < TBH; i++) printf("%.9g\n", tk_dropout_factor(&dk, th, step, (int64_t)i));
        }
    }
    free(pb), free(yb), free(dyb), free(dxb), free(ws);
    mdl_free(m);
    return rc;
}

__attribute__((constructor(200))) static void drive_mode(void) {
    const char *s = getenv("TK_LSTM_DRIVE");
    if (!s) return;
    tk_err e = {0};
    int rc = drive(s, &e);
    tk_drive_exit("test_lstm", rc, &e);
}
