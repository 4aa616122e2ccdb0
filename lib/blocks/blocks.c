// Shared model blocks (blocks.h): convolutions, norms, units and max pooling over kernels/ and
// cuDNN's plans.
#include "blocks/blocks.h"

#include "core/philox.h"
#include "gpu/cudnn_conv.h"
#include "instnorm.h"
#include "pool.h"

// ---- convolution ----

int tk_blk_conv_init2d(tk_blk_conv *cv, int N, int H, int W, int C, int K, int R, int S, int stride, int pad,
                       tk_err *e) {
    cv->rank = 2, cv->transposed = 0, cv->kw = 0;
    return tk_conv_shape_init(&cv->s, N, H, W, C, K, R, S, stride, pad, e);
}

int tk_blk_conv_init3d(tk_blk_conv *cv, int N, int D, int H, int W, int C, int K, int k, int stride, int pad,
                       tk_err *e) {
    cv->rank = 3, cv->transposed = 0, cv->kw = 0;
    return tk_conv3d_shape_init(&cv->s3, N, D, H, W, C, K, k, stride, pad, e);
}

int tk_blk_conv_init3d_transposed(tk_blk_conv *cv, int N, int Din, int Hin, int Win, int Cin, int Cout, int k,
                                  int stride, int pad, tk_err *e) {
    cv->rank = 3, cv->transposed = 1, cv->kw = 0;
    return tk_conv3d_shape_transposed(&cv->s3, N, Din, Hin, Win, Cin, Cout, k, stride, pad, e);
}

int tk_blk_conv_wshape(const tk_blk_conv *cv, int64_t *shape) {
    if (cv->rank == 3) {
        const tk_conv3d_shape *s = &cv->s3;
        shape[0] = cv->kw ? cv->kw : s->K, shape[1] = s->T, shape[2] = s->R, shape[3] = s->S;
        shape[4] = cv->cw ? cv->cw : s->C;
        return 5;
    }
    const tk_conv_shape *s = &cv->s;
    shape[0] = s->K, shape[1] = s->R, shape[2] = s->S, shape[3] = cv->cw ? cv->cw : s->C;
    return 4;
}

// The kernel pass that runs a block pass p (TK_CONV_FWD: forward, BWD_DATA: the input gradient,
// BWD_FILTER: the weight gradient): a transposed convolution's forward and input gradient are its
// shape's backward data and forward.
static tk_conv_pass kernel_pass(const tk_blk_conv *cv, tk_conv_pass p) {
    if (cv->rank != 3 || !cv->transposed || p == TK_CONV_BWD_FILTER) return p;
    return p == TK_CONV_FWD ? TK_CONV_BWD_DATA : TK_CONV_FWD;
}

// Block pass p with kernels/conv.h's or conv3d.h's operands (a, b, out) of the kernel pass.
static int conv_run(const tk_blk_env *env, const tk_blk_conv *cv, tk_conv_pass p, const void *a, const void *b,
                    void *out, tk_err *e) {
    if (cv->rank == 3) return tk_conv3d(env->c, env->dnn, kernel_pass(cv, p), &cv->s3, env->t, a, b, out, e);
    return tk_conv(env->c, env->dnn, p, &cv->s, env->t, a, b, out, e);
}

// Whether the training forward makes its norm's statistics in its epilogue: when cuDNN has a
// fused plan (gpu/cudnn_conv.h: only with TK_CUDNN_FUSION=1) and, both being timed (so never with
// ctx->deterministic: the fused sums are not reproducible bit for bit), it is not slower than the
// plain forward plus the statistics pass it saves (y read once by kernels/bn.cu at ~2.6 TB/s, as
// measured on an H100, plus a launch).
static int use_fused(const tk_blk_env *env, const tk_conv_shape *s) {
    tk_err e0 = {0};
    if (env->c->deterministic) return 0;
    if (tk_cudnn_plan_fused(env->dnn, TK_CUDNN_FWD_STATS, s, env->t, &e0)) return 0; // refused: plain + our pass
    const float fused = tk_cudnn_plan_ms(env->dnn, TK_CUDNN_FWD_STATS, s, env->t),
                plain = tk_cudnn_plan_ms(env->dnn, TK_CONV_FWD, s, env->t);
    const double stats = (double)tk_conv_y_numel(s) * tk_dtype_size(env->t) / 2.6e9 + 0.005;
    return fused >= 0 && plain >= 0 && fused <= plain + stats;
}

