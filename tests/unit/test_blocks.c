// The shared model blocks (lib/blocks/blocks.h) on the cpu backend against a direct computation
// written here from the definitions (convolution sums, batch norm's formulas, max over windows):
// a small-integer unit whose every value is exact (conv outputs +-2 per channel, so mean 0,
// variance 4 and 1 / sqrt(4) = 1/2 with eps 0), a random fp32 unit with a residual and a strided
// 3x3 convolution (forward, backward, running statistics), the projection shortcut's norm applied
// inside another's pass, the max pool with and without its norm inside, the padded-channel weight
// gradient, and the shapes; rank 3 (the 3D U-Net's): the transposed convolution's three passes
// against direct sums, the padded filters' and channels' weight gradient, the instance norm kind.
#include <math.h>
#include <string.h>

#include "blocks/blocks.h"
#include "instnorm.h"
#include "tk_test.h"
#include "tk_test_cpu.h"

static tk_blk_env cpu_env(void) { return (tk_blk_env){.c = tk_test_cpu(), .t = TK_F32}; }

// ---- the direct computation (double) ----

// x (N, H, W, C), w (K, R, R, C) -> y (N, P, Q, K), square stride and padding.
static void conv_direct(const tk_conv_shape *s, const float *x, const float *w, double *y) {
    for (int n = 0; n < s->N; n++)
        for (int p = 0; p < s->P; p++)
            for (int q = 0; q < s->Q; q++)
                for (int k = 0; k < s->K; k++) {
                    double a = 0;
                    for (int r = 0; r < s->R; r++)
                        for (int t = 0; t < s->S; t++) {
                            int h = p * s->stride - s->pad + r, v = q * s->stride - s->pad + t;
                            if (h < 0 || h >= s->H || v < 0 || v >= s->W) continue;
                            for (int c = 0; c < s->C; c++)
                                a += (double)x[((n * s->H + h) * s->W + v) * s->C + c] * w[((k * s->R + r) * s->S + t) * s->C + c];
                        }
                    y[((n * s->P + p) * s->Q + q) * s->K + k] = a;
                }
}

// The input and weight gradients of conv_direct from dy.
static void conv_bwd_direct(const tk_conv_shape *s, const float *x, const float *w, const double *dy, double *dx,
                            double *dw) {
    memset(dx, 0, sizeof *dx * (size_t)tk_conv_x_numel(s));
    memset(dw, 0, sizeof *dw * (size_t)tk_conv_w_numel(s));
    for (int n = 0; n < s->N; n++)
        for (int p = 0; p < s->P; p++)
            for (int q = 0; q < s->Q; q++)
                for (int k = 0; k < s->K; k++) {
                    const double g = dy[((n * s->P + p) * s->Q + q) * s->K + k];
                    for (int r = 0; r < s->R; r++)
                        for (int t = 0; t < s->S; t++) {
                            int h = p * s->stride - s->pad + r, v = q * s->stride - s->pad + t;
                            if (h < 0 || h >= s->H || v < 0 || v >= s->W) continue;
                            for (int c = 0; c < s->C; c++) {
                                const size_t xi = ((size_t)(n * s->H + h) * s->W + v) * s->C + c,
                                             wi = ((size_t)(k * s->R + r) * s->S + t) * s->C + c;
                                dx[xi] += g * w[wi];
                                dw[wi] += g * x[xi];
                            }
                        }
                }
}

// Batch norm's training forward over M rows of C: z = relu?(gamma (y - mean) invstd + beta + res).
static void bn_direct(const double *y, int64_t M, int C, const float *gamma, const float *beta, const float *res,
                      int relu, double eps, double *mean, double *var, double *z) {
    for (int c = 0; c < C; c++) {
        double s = 0, v = 0;
        for (int64_t i = 0; i < M; i++) s += y[i * C + c];
        mean[c] = s / (double)M;
        for (int64_t i = 0; i < M; i++) v += (y[i * C + c] - mean[c]) * (y[i * C + c] - mean[c]);
        var[c] = v / (double)M;
        const double is = 1 / sqrt(var[c] + eps);
        for (int64_t i = 0; i < M; i++) {
            double o = gamma[c] * (y[i * C + c] - mean[c]) * is + beta[c] + (res ? res[i * C + c] : 0);
            z[i * C + c] = relu && o < 0 ? 0 : o;
        }
    }
}

