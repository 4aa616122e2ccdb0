// The MLP classifier's configuration, model and step (mlp.h).
#include "workloads/mlp/mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bce.h"
#include "core/philox.h"
#include "dense_log1p.h"
#include "engine/cfg.h"
#include "gemm.h"

const char *const tk_mlp_precisions[] = {"fp32", "tf32", NULL};

int tk_mlp_config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **out,
                        tk_err *e) {
    (void)data_meta;
    static const char *const model_keys[] = {"num_dense", "hidden", "precision", NULL};
    static const char *const data_keys[] = {"note", NULL};
    tk_mlp_config c = {0};
    int64_t v;
    TRY(tk_cfg_keys(root, path, "model", model_keys, e));
    TRY(tk_cfg_keys(root, path, "data", data_keys, e));
    TRY(tk_cfg_int(root, path, "model.num_dense", 1, 1024, &v, e));
    c.num_dense = (int)v;
    json_t *h = tk_cfg_get(root, "model.hidden");
    if (!json_is_array(h) || json_array_size(h) > TK_MLP_MAX_LAYERS - 1)
        return tk_cfg_bad(e, path, "model.hidden", "expected an array of 0 to 8 layer widths");
    c.nhidden = (int)json_array_size(h);
    for (int i = 0; i < c.nhidden; i++) {
        json_t *x = json_array_get(h, i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 65536)
            return tk_cfg_bad(e, path, "model.hidden", "layer widths must be integers in [1, 65536]");
        c.hidden[i] = (int)json_integer_value(x);
    }
    tk_precision pr;
    TRY(tk_cfg_precision(root, path, tk_mlp_precisions, &pr, e));
    c.tf32 = pr == TK_PRECISION_TF32;
    c.batch = (int)run->batch;
    tk_mlp_config *p = malloc(sizeof *p);
    if (!p) return tk_err_set(e, TK_EIO, "out of host memory");
    *p = c;
    *out = p;
    return 0;
}

int tk_mlp_batch(const void *model, tk_wl_field *f) {
    const tk_mlp *m = model;
    const int64_t B = m->cfg.batch;
    f[0] = (tk_wl_field){"batch.label", TK_U8, 1, {B}, m->in_label};
    f[1] = (tk_wl_field){"batch.dense", TK_I32, 2, {B, m->cfg.num_dense}, m->in_dense};
    return 2;
}

void tk_mlp_destroy(void *model) { free(model); } // (the buffers are the engine's)

int tk_mlp_create(const void *config, const tk_wl_env *env, void **out, tk_err *e) {
    const tk_mlp_config *cfg = config;
    tk_mlp *m = *out = calloc(1, sizeof *m); // (the engine destroys it if create fails)
    if (!m) return tk_err_set(e, TK_EIO, "out of host memory");
    m->c = env->c;
    m->cfg = *cfg;
    m->env = *env;
    const int B = cfg->batch, W = env->dist->world;
    int64_t per_rank;
    TRY(tk_per_rank_batch("mlp", B, W, &per_rank, e));
    m->b = (int)per_rank;
    m->nl = cfg->nhidden + 1;
    int maxw = cfg->num_dense;
    int lidx[2 * TK_MLP_MAX_LAYERS];
    for (int l = 0; l < m->nl; l++) {
        tk_mlp_layer *L = &m->L[l];
        L->in = l == 0 ? cfg->num_dense : cfg->hidden[l - 1];
        L->out = l == m->nl - 1 ? 1 : cfg->hidden[l];
        L->relu = l != m->nl - 1;
        if (L->out > maxw) maxw = L->out;
        char name[64];
        int64_t sw[2] = {L->out, L->in}, sb[1] = {L->out};
        snprintf(name, sizeof name, "layers.%d.weight", l);
        TRY(tk_params_add(env->params, name, TK_F32, 2, sw, TK_PARAM_DENSE, -1, &lidx[2 * l], e));
        snprintf(name, sizeof name, "layers.%d.bias", l);
        TRY(tk_params_add(env->params, name, TK_F32, 1, sb, TK_PARAM_DENSE | TK_PARAM_NO_DECAY | TK_PARAM_NO_ADAPT, -1,
                          &lidx[2 * l + 1], e));
    }
    TRY(tk_params_alloc(env->params, e));
    const int b = m->b;
    size_t sizes[8 + 2 * TK_MLP_MAX_LAYERS];
    void **dst[8 + 2 * TK_MLP_MAX_LAYERS];
    int ns = 0;
#define NEED(ptr, bytes) (dst[ns] = (void **)&(ptr), sizes[ns++] = (bytes))
    tk_wl_field in[2]; // the batch's shapes (its buffers are below)
    tk_mlp_batch(m, in);
    NEED(m->in_label, tk_wl_field_bytes(&in[0]));
    NEED(m->in_dense, tk_wl_field_bytes(&in[1]));
    NEED(m->x0, (size_t)b * cfg->num_dense * 4);
    NEED(m->dlogit, (size_t)b * 4);
    NEED(m->dy[0], (size_t)b * maxw * 4);
    NEED(m->dy[1], (size_t)b * maxw * 4);
    NEED(m->auc, 64);
    for (int l = 0; l < m->nl; l++) {
        NEED(m->L[l].y, (size_t)b * m->L[l].out * 4);
        NEED(m->L[l].aux, tk_gemm_aux_bytes(m->c, b, m->L[l].out));
    }
#undef NEED
    TRY(tk_wl_acts(env, sizes, dst, ns, e));
    tk_params *P = env->params;
    for (int l = 0; l < m->nl; l++) {
        tk_mlp_layer *L = &m->L[l];
        L->x = l == 0 ? m->x0 : m->L[l - 1].y;
        L->W = P->p[lidx[2 * l]].w;
        L->b = P->p[lidx[2 * l + 1]].w;
        L->dW = P->p[lidx[2 * l]].g;
        L->db = P->p[lidx[2 * l + 1]].g;
        L->woff = (size_t)(L->W - P->dense_w);
    }
    return 0;
}