int tk_blk_conv_plan(const tk_blk_env *env, tk_blk_conv *cv, int dgrad, int fuse, tk_err *e) {
    if (cv->rank == 3) {
        for (int p = 0; p < 3; p++)
            if (dgrad || p != TK_CONV_BWD_DATA)
                TRY(tk_cudnn_plan3d(env->dnn, kernel_pass(cv, (tk_conv_pass)p), &cv->s3, env->t, e));
        cv->fused = 0;
        return 0;
    }
    for (int p = 0; p < 3; p++)
        if (dgrad || p != TK_CONV_BWD_DATA) TRY(tk_cudnn_plan(env->dnn, (tk_conv_pass)p, &cv->s, env->t, e));
    cv->fused = fuse && use_fused(env, &cv->s);
    return 0;
}

int tk_blk_conv_fwd(const tk_blk_env *env, const tk_blk_conv *cv, const void *x, void *y, int train, tk_err *e) {
    if (train && cv->fused)
        return tk_cudnn_conv_fwd_stats(env->dnn, &cv->s, env->t, x, NULL, NULL, cv->wc, y, cv->sums,
                                       cv->sums + cv->s.K, e);
    return conv_run(env, cv, TK_CONV_FWD, x, cv->wc, y, e);
}

int tk_blk_conv_dgrad(const tk_blk_env *env, const tk_blk_conv *cv, const void *dy, void *dx, tk_err *e) {
    return conv_run(env, cv, TK_CONV_BWD_DATA, dy, cv->wc, dx, e);
}

// In bf16 into its own dwt, cast with the others at the backward's end (one launch instead of
// 52: ~0.15 ms a ResNet-50 step on an H100).
int tk_blk_conv_wgrad(const tk_blk_env *env, const tk_blk_conv *cv, const void *x, const void *dy, tk_err *e) {
    // the kernel's operands: the convolution's input and output gradient (a transposed one's are
    // its shape's output gradient and input)
    const void *a = x, *b = dy;
    if (cv->rank == 3 && cv->transposed) a = dy, b = x;
    if (cv->dwt) return conv_run(env, cv, TK_CONV_BWD_FILTER, a, b, cv->dwt, e);
    const int sK = cv->rank == 3 ? cv->s3.K : cv->s.K, sC = cv->rank == 3 ? cv->s3.C : cv->s.C;
    const int K = cv->kw ? cv->kw : sK, C = cv->cw ? cv->cw : sC;
    const int padded = K != sK || C != sC;
    if (env->t == TK_F32 && !padded) return conv_run(env, cv, TK_CONV_BWD_FILTER, a, b, cv->dw, e);
    TRY(conv_run(env, cv, TK_CONV_BWD_FILTER, a, b, env->wbuf, e));
    // (K, taps, C) of the padded (sK, taps, sC): the first K filters' first C channels
    const int64_t taps = tk_blk_conv_w_numel(cv) / sK / sC;
    return tk_cast2d(env->c, env->wbuf, env->t, sC, cv->dw, TK_F32, C, (int64_t)K * taps, C, e);
}

int tk_blk_conv_bwd(const tk_blk_env *env, const tk_blk_conv *cv, const void *x, const void *dy, void *dx, tk_err *e) {
    if (dx) TRY(tk_blk_conv_dgrad(env, cv, dy, dx, e));
    return tk_blk_conv_wgrad(env, cv, x, dy, e);
}