// Its backward from dz (z: the forward's output, its ReLU's mask z > 0): dy, dgamma, dbeta and the
// gradient at the add, dr.
static void bn_bwd_direct(const double *y, const double *z, const double *dz, int64_t M, int C, const float *gamma,
                          int relu, double eps, double *dy, double *dgamma, double *dbeta, double *dr) {
    for (int c = 0; c < C; c++) {
        double s = 0, v = 0;
        for (int64_t i = 0; i < M; i++) s += y[i * C + c];
        const double mean = s / (double)M;
        for (int64_t i = 0; i < M; i++) v += (y[i * C + c] - mean) * (y[i * C + c] - mean);
        const double is = 1 / sqrt(v / (double)M + eps);
        double db = 0, dg = 0;
        for (int64_t i = 0; i < M; i++) {
            const double g = relu && !(z[i * C + c] > 0) ? 0 : dz[i * C + c];
            dr[i * C + c] = g;
            db += g, dg += g * (y[i * C + c] - mean) * is;
        }
        dgamma[c] = dg, dbeta[c] = db;
        for (int64_t i = 0; i < M; i++)
            dy[i * C + c] = gamma[c] * is * (dr[i * C + c] - db / (double)M - (y[i * C + c] - mean) * is * dg / (double)M);
    }
}

// ||got - want|| / ||want||
static double rel_err(const float *got, const double *want, size_t n) {
    double d = 0, w = 0;
    for (size_t i = 0; i < n; i++) d += (got[i] - want[i]) * (got[i] - want[i]), w += want[i] * want[i];
    return sqrt(d / (w > 0 ? w : 1));
}

static int same(const float *got, const double *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((double)got[i] != want[i]) return 0;
    return 1;
}

// A unit's parameters and buffers in host memory (the cpu backend's device memory).
typedef struct {
    float *w, *dw, *gamma, *beta, *dgamma, *dbeta, *rmean, *rvar, *smean, *sinvstd, *y, *z, *sums;
} unit_mem;

static void unit_bind(tk_blk_unit *u, unit_mem *b) {
    const size_t C = (size_t)u->n.C, ny = (size_t)tk_blk_conv_y_numel(&u->c), nw = (size_t)tk_blk_conv_w_numel(&u->c);
    float **all[] = {&b->gamma, &b->beta, &b->dgamma, &b->dbeta, &b->rmean, &b->rvar, &b->smean, &b->sinvstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) *all[i] = calloc(C, sizeof(float));
    b->w = calloc(nw, sizeof(float)), b->dw = calloc(nw, sizeof(float));
    b->y = calloc(ny, sizeof(float)), b->z = calloc(ny, sizeof(float)), b->sums = calloc(2 * C, sizeof(float));
    u->c.w = b->w, u->c.dw = b->dw, u->c.wc = b->w, u->c.sums = b->sums;
    u->n.gamma = b->gamma, u->n.beta = b->beta, u->n.dgamma = b->dgamma, u->n.dbeta = b->dbeta;
    u->n.rmean = b->rmean, u->n.rvar = b->rvar, u->n.smean = b->smean, u->n.sinvstd = b->sinvstd;
    u->y = b->y, u->z = b->z;
}