// Weights N(0, sqrt(2/(in+out))) (Glorot's normal), biases 0, from a Philox stream per tensor.
int tk_mlp_init_weights(void *model, uint64_t seed, tk_err *e) {
    tk_mlp *m = model;
    tk_params *P = m->env.params;
    size_t n = P->dense_n;
    float *h = calloc(n + 1, sizeof *h);
    if (!h) return tk_err_set(e, TK_EIO, "out of host memory");
    for (int l = 0; l < m->nl; l++) {
        const tk_mlp_layer *L = &m->L[l];
        double s = sqrt(2.0 / (L->in + L->out));
        for (size_t k = 0; k < (size_t)L->in * L->out; k++)
            h[L->woff + k] = (float)(s * tk_philox_normal(seed, (uint32_t)TK_RNG_INIT | (uint32_t)(l + 1) << 8, k));
    }
    int rc = tk_memcpy_h2d(m->c, P->dense_w, h, n * 4, TK_STREAM_COMPUTE, e);
    free(h);
    return rc;
}

static int gemm(tk_mlp *m, int M, int N, int K, int ta, int tb, const void *A, const void *Bm, void *D,
                tk_epilogue epi, const void *bias, void *aux, float *bgrad, tk_err *e) {
    tk_gemm_args g = {.M = M, .N = N, .K = K, .transa = ta, .transb = tb, .ab_type = TK_F32, .cd_type = TK_F32,
                      .A = A, .B = Bm, .D = D, .alpha = 1, .beta = 0, .epi = epi, .bias = bias, .aux = aux,
                      .bgrad = bgrad, .stream = TK_STREAM_COMPUTE, .tf32 = m->cfg.tf32};
    return tk_gemm(m->c, &g, e);
}

int tk_mlp_forward(tk_mlp *m, const int32_t *dense, int n, float *out, tk_err *e) {
    if (n < 0 || n > m->b) return tk_err_set(e, TK_EINTERNAL, "mlp: forward of %d > %d rows", n, m->b);
    TRY(tk_dense_log1p(m->c, dense, (int64_t)n * m->cfg.num_dense, m->x0, e));
    for (int l = 0; l < m->nl; l++) {
        tk_mlp_layer *L = &m->L[l];
        float *y = l == m->nl - 1 && out ? out : L->y;
        TRY(gemm(m, n, L->out, L->in, 0, 1, L->x, L->W, y, L->relu ? TK_EPI_RELU_BIAS : TK_EPI_BIAS, L->b,
                 L->relu ? L->aux : NULL, NULL, e));
    }
    return 0;
}

int tk_mlp_step(void *model, tk_err *e) {
    tk_mlp *m = model;
    const int b = m->b, B = m->cfg.batch, r = m->env.dist->rank;
    TRY(tk_mlp_forward(m, m->in_dense + (size_t)r * b * m->cfg.num_dense, b, NULL, e));
    tk_mlp_layer *top = &m->L[m->nl - 1];
    // this rank's rows' share of the global mean: the ranks' gradients add up to the batch's
    TRY(tk_bce_logits_act_n(m->c, TK_F32, top->y, m->in_label + (size_t)r * b, b, B, m->dlogit, m->env.loss_acc, e));
    const float *dy = m->dlogit;
    int pp = 0;
    for (int l = m->nl - 1; l >= 0; l--) {
        tk_mlp_layer *L = &m->L[l];
        // dW = dy^T @ x with the bias gradient fused (the sum of dy over the rows)
        TRY(gemm(m, L->out, L->in, b, 1, 0, dy, L->x, L->dW, TK_EPI_BGRADB, NULL, NULL, L->db, e));
        // layers l.. are final: the engine may all-reduce their buckets while the rest runs
        if (m->env.grads_ready) TRY(m->env.grads_ready(m->env.grads_arg, L->woff, e));
        if (l == 0) break;
        // dx = dy @ W, times the ReLU mask of the layer below
        TRY(gemm(m, b, L->in, L->out, 0, 0, dy, L->W, m->dy[pp], TK_EPI_DRELU, NULL, m->L[l - 1].aux, NULL, e));
        dy = m->dy[pp];
        pp ^= 1;
    }
    return 0;
}