int tk_blk_conv_cast_span(const tk_blk_conv *cv, tk_cast_span *span) {
    if (!cv->dwt) return 0;
    *span = (tk_cast_span){cv->dwt, cv->dw, tk_blk_conv_w_numel(cv)};
    return 1;
}

int tk_blk_cast_wgrads(const tk_blk_env *env, const tk_cast_span *spans, int n, tk_err *e) {
    for (int i = 0; i < n; i += TK_CAST_MANY)
        TRY(tk_cast_many(env->c, spans + i, n - i < TK_CAST_MANY ? n - i : TK_CAST_MANY, env->t, TK_F32, e));
    return 0;
}

// ---- weight gradients handed on ----

void tk_blk_grads_begin(tk_blk_grads *g, const float *base, size_t n, const tk_cast_span *casts, int ncasts) {
    g->base = base, g->done = base + n, g->casts = casts, g->ncasts = ncasts;
}

// The casts into [from, g->done) (the spans not cast yet that start at or after from), then from
// reported.
static int grads_from(const tk_blk_env *env, tk_blk_grads *g, const float *from, tk_err *e) {
    if (from >= g->done) return 0; // (nothing new)
    tk_cast_span now[TK_CAST_MANY];
    int n = 0;
    for (int i = 0; i < g->ncasts; i++) {
        const float *d = g->casts[i].dst;
        if (d < from || d >= g->done) continue;
        now[n++] = g->casts[i];
        if (n == TK_CAST_MANY) {
            TRY(tk_blk_cast_wgrads(env, now, n, e));
            n = 0;
        }
    }
    if (n) TRY(tk_blk_cast_wgrads(env, now, n, e));
    g->done = from;
    return g->ready ? g->ready(g->arg, (size_t)(from - g->base), e) : 0;
}

int tk_blk_grads_ready(const tk_blk_env *env, tk_blk_grads *g, const float *from, tk_err *e) {
    return g->ready ? grads_from(env, g, from, e) : 0;
}

int tk_blk_grads_end(const tk_blk_env *env, tk_blk_grads *g, tk_err *e) { return grads_from(env, g, g->base, e); }

// ---- normalization ----

void tk_blk_norm_init(tk_blk_norm *n, tk_blk_norm_kind kind, int C, int N, int64_t spatial, double eps,
                      double momentum) {
    n->kind = kind;
    n->C = C, n->N = N, n->spatial = spatial;
    n->eps = (float)eps, n->momentum = (float)momentum;
}

static int64_t rows(const tk_blk_norm *n) { return (int64_t)n->N * n->spatial; }
static int instance(const tk_blk_norm *n) { return n->kind == TK_BLK_INSTANCE_NORM; }

size_t tk_blk_norm_stat_bytes(const tk_blk_norm *n) {
    return (size_t)(instance(n) ? n->N : 1) * n->C * sizeof(float);
}

size_t tk_blk_norm_ws_bytes(tk_backend b, const tk_blk_norm *n) {
    if (instance(n)) return tk_instnorm_ws_bytes(b, n->N, n->spatial, n->C);
    return tk_bn_ws_bytes(b, rows(n), n->C);
}

int tk_blk_norm_reset(tk_ctx *c, const tk_blk_norm *n, float *h, tk_err *e) {
    if (instance(n)) return 0;
    for (int i = 0; i < n->C; i++) h[i] = 0.0f, h[n->C + i] = 1.0f;
    TRY(tk_memcpy_h2d(c, n->rmean, h, (size_t)n->C * 4, TK_STREAM_COMPUTE, e));
    return tk_memcpy_h2d(c, n->rvar, h + n->C, (size_t)n->C * 4, TK_STREAM_COMPUTE, e);
}