static void unit_free(unit_mem *b) {
    float *all[] = {b->w, b->dw, b->gamma, b->beta, b->dgamma, b->dbeta, b->rmean, b->rvar, b->smean, b->sinvstd,
                    b->y, b->z, b->sums};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

// ---- units ----

// 1x1 convolution, w = [[1, 1], [1, -1]], over x rows (2, 0), (0, -2), (-2, 0), (0, 2), twice: y
// rows (2, 2), (-2, 2), (-2, -2), (2, -2), each channel +-2 four times: mean 0, variance 4, invstd
// 1/2 (eps 0). gamma (3, 1), beta (1, -1), ReLU: z = relu(3 (+-1) + 1, (+-1) - 1). Every value of
// the forward and the backward (M = 8) is a small dyadic rational: exact.
TK_TEST(unit_small_integers_exact) {
    tk_err e = {0};
    tk_blk_env env = cpu_env();
    tk_blk_unit u = {0};
    CHECK_EQ_INT(tk_blk_unit_init2d(&u, 2, 2, 2, 2, 2, 1, 1, 0, 1, TK_BLK_BATCH_NORM, 0.0, 0.5, &e), 0);
    CHECK(u.c.rank == 2 && u.n.C == 2 && u.n.N == 2 && u.n.spatial == 4 && tk_blk_conv_rows(&u.c) == 8);
    unit_mem b;
    unit_bind(&u, &b);
    const float w[4] = {1, 1, 1, -1}, pat[8] = {2, 0, 0, -2, -2, 0, 0, 2};
    float x[16], dz[16], dx[16], dn[16];
    for (int i = 0; i < 16; i++) x[i] = pat[i % 8];
    memcpy(b.w, w, sizeof w);
    b.gamma[0] = 3, b.gamma[1] = 1, b.beta[0] = 1, b.beta[1] = -1, b.rvar[0] = b.rvar[1] = 1;
    CHECK_EQ_INT(tk_blk_unit_fwd(&env, &u, x, NULL, 1, &e), 0);
    double y[16], z[16], mean[2], var[2];
    conv_direct(&u.c.s, x, w, y);
    CHECK(same(b.y, y, 16));
    bn_direct(y, 8, 2, b.gamma, b.beta, NULL, 1, 0.0, mean, var, z);
    CHECK(mean[0] == 0 && var[0] == 4 && mean[1] == 0 && var[1] == 4);
    CHECK(same(b.z, z, 16));
    CHECK(b.z[0] == 4 && b.z[1] == 0 && b.z[2] == 0 && b.z[3] == 0 && b.z[6] == 4);
    CHECK(b.smean[0] == 0 && b.sinvstd[0] == 0.5f);
    // the running statistics, momentum 1/2: mean 0, variance (1 + 4 * 8/7) / 2
    CHECK(b.rmean[0] == 0 && fabs(b.rvar[0] - (1 + 4.0 * 8 / 7) / 2) < 1e-6);
    // backward: dz = 1, 2, ... (integers)
    for (int i = 0; i < 16; i++) dz[i] = (float)(i % 5) - 2;
    CHECK_EQ_INT(tk_blk_unit_bwd(&env, &u, x, dz, NULL, dn, NULL, dx, &e), 0);
    double dzd[16], dnd[16], dr[16], dg[2], db[2], dxd[16], dwd[4];
    for (int i = 0; i < 16; i++) dzd[i] = dz[i];
    bn_bwd_direct(y, z, dzd, 8, 2, b.gamma, 1, 0.0, dnd, dg, db, dr);
    conv_bwd_direct(&u.c.s, x, w, dnd, dxd, dwd);
    CHECK(same(dn, dnd, 16) && same(b.dgamma, dg, 2) && same(b.dbeta, db, 2));
    CHECK(same(dx, dxd, 16) && same(b.dw, dwd, 4));
    // eval: the running statistics
    CHECK_EQ_INT(tk_blk_unit_fwd(&env, &u, x, NULL, 0, &e), 0);
    double ze[16];
    for (int i = 0; i < 16; i++) {
        const int c = i % 2;
        const double o = b.gamma[c] * (y[i] - b.rmean[c]) / sqrt((double)b.rvar[c]) + b.beta[c];
        ze[i] = o > 0 ? o : 0;
    }
    CHECK(rel_err(b.z, ze, 16) < 1e-6);
    unit_free(&b);
}

// A 3x3 stride-2 pad-1 convolution of random fp32 inputs, BN, the residual res and ReLU, forward and
// backward (the residual's gradient too), against the direct computation in double.
TK_TEST(unit_random_fp32_residual) {
    tk_err e = {0};
    tk_blk_env env = cpu_env();
    tk_blk_unit u = {0};
    const int N = 2, H = 7, C = 3, K = 4;
    const double eps = 1e-5;
    CHECK_EQ_INT(tk_blk_unit_init2d(&u, N, H, H, C, K, 3, 2, 1, 1, TK_BLK_BATCH_NORM, eps, 0.1, &e), 0);
    CHECK(u.c.s.P == 4 && u.c.s.Q == 4 && u.n.spatial == 16);
    int64_t ws[5];
    CHECK_EQ_INT(tk_blk_conv_wshape(&u.c, ws), 4);
    CHECK(ws[0] == K && ws[1] == 3 && ws[2] == 3 && ws[3] == C);
    unit_mem b;
    unit_bind(&u, &b);
    const size_t nx = (size_t)tk_blk_conv_x_numel(&u.c), ny = (size_t)tk_blk_conv_y_numel(&u.c), nw = 4 * 9 * 3;
    const int64_t M = (int64_t)ny / K;
    float *x = malloc(nx * 4), *res = malloc(ny * 4), *dz = malloc(ny * 4), *dz2 = malloc(ny * 4), *dn = malloc(ny * 4),
          *dres = malloc(ny * 4), *dx = malloc(nx * 4);
    tk_test_fill(x, nx, 0xb10c, 1, -1, 1);
    tk_test_fill(b.w, nw, 0xb10c, 2, -0.5f, 0.5f);
    tk_test_fill(res, ny, 0xb10c, 3, -1, 1);
    tk_test_fill(dz, ny, 0xb10c, 4, -1, 1);
    tk_test_fill(dz2, ny, 0xb10c, 5, -1, 1);
    tk_test_fill(b.gamma, K, 0xb10c, 6, 0.5f, 1.5f);
    tk_test_fill(b.beta, K, 0xb10c, 7, -0.5f, 0.5f);
    float rm0[4], rv0[4];
    tk_test_fill(rm0, K, 0xb10c, 8, -0.1f, 0.1f);
    tk_test_fill(rv0, K, 0xb10c, 9, 0.5f, 1.5f);
    memcpy(b.rmean, rm0, sizeof rm0), memcpy(b.rvar, rv0, sizeof rv0);
    CHECK_EQ_INT(tk_blk_unit_fwd(&env, &u, x, res, 1, &e), 0);
    double *y = malloc(ny * 8), *z = malloc(ny * 8), mean[4], var[4];
    conv_direct(&u.c.s, x, b.w, y);
    bn_direct(y, M, K, b.gamma, b.beta, res, 1, eps, mean, var, z);
    printf("# forward: y %.2e, z %.2e\n", rel_err(b.y, y, ny), rel_err(b.z, z, ny));
    CHECK(rel_err(b.y, y, ny) < 1e-6 && rel_err(b.z, z, ny) < 1e-5);
    for (int c = 0; c < K; c++) {
        CHECK_NEAR(b.rmean[c], 0.9 * rm0[c] + 0.1 * mean[c], 1e-6);
        CHECK_NEAR(b.rvar[c], 0.9 * rv0[c] + 0.1 * var[c] * (double)M / (double)(M - 1), 1e-6);
    }
    // backward through z (the ReLU after the add: its mask from z), dz + dz2
    CHECK_EQ_INT(tk_blk_unit_bwd(&env, &u, x, dz, dz2, dn, dres, dx, &e), 0);
    double *dzd = malloc(ny * 8), *dnd = malloc(ny * 8), *drd = malloc(ny * 8), *dxd = malloc(nx * 8),
           *dwd = malloc(nw * 8), dg[4], db[4];
    for (size_t i = 0; i < ny; i++) dzd[i] = (double)dz[i] + dz2[i];
    bn_bwd_direct(y, z, dzd, M, K, b.gamma, 1, eps, dnd, dg, db, drd);
    conv_bwd_direct(&u.c.s, x, b.w, dnd, dxd, dwd);
    printf("# backward: dn %.2e, dres %.2e, dx %.2e, dw %.2e, dgamma %.2e, dbeta %.2e\n", rel_err(dn, dnd, ny),
           rel_err(dres, drd, ny), rel_err(dx, dxd, nx), rel_err(b.dw, dwd, nw), rel_err(b.dgamma, dg, K),
           rel_err(b.dbeta, db, K));
    CHECK(rel_err(dn, dnd, ny) < 1e-5 && rel_err(dres, drd, ny) < 1e-6 && rel_err(dx, dxd, nx) < 1e-5);
    CHECK(rel_err(b.dw, dwd, nw) < 1e-5 && rel_err(b.dgamma, dg, K) < 1e-5 && rel_err(b.dbeta, db, K) < 1e-6);
    free(x), free(res), free(dz), free(dz2), free(dn), free(dres), free(dx);
    free(y), free(z), free(dzd), free(dnd), free(drd), free(dxd), free(dwd);
    unit_free(&b);
}

// A projection shortcut's norm applied inside the last unit's pass gives what writing its output
// and adding it does; the statistics-only forward (y NULL) makes the same statistics.
TK_TEST(norm_res_norm_matches_written_residual) {
    tk_err e = {0};
    tk_blk_env env = cpu_env();
    tk_blk_unit a = {0}, p = {0};
    CHECK_EQ_INT(tk_blk_unit_init2d(&a, 2, 4, 4, 3, 8, 1, 1, 0, 1, TK_BLK_BATCH_NORM, 1e-5, 0.1, &e), 0);
    CHECK_EQ_INT(tk_blk_unit_init2d(&p, 2, 4, 4, 3, 8, 1, 1, 0, 0, TK_BLK_BATCH_NORM, 1e-5, 0.1, &e), 0);
    unit_mem ba, bp;
    unit_bind(&a, &ba), unit_bind(&p, &bp);
    const size_t ny = 2 * 16 * 8;
    float *x = malloc(ny * 4), *r = malloc(ny * 4), *z1 = malloc(ny * 4);
    tk_test_fill(x, ny, 0x5e5, 1, -2, 2);
    tk_test_fill(r, ny, 0x5e5, 2, -2, 2);
    for (int c = 0; c < 8; c++) ba.gamma[c] = bp.gamma[c] = 1 + 0.1f * c, ba.beta[c] = 0.1f, bp.beta[c] = -0.2f;
    // written: p's output, then a's with it as the residual
    CHECK_EQ_INT(tk_blk_norm_fwd(&env, &p.n, NULL, r, NULL, 0, bp.z, NULL, 1, &e), 0);
    CHECK_EQ_INT(tk_blk_norm_fwd(&env, &a.n, NULL, x, bp.z, 1, z1, NULL, 1, &e), 0);
    float pm[8], pv[8];
    memcpy(pm, bp.smean, sizeof pm), memcpy(pv, bp.sinvstd, sizeof pv);
    // fused: p's statistics alone, its apply inside a's pass
    memset(bp.smean, 0, 32), memset(bp.sinvstd, 0, 32);
    CHECK_EQ_INT(tk_blk_norm_fwd(&env, &p.n, NULL, r, NULL, 0, NULL, NULL, 1, &e), 0);
    CHECK(memcmp(pm, bp.smean, sizeof pm) == 0 && memcmp(pv, bp.sinvstd, sizeof pv) == 0);
    CHECK_EQ_INT(tk_blk_norm_fwd_res_norm(&env, &a.n, x, r, &p.n, 1, ba.z, NULL, &e), 0);
    CHECK(memcmp(z1, ba.z, ny * 4) == 0);
    free(x), free(r), free(z1);
    unit_free(&ba), unit_free(&bp);
}

// ---- max pooling ----

// 3x3/2 pad 1 (ResNet's stem) against the window maxima; with the norm inside it equals pooling
// the norm's written output.
TK_TEST(maxpool_direct_and_with_norm) {
    tk_err e = {0};
    tk_blk_env env = cpu_env();
    tk_blk_pool p;
    const int N = 2, H = 6, C = 3;
    CHECK_EQ_INT(tk_blk_pool_init2d(&p, N, H, H, C, 3, 2, 1, &e), 0);
    CHECK(p.P == 3 && p.Q == 3 && tk_blk_pool_y_numel(&p) == N * 9 * C);
    const size_t nx = (size_t)N * H * H * C, ny = (size_t)tk_blk_pool_y_numel(&p);
    float *x = malloc(nx * 4), *z = malloc(nx * 4), *y = malloc(ny * 4), *y2 = malloc(ny * 4), *dy = malloc(ny * 4),
          *dx = malloc(nx * 4);
    uint8_t *idx = malloc(ny), *idx2 = malloc(ny);
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 37) % 23) - 11; // small integers, ties included
    CHECK_EQ_INT(tk_blk_maxpool_fwd(&env, &p, x, NULL, y, idx, &e), 0);
    int ok = 1;
    for (int n = 0; n < N; n++)
        for (int q0 = 0; q0 < 3; q0++)
            for (int q1 = 0; q1 < 3; q1++)
                for (int c = 0; c < C; c++) {
                    float m = -INFINITY;
                    for (int h = q0 * 2 - 1; h <= q0 * 2 + 1; h++)
                        for (int w = q1 * 2 - 1; w <= q1 * 2 + 1; w++)
                            if (h >= 0 && h < H && w >= 0 && w < H && x[((n * H + h) * H + w) * C + c] > m)
                                m = x[((n * H + h) * H + w) * C + c];
                    ok &= y[((n * 3 + q0) * 3 + q1) * C + c] == m;
                }
    CHECK(ok);
    // the gradient lands on the maxima: its sum is dy's
    for (size_t i = 0; i < ny; i++) dy[i] = (float)(i % 3) + 1;
    CHECK_EQ_INT(tk_blk_maxpool_bwd(&env, &p, dy, NULL, idx, dx, &e), 0);
    double sx = 0, sy = 0;
    for (size_t i = 0; i < nx; i++) sx += dx[i];
    for (size_t i = 0; i < ny; i++) sy += dy[i];
    CHECK(sx == sy);
    // with a norm (+ ReLU) inside
    tk_blk_norm bn;
    tk_blk_norm_init(&bn, TK_BLK_BATCH_NORM, C, N, H * H, 1e-5, 0.1);
    float g[3] = {1, 2, 0.5f}, be[3] = {0, -0.5f, 0.25f}, rm[3] = {0}, rv[3] = {1, 1, 1}, sm[3], si[3];
    bn.gamma = g, bn.beta = be, bn.rmean = rm, bn.rvar = rv, bn.smean = sm, bn.sinvstd = si;
    CHECK_EQ_INT(tk_blk_norm_fwd(&env, &bn, NULL, x, NULL, 1, z, NULL, 1, &e), 0);
    CHECK_EQ_INT(tk_blk_maxpool_fwd(&env, &p, z, NULL, y, idx, &e), 0);
    CHECK_EQ_INT(tk_blk_maxpool_fwd(&env, &p, x, &bn, y2, idx2, &e), 0);
    CHECK(memcmp(y, y2, ny * 4) == 0);
    // a window larger than the padded input is refused
    CHECK_EQ_INT(tk_blk_pool_init2d(&p, 1, 1, 1, 1, 5, 1, 1, &e), TK_EINTERNAL);
    free(x), free(z), free(y), free(y2), free(dy), free(dx), free(idx), free(idx2);
}

