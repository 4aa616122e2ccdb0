// ResNet's foreign weights and step dumps (resnet.h): --init-checkpoint from torchvision's
// resnet50 state dict saved as safetensors, and train-step --dump-step for the PyTorch peer
// (contrib/peers/resnet.py).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ckpt.h"
#include "img_norm.h"
#include "workloads/resnet/resnet.h"

static void shape_str(const int64_t *s, int nd, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < nd && o < n; d++) o += (size_t)snprintf(buf + o, n - o, d ? ", %lld" : "%lld", (long long)s[d]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

// torchvision's names and layouts: conv weights (K, C, R, S), ours (K, R, S, C); the rest the same.
// Tensors the file lacks keep their initialization; its others (num_batches_tracked) are ignored.
// A trainkit checkpoint (ours: the same names, our layouts) loads as the engine loads one, the
// model's tensors only.
int rn_import_torchvision(void *model, const char *path, tk_err *e) {
    rn_model *m = model;
    tk_st_file *f;
    TRY(tk_st_open(&f, path, e));
    const char *fmt = tk_st_meta(f, "format");
    if (fmt && strcmp(fmt, "trainkit-checkpoint-1") == 0) {
        tk_st_close(f);
        TRY(tk_ckpt_load(m->P, path, TK_CKPT_MODEL_ONLY, NULL, NULL, e));
        return rn_weights_loaded(m, e);
    }
    const tk_params *P = m->P;
    float *h = NULL, *t = NULL;
    int rc = 0, got = 0;
    size_t cap = 0;
    for (int i = 0; !rc && i < P->n; i++) {
        const tk_param *p = &P->p[i];
        if (p->flags & TK_PARAM_EXTERN) continue;
        const tk_st_tensor *st = tk_st_find(f, p->name);
        if (!st) continue;
        int64_t want[4] = {p->shape[0], p->shape[1], p->shape[2], p->shape[3]};
        const int conv = p->ndim == 4;
        if (conv) want[1] = p->shape[3], want[2] = p->shape[1], want[3] = p->shape[2];
        int ok = st->dtype == TK_F32 && st->ndim == p->ndim;
        for (int d = 0; ok && d < p->ndim; d++) ok = st->shape[d] == want[d];
        if (!ok) {
            char a[96], b[96];
            shape_str(st->shape, st->ndim, a, sizeof a);
            shape_str(want, p->ndim, b, sizeof b);
            rc = tk_err_set(e, TK_EDATA, "tensor %s: %s %s, expected F32 %s (torchvision's layout)", p->name,
                            tk_dtype_name(st->dtype), a, b);
            tk_err_where(e, "%s", path);
            break;
        }
        size_t n = (size_t)tk_param_numel(p);
        if (n > cap) {
            free(h), free(t);
            h = malloc(n * 4), t = malloc(n * 4);
            cap = n;
            if (!h || !t) {
                rc = tk_err_set(e, TK_EIO, "out of host memory");
                break;
            }
        }
        if ((rc = tk_st_read_all(f, st, h, e))) break;
        const float *src = h;
        if (conv) { // (K, C, R, S) -> (K, R, S, C)
            const int64_t K = p->shape[0], R = p->shape[1], S = p->shape[2], C = p->shape[3];
            for (int64_t k = 0; k < K; k++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t r = 0; r < R; r++)
                        for (int64_t s = 0; s < S; s++)
                            t[((k * R + r) * S + s) * C + c] = h[((k * C + c) * R + r) * S + s];
            src = t;
        }
        if ((rc = tk_memcpy_h2d(m->c, p->w, src, n * 4, TK_STREAM_COMPUTE, e))) break;
        got++;
    }
    tk_st_close(f);
    free(h);
    free(t);
    if (!rc && got == 0) {
        rc = tk_err_set(e, TK_EDATA, "no tensor of a torchvision ResNet (conv1.weight, layer1.0.conv1.weight, ...)");
        tk_err_where(e, "%s", path);
    }
    if (!rc) rc = rn_weights_loaded(m, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    return rc;
}

// ---- the step dump ----

int rn_dump_describe(void *model, tk_wl_dump *d, tk_err *e) {
    rn_model *m = model;
    // the normalized images the stem reads (img_normalize's values, as the step's first op makes
    // them from the same batch, whatever the stem's layout; stem.x holds at least b S S 3 values)
    tk_img_norm nrm;
    for (int c = 0; c < 3; c++) nrm.mean[c] = m->cfg.mean[c], nrm.std[c] = m->cfg.std[c];
    TRY(tk_img_normalize(m->c, m->in_img, (int64_t)m->b * m->S * m->S, nrm, m->t, m->stem.x, 3, e));
    d->batch[0] = (tk_wl_tensor){.name = "batch.image", .dtype = TK_F32, .ndim = 4, .shape = {m->b, m->S, m->S, 3},
                                 .src = m->stem.x, .bf16 = m->t == TK_BF16};
    d->after = 1;
    char cfgs[512];
    const rn_config *c = &m->cfg;
    snprintf(cfgs, sizeof cfgs,
             "{\"layers\": [%d, %d, %d, %d], \"nstages\": %d, \"width\": %d, \"expansion\": %d, \"classes\": %d, "
             "\"image_size\": %d, \"bn_epsilon\": %.17g, \"bn_momentum\": %.17g, \"label_smoothing\": %.17g, "
             "\"precision\": \"%s\", \"global_batch\": %lld}",
             c->layers[0], c->nstages > 1 ? c->layers[1] : 0, c->nstages > 2 ? c->layers[2] : 0,
             c->nstages > 3 ? c->layers[3] : 0, c->nstages, c->width, c->expansion, c->classes, c->image_size,
             c->bn_eps, c->bn_momentum, c->label_smoothing, c->bf16 ? "bf16" : "fp32", (long long)c->batch);
    d->meta = json_pack("{s:s, s:s}", "layout", "activations NHWC, conv weights (K, R, S, C)", "config", cfgs);
    return d->meta ? 0 : tk_err_set(e, TK_EIO, "out of host memory");
}