int tk_blk_norm_fwd(const tk_blk_env *env, tk_blk_norm *n, const float *sums, const void *x, const void *res,
                    int relu, void *y, uint8_t *mask, int train, tk_err *e) {
    const int64_t M = rows(n);
    if (instance(n)) {
        if (sums || res || mask || !y) return tk_err_set(e, TK_EINTERNAL, "instance norm: sums, res, mask or no output");
        return tk_instnorm_fwd(env->c, env->t, x, n->N, n->spatial, n->C, n->gamma, n->beta, relu, n->eps, n->smean,
                               n->sinvstd, y, env->norm_ws, e);
    }
    if (!train)
        return tk_bn_fwd_eval(env->c, env->t, x, M, n->C, n->gamma, n->beta, res, relu, n->eps, n->rmean, n->rvar, y,
                              e);
    if (sums)
        return tk_bn_fwd_train_sums(env->c, env->t, x, M, n->C, sums, sums + n->C, n->gamma, n->beta, res, relu,
                                    n->eps, n->momentum, n->rmean, n->rvar, n->smean, n->sinvstd, y, env->norm_ws, e);
    return tk_bn_fwd_train_mask(env->c, env->t, x, M, n->C, n->gamma, n->beta, res, relu, n->eps, n->momentum,
                                n->rmean, n->rvar, n->smean, n->sinvstd, y, mask, env->norm_ws, e);
}

int tk_blk_norm_fwd_res_norm(const tk_blk_env *env, tk_blk_norm *n, const void *x, const void *res,
                             const tk_blk_norm *rn, int relu, void *y, uint8_t *mask, tk_err *e) {
    return tk_bn_fwd_train_res_bn(env->c, env->t, x, rows(n), n->C, n->gamma, n->beta, res, tk_blk_norm_saved(rn),
                                  relu, n->eps, n->momentum, n->rmean, n->rvar, n->smean, n->sinvstd, y, mask,
                                  env->norm_ws, e);
}

int tk_blk_norm_bwd(const tk_blk_env *env, const tk_blk_norm *n, const void *x, const void *y, const uint8_t *mask,
                    int relu, const void *dy, const void *dy2, void *dx, void *dz, tk_err *e) {
    if (instance(n)) {
        if (mask || dz || (relu && !y)) return tk_err_set(e, TK_EINTERNAL, "instance norm: mask, dz or no output");
        return tk_instnorm_bwd(env->c, env->t, x, relu ? y : NULL, dy, dy2, n->N, n->spatial, n->C, n->gamma, n->smean,
                               n->sinvstd, dx, n->dgamma, n->dbeta, env->norm_ws, e);
    }
    if (mask)
        return tk_bn_bwd_mask(env->c, env->t, x, mask, dy, dy2, rows(n), n->C, n->gamma, n->smean, n->sinvstd, dx, dz,
                              n->dgamma, n->dbeta, env->norm_ws, e);
    return tk_bn_bwd(env->c, env->t, x, y, relu && !y ? n->beta : NULL, dy, dy2, rows(n), n->C, n->gamma, n->smean,
                     n->sinvstd, dx, dz, n->dgamma, n->dbeta, env->norm_ws, e);
}

// ---- units ----

int tk_blk_unit_init2d(tk_blk_unit *u, int N, int H, int W, int C, int K, int R, int stride, int pad, int relu,
                       tk_blk_norm_kind kind, double eps, double momentum, tk_err *e) {
    TRY(tk_blk_conv_init2d(&u->c, N, H, W, C, K, R, R, stride, pad, e));
    tk_blk_norm_init(&u->n, kind, K, N, (int64_t)u->c.s.P * u->c.s.Q, eps, momentum);
    u->relu = relu;
    return 0;
}