// ---- convolutions: padded channels, casts, initialization ----

// A convolution whose compute shape pads 3 channels to 4 (the zero channel's weights 0): its
// weight gradient into the 3-channel master through env->wbuf, the padding's column dropped.
TK_TEST(conv_padded_channels_wgrad) {
    tk_err e = {0};
    tk_blk_env env = cpu_env();
    tk_blk_conv cv = {0};
    CHECK_EQ_INT(tk_blk_conv_init2d(&cv, 1, 4, 4, 4, 2, 3, 3, 1, 1, &e), 0);
    cv.cw = 3;
    int64_t ws[5];
    tk_blk_conv_wshape(&cv, ws);
    CHECK(ws[0] == 2 && ws[1] == 3 && ws[2] == 3 && ws[3] == 3);
    float x[64], dy[32], w[72] = {0}, dw[54], buf[72];
    for (int i = 0; i < 64; i++) x[i] = i % 4 == 3 ? 0 : (float)(i % 7) - 3; // channel 3: the padding
    for (int i = 0; i < 32; i++) dy[i] = (float)(i % 5) - 2;
    cv.w = w, cv.dw = dw, cv.wc = w;
    env.wbuf = buf;
    CHECK_EQ_INT(tk_blk_conv_wgrad(&env, &cv, x, dy, &e), 0);
    double dxd[64], dwd[72], dyd[32];
    for (int i = 0; i < 32; i++) dyd[i] = dy[i];
    conv_bwd_direct(&cv.s, x, w, dyd, dxd, dwd);
    int ok = 1;
    for (int k = 0; k < 2 * 9; k++)
        for (int c = 0; c < 3; c++) ok &= dw[k * 3 + c] == dwd[k * 4 + c];
    CHECK(ok);
    // no dwt: no cast span
    tk_cast_span sp;
    CHECK_EQ_INT(tk_blk_conv_cast_span(&cv, &sp), 0);
    cv.dwt = buf;
    CHECK_EQ_INT(tk_blk_conv_cast_span(&cv, &sp), 1);
    CHECK(sp.src == buf && sp.dst == dw && sp.n == 72);
}

// The running statistics' reset, and the fills' ranges and determinism.
TK_TEST(norm_reset_and_fills) {
    tk_err e = {0};
    tk_blk_norm n;
    tk_blk_norm_init(&n, TK_BLK_BATCH_NORM, 5, 2, 9, 1e-5, 0.1);
    CHECK(tk_blk_norm_stat_bytes(&n) == 20 && tk_blk_norm_ws_bytes(TK_BACKEND_CPU, &n) == 0);
    float rm[5] = {1, 2, 3, 4, 5}, rv[5] = {9, 9, 9, 9, 9}, h[10];
    n.rmean = rm, n.rvar = rv;
    CHECK_EQ_INT(tk_blk_norm_reset(tk_test_cpu(), &n, h, &e), 0);
    int ok = 1;
    for (int i = 0; i < 5; i++) ok &= rm[i] == 0 && rv[i] == 1;
    CHECK(ok);
    float a[4096], b[4096];
    tk_blk_fill_uniform(a, 4096, 0.25, 7, 3);
    tk_blk_fill_uniform(b, 4096, 0.25, 7, 3);
    double s = 0, s2 = 0;
    for (int i = 0; i < 4096; i++) ok &= a[i] >= -0.25f && a[i] <= 0.25f && a[i] == b[i];
    CHECK(ok);
    tk_blk_fill_normal(a, 4096, 2.0, 7, 4);
    for (int i = 0; i < 4096; i++) s += a[i], s2 += (double)a[i] * a[i];
    printf("# normal(0, 2): mean %.3f, sd %.3f\n", s / 4096, sqrt(s2 / 4096));
    CHECK(fabs(s / 4096) < 0.15 && fabs(sqrt(s2 / 4096) - 2) < 0.15);
}