int tk_blk_unit_init3d(tk_blk_unit *u, int N, int D, int H, int W, int C, int K, int k, int stride, int pad, int relu,
                       tk_blk_norm_kind kind, double eps, double momentum, tk_err *e) {
    TRY(tk_blk_conv_init3d(&u->c, N, D, H, W, C, K, k, stride, pad, e));
    tk_blk_norm_init(&u->n, kind, K, N, tk_blk_conv_rows(&u->c) / N, eps, momentum);
    u->relu = relu;
    return 0;
}

int tk_blk_unit_fwd(const tk_blk_env *env, tk_blk_unit *u, const void *x, const void *res, int train, tk_err *e) {
    TRY(tk_blk_conv_fwd(env, &u->c, x, u->y, train, e));
    return tk_blk_norm_fwd(env, &u->n, tk_blk_conv_sums(&u->c), u->y, res, u->relu, u->z,
                           train ? tk_blk_unit_mask(u) : NULL, train, e);
}

int tk_blk_unit_bwd(const tk_blk_env *env, const tk_blk_unit *u, const void *x, const void *dz, const void *dz2,
                    void *dn, void *dres, void *dx, tk_err *e) {
    // after a residual add the ReLU's mask is the output's (or its bits), else recomputed from y;
    // an instance norm's always the output's
    const void *out = u->relu && (dres || instance(&u->n)) ? u->z : NULL;
    TRY(tk_blk_norm_bwd(env, &u->n, u->y, out, tk_blk_unit_mask(u), u->relu, dz, dz2, dn, dres, e));
    return tk_blk_conv_bwd(env, &u->c, x, dn, dx, e);
}

// ---- max pooling ----

int tk_blk_pool_init2d(tk_blk_pool *p, int N, int H, int W, int C, int R, int stride, int pad, tk_err *e) {
    *p = (tk_blk_pool){.N = N, .H = H, .W = W, .C = C, .R = R, .stride = stride, .pad = pad};
    TRY(tk_pool_check(TK_F32, N, H, W, C, R, stride, pad, e));
    p->P = tk_pool_out(H, R, stride, pad), p->Q = tk_pool_out(W, R, stride, pad);
    return 0;
}

int tk_blk_maxpool_fwd(const tk_blk_env *env, const tk_blk_pool *p, const void *x, const tk_blk_norm *norm, void *y,
                       uint8_t *idx, tk_err *e) {
    if (norm)
        return tk_maxpool_bn_fwd(env->c, env->t, x, tk_blk_norm_saved(norm), p->N, p->H, p->W, p->C, p->R, p->stride,
                                 p->pad, y, idx, e);
    return tk_maxpool_fwd(env->c, env->t, x, p->N, p->H, p->W, p->C, p->R, p->stride, p->pad, y, idx, e);
}

int tk_blk_maxpool_bwd(const tk_blk_env *env, const tk_blk_pool *p, const void *dy, const void *dy2,
                       const uint8_t *idx, void *dx, tk_err *e) {
    return tk_maxpool_bwd(env->c, env->t, dy, dy2, idx, p->N, p->H, p->W, p->C, p->R, p->stride, p->pad, dx, e);
}

// ---- initialization ----

void tk_blk_fill_normal(float *h, size_t n, double sd, uint64_t seed, uint32_t stream) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) h[i] = (float)(sd * tk_philox_normal(seed, stream, i));
}

void tk_blk_fill_uniform(float *h, size_t n, double a, uint64_t seed, uint32_t stream) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) h[i] = (float)(-a + 2 * a * tk_philox_uniform(seed, stream, i));
}

// ---- the backward's scratch ----

void *tk_blk_scratch_take(tk_blk_scratch *p) {
    for (int i = 0; i < p->n; i++)
        if (!(p->busy >> i & 1)) {
            p->busy |= 1u << i;
            return p->buf[i];
        }
    return NULL;
}

void tk_blk_scratch_put(tk_blk_scratch *p, const void *buf) {
    for (int i = 0; i < p->n; i++)
        if (buf && p->buf[i] == buf) p->busy &= ~(1u << i);
}