// ---- rank 3 (the 3D U-Net's) ----

// A transposed 2x2x2 stride-2 convolution (PyTorch's ConvTranspose3d: each input voxel spreads
// over its own 2x2x2 output block) against the direct sums, all three passes; its shapes.
TK_TEST(conv3d_transposed_direct) {
    tk_err e = {0};
    tk_blk_env env = cpu_env();
    tk_blk_conv cv = {0};
    enum { N = 2, I = 2, O = 4, CI = 3, CO = 2 };
    CHECK_EQ_INT(tk_blk_conv_init3d_transposed(&cv, N, I, I, I, CI, CO, 2, 2, 0, &e), 0);
    int64_t ws[5];
    CHECK_EQ_INT(tk_blk_conv_wshape(&cv, ws), 5);
    CHECK(ws[0] == CI && ws[1] == 2 && ws[2] == 2 && ws[3] == 2 && ws[4] == CO);
    CHECK(tk_blk_conv_x_numel(&cv) == N * I * I * I * CI && tk_blk_conv_y_numel(&cv) == N * O * O * O * CO);
    CHECK(tk_blk_conv_w_numel(&cv) == CI * 8 * CO && tk_blk_conv_out(&cv) == CO && tk_blk_conv_rows(&cv) == N * 64);
    float x[N * 8 * CI], w[CI * 8 * CO], y[N * 64 * CO], dy[N * 64 * CO], dx[N * 8 * CI], dw[CI * 8 * CO];
    tk_test_fill(x, sizeof x / 4, 31, 1, -1, 1), tk_test_fill(w, sizeof w / 4, 31, 2, -1, 1);
    tk_test_fill(dy, sizeof dy / 4, 31, 3, -1, 1);
    cv.w = w, cv.wc = w, cv.dw = dw;
    CHECK_EQ_INT(tk_blk_conv_fwd(&env, &cv, x, y, 1, &e), 0);
    CHECK_EQ_INT(tk_blk_conv_bwd(&env, &cv, x, dy, dx, &e), 0);
    double yd[N * 64 * CO] = {0}, dxd[N * 8 * CI] = {0}, dwd[CI * 8 * CO] = {0};
    for (int n = 0; n < N; n++)
        for (int v = 0; v < 8; v++) // input voxel (d, h, w)
            for (int t = 0; t < 8; t++) { // tap (t, r, s)
                const int d = v / 4, h = v / 2 % 2, ww = v % 2, o = ((2 * d + t / 4) * O + 2 * h + t / 2 % 2) * O + 2 * ww + t % 2;
                for (int ci = 0; ci < CI; ci++)
                    for (int co = 0; co < CO; co++) {
                        const double xv = x[(n * 8 + v) * CI + ci], wv = w[(ci * 8 + t) * CO + co],
                                     g = dy[(n * 64 + o) * CO + co];
                        yd[(n * 64 + o) * CO + co] += xv * wv;
                        dxd[(n * 8 + v) * CI + ci] += g * wv;
                        dwd[(ci * 8 + t) * CO + co] += g * xv;
                    }
            }
    double ey = 0, ex = 0, ew = 0;
    for (int i = 0; i < N * 64 * CO; i++) ey = fmax(ey, fabs(y[i] - yd[i]));
    for (int i = 0; i < N * 8 * CI; i++) ex = fmax(ex, fabs(dx[i] - dxd[i]));
    for (int i = 0; i < CI * 8 * CO; i++) ew = fmax(ew, fabs(dw[i] - dwd[i]));
    printf("# transposed: y %.1e, dx %.1e, dw %.1e\n", ey, ex, ew);
    CHECK(ey < 1e-5 && ex < 1e-5 && ew < 1e-5);
}

// A 1x1x1 convolution whose compute shape pads both its filters (kw: 3 of 4) and its input
// channels (cw: 1 of 2): the master gradient holds the first 3 filters' first channel.
TK_TEST(conv3d_padded_filters_and_channels_wgrad) {
    tk_err e = {0};
    tk_blk_env env = cpu_env();
    tk_blk_conv cv = {0};
    CHECK_EQ_INT(tk_blk_conv_init3d(&cv, 1, 2, 2, 2, 2, 4, 1, 1, 0, &e), 0);
    cv.kw = 3, cv.cw = 1;
    int64_t ws[5];
    CHECK_EQ_INT(tk_blk_conv_wshape(&cv, ws), 5);
    CHECK(ws[0] == 3 && ws[1] == 1 && ws[4] == 1);
    float x[16], dy[32], dw[3], buf[8];
    tk_test_fill(x, 16, 32, 1, -1, 1), tk_test_fill(dy, 32, 32, 2, -1, 1);
    cv.dw = dw;
    env.wbuf = buf;
    CHECK_EQ_INT(tk_blk_conv_wgrad(&env, &cv, x, dy, &e), 0);
    int ok = 1;
    for (int k = 0; k < 3; k++) {
        double s = 0;
        for (int v = 0; v < 8; v++) s += (double)dy[v * 4 + k] * x[v * 2];
        ok &= fabs(dw[k] - s) < 1e-5;
    }
    CHECK(ok);
}

// The instance norm kind: statistics per sample and channel (N C), its forward and backward as
// kernels/instnorm.h's reference, and what it refuses (a residual, a mask).
TK_TEST(instance_norm_kind) {
    tk_err e = {0};
    tk_blk_env env = cpu_env();
    enum { N = 2, S = 10, C = 3 };
    tk_blk_norm n;
    tk_blk_norm_init(&n, TK_BLK_INSTANCE_NORM, C, N, S, 1e-5, 0);
    CHECK(tk_blk_norm_stat_bytes(&n) == N * C * 4);
    float x[N * S * C], y[N * S * C], dy[N * S * C], dx[N * S * C], g[C] = {1, 0.5f, 2}, b[C] = {0, 0.1f, -0.2f};
    float sm[N * C], si[N * C], dg[C], db[C], rm[N * C], ri[N * C], ry[N * S * C], rdx[N * S * C], rdg[C], rdb[C];
    tk_test_fill(x, sizeof x / 4, 33, 1, -1, 3), tk_test_fill(dy, sizeof dy / 4, 33, 2, -1, 1);
    n.gamma = g, n.beta = b, n.dgamma = dg, n.dbeta = db, n.smean = sm, n.sinvstd = si;
    CHECK_EQ_INT(tk_blk_norm_fwd(&env, &n, NULL, x, NULL, 1, y, NULL, 1, &e), 0);
    CHECK_EQ_INT(tk_blk_norm_bwd(&env, &n, x, y, NULL, 1, dy, NULL, dx, NULL, &e), 0);
    CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F32, x, N, S, C, g, b, 1, 1e-5f, rm, ri, ry, &e), 0);
    CHECK_EQ_INT(tk_instnorm_bwd_ref(TK_F32, x, ry, dy, NULL, N, S, C, g, rm, ri, rdx, rdg, rdb, &e), 0);
    CHECK(memcmp(y, ry, sizeof y) == 0 && memcmp(sm, rm, sizeof sm) == 0 && memcmp(si, ri, sizeof si) == 0);
    CHECK(memcmp(dx, rdx, sizeof dx) == 0 && memcmp(dg, rdg, sizeof dg) == 0 && memcmp(db, rdb, sizeof db) == 0);
    CHECK_EQ_INT(tk_blk_norm_fwd(&env, &n, NULL, x, x, 1, y, NULL, 1, &e), TK_EINTERNAL);
    uint8_t mask[8];
    CHECK_EQ_INT(tk_blk_norm_bwd(&env, &n, x, y, mask, 1, dy, NULL, dx, NULL, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_blk_norm_bwd(&env, &n, x, NULL, NULL, 1, dy, NULL, dx, NULL, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_blk_norm_reset(tk_test_cpu(), &n, rm, &e), 0); // (nothing to reset)
}

// ---- weight gradients handed on as the backward completes them ----

// What a report saw: its offset, and whether every float from it on was cast and none before.
typedef struct {
    const float *g, *src;
    int n, calls;
    size_t off[8];
    int cast_ok[8];
} reports;

static int record(void *arg, size_t off, tk_err *e) {
    reports *r = arg;
    int ok = 1;
    for (int i = 0; i < r->n; i++) ok &= (size_t)i >= off ? r->g[i] == r->src[i] : r->g[i] == 0;
    if (r->calls < 8) r->off[r->calls] = off, r->cast_ok[r->calls] = ok;
    r->calls++;
    (void)e;
    return 0;
}

// A report casts the spans not cast yet that start at or after its offset (whatever their order
// in the list), then reports the offset; a report not below the last does nothing; the end casts
// the rest and reports 0. With no one to report to, nothing is cast before the end, which casts
// every span (more than one launch's TK_CAST_MANY).
TK_TEST(grads_reported_after_their_casts) {
    tk_err e = {0};
    const tk_blk_env env = cpu_env();
    enum { N = 40, M = TK_CAST_MANY + 6 };
    float g[M] = {0}, src[M];
    for (int i = 0; i < M; i++) src[i] = (float)(i + 1);
    const tk_cast_span sp[4] = {{src + 30, g + 30, 10}, {src, g, 10}, {src + 20, g + 20, 10}, {src + 10, g + 10, 10}};
    reports r = {.g = g, .src = src, .n = N};
    tk_blk_grads G = {.ready = record, .arg = &r};
    tk_blk_grads_begin(&G, g, N, sp, 4);
    CHECK_EQ_INT(tk_blk_grads_ready(&env, &G, g + 30, &e), 0);
    CHECK_EQ_INT(tk_blk_grads_ready(&env, &G, g + 10, &e), 0); // (two spans, listed apart)
    CHECK_EQ_INT(tk_blk_grads_ready(&env, &G, g + 20, &e), 0); // (reported already)
    CHECK_EQ_INT(tk_blk_grads_end(&env, &G, &e), 0);
    CHECK_EQ_INT(r.calls, 3);
    CHECK(r.off[0] == 30 && r.off[1] == 10 && r.off[2] == 0);
    CHECK(r.cast_ok[0] && r.cast_ok[1] && r.cast_ok[2]);
    // a second backward: everything again
    memset(g, 0, sizeof g);
    tk_blk_grads_begin(&G, g, N, sp, 4);
    CHECK_EQ_INT(tk_blk_grads_end(&env, &G, &e), 0);
    CHECK(r.calls == 4 && r.off[3] == 0 && r.cast_ok[3]);
    // nobody listening: one cast of all at the end (M spans of one float: two launches)
    tk_cast_span one[M];
    for (int i = 0; i < M; i++) one[i] = (tk_cast_span){src + i, g + i, 1};
    memset(g, 0, sizeof g);
    tk_blk_grads Q = {0};
    tk_blk_grads_begin(&Q, g, M, one, M);
    CHECK_EQ_INT(tk_blk_grads_ready(&env, &Q, g + 3, &e), 0);
    CHECK(g[M - 1] == 0);
    CHECK_EQ_INT(tk_blk_grads_end(&env, &Q, &e), 0);
    CHECK(memcmp(g, src, sizeof g) == 0);
}
