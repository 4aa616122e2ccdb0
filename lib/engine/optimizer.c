// The engine's optimizer (optimizer.h).
#include "engine/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ema.h"
#include "optim.h"
#include "sgd.h"

int tk_optimizer_config(json_t *root, const char *file, int64_t steps_per_epoch, tk_opt_config *cfg, tk_err *e) {
    const json_t *o = json_object_get(root, "optimizer");
    if (!json_is_object(o)) {
        tk_err_set(e, TK_EDATA, "expected an object");
        return tk_err_where(e, "%s: $.optimizer", file);
    }
    return tk_opt_config_parse(o, file, "optimizer", steps_per_epoch, cfg, e);
}

double tk_optimizer_lr_at(const tk_opt_config *cfg, int64_t step) { return tk_lr_at(&cfg->lr, step); }

static int is_plain_sgd(const tk_opt_hp *hp) {
    return hp->kind == TK_OPT_SGD && hp->momentum == 0 && hp->weight_decay == 0 && hp->max_grad_norm <= 0 &&
           !hp->skip_nonfinite;
}

// n floats of the dense span's layout at buf, as one extern tensor per dense tensor named
// PREFIX.NAME (the checkpoint carries them).
static int add_views(tk_params *P, const char *prefix, float *buf, tk_err *e) {
    int nd = P->ndense;
    for (int i = 0; i < nd; i++) {
        // (a copy: adding a tensor may move P->p)
        const tk_param p = P->p[i];
        char name[TK_PARAM_NAME];
        if (snprintf(name, sizeof name, "%s.%s", prefix, p.name) >= (int)sizeof name)
            return tk_err_set(e, TK_EINTERNAL, "optimizer: tensor name too long: %s", p.name);
        const int64_t off = p.w ? (int64_t)((const float *)p.w - P->dense_w) : 0;
        TRY(tk_params_add_extern(P, name, TK_F32, p.ndim, p.shape, -1, buf + off, e));
    }
    return 0;
}

// The moving average's buffer and tensors (cfg.ema > 0).
static int ema_init(tk_optimizer *o, tk_params *P, tk_err *e) {
    if (!(o->cfg.ema > 0) || P->ndense == 0) return 0;
    TRY(tk_malloc(o->c, (void **)&o->ema, P->dense_n * sizeof(float), e));
    TRY(tk_memset0(o->c, o->ema, P->dense_n * sizeof(float), TK_STREAM_COMPUTE, e));
    return add_views(P, "ema", o->ema, e);
}

int tk_optimizer_ema_reset(tk_optimizer *o, tk_params *P, tk_err *e) {
    if (!o->ema) return 0;
    return tk_memcpy_d2d(o->c, o->ema, P->dense_w, P->dense_n * sizeof(float), TK_STREAM_COMPUTE, e);
}

int tk_optimizer_ema_swap(tk_optimizer *o, tk_params *P, tk_err *e) {
    if (!o->ema) return 0;
    TRY(tk_ema_swap(o->c, o->ema, P->dense_w, P->dense_n, e));
    return tk_params_refresh_copy(P, e);
}

// ---- the distributed form ----

size_t tk_opt_shard_multiple(int world) { return 64 * (size_t)(world > 1 ? world : 1); }

// Bucket k's bounds.
static void bucket_of(const tk_opt_shard *s, size_t k, size_t *lo, size_t *hi) {
    *lo = k * s->bucket;
    *hi = *lo + s->bucket < s->n ? *lo + s->bucket : s->n;
}

static int bounds_bad(const tk_opt_shard *s, size_t from, size_t to, tk_err *e) {
    if (from % s->bucket == 0 && (to % s->bucket == 0 || to == s->n) && from <= to && to <= s->n) return 0;
    return tk_err_set(e, TK_EINTERNAL, "distributed optimizer: [%zu, %zu) is not a run of buckets of %zu in %zu", from,
                      to, s->bucket, s->n);
}

int tk_opt_shard_reduce(const tk_opt_shard *s, float *g, size_t from, size_t to, tk_err *e) {
    TRY(bounds_bad(s, from, to, e));
    for (size_t k = from / s->bucket, lo, hi; bucket_of(s, k, &lo, &hi), lo < to; k++) {
        size_t share = (hi - lo) / (size_t)s->world; // (a multiple of 64: the padding)
        TRY(tk_reduce_scatter_sum(s->comm, g + lo, g + lo + (size_t)s->rank * share, share, TK_F32, 1.0f,
                                  TK_STREAM_COMM, e));
    }
    return 0;
}

int tk_opt_shard_gather(const tk_opt_shard *s, void *buf, tk_dtype t, tk_err *e) {
    const size_t es = tk_dtype_size(t);
    TRY(tk_comm_stream_wait(s->comm, TK_STREAM_COMM, TK_STREAM_COMPUTE, e));
    for (size_t k = 0, lo, hi; bucket_of(s, k, &lo, &hi), lo < s->n; k++) {
        size_t share = (hi - lo) / (size_t)s->world;
        char *b = (char *)buf + lo * es;
        TRY(tk_all_gather(s->comm, b + (size_t)s->rank * share * es, b, share, t, TK_STREAM_COMM, e));
    }
    return tk_comm_stream_wait(s->comm, TK_STREAM_COMPUTE, TK_STREAM_COMM, e);
}

// kernels/optim.h's gather of the norms' partial sums (fp64, moved as 64-bit integers).
static int gather_sums(void *arg, const double *mine, double *all, size_t count, tk_err *e) {
    const tk_opt_shard *s = arg;
    TRY(tk_comm_stream_wait(s->comm, TK_STREAM_COMM, TK_STREAM_COMPUTE, e));
    TRY(tk_all_gather(s->comm, mine, all, count, TK_I64, TK_STREAM_COMM, e));
    return tk_comm_stream_wait(s->comm, TK_STREAM_COMPUTE, TK_STREAM_COMM, e);
}

// A tensor's segment flags.
static int32_t seg_flags(const tk_param *p) {
    return (p->flags & TK_PARAM_NO_DECAY ? TK_SEG_NO_DECAY : 0) | (p->flags & TK_PARAM_NO_ADAPT ? TK_SEG_NO_ADAPT : 0);
}

// The segments: one per dense tensor, or (distributed) one per piece of a tensor inside one of this
// rank's shares, in offset order, each with its tensor's index as its slot.
static int segments(tk_optimizer *o, const tk_params *P, tk_err *e) {
    const tk_opt_shard *s = o->shard.comm ? &o->shard : NULL;
    size_t nb = s ? (s->n + s->bucket - 1) / s->bucket : 1, cap = (size_t)P->ndense + (s ? nb * 2 : 0);
    o->seg_host = calloc(cap, sizeof *o->seg_host);
    if (!o->seg_host) return tk_err_set(e, TK_EIO, "out of host memory");
    o->nseg = 0;
    for (size_t k = 0; k < nb; k++) {
        size_t lo = 0, hi = P->dense_n;
        if (s) {
            bucket_of(s, k, &lo, &hi);
            size_t share = (hi - lo) / (size_t)s->world;
            lo += (size_t)s->rank * share, hi = lo + share;
        }
        for (int i = 0; i < P->ndense; i++) {
            const tk_param *p = &P->p[i];
            int64_t off = (int64_t)(p->w ? (const float *)p->w - P->dense_w : 0), end = off + tk_param_numel(p);
            int64_t a = off > (int64_t)lo ? off : (int64_t)lo, b = end < (int64_t)hi ? end : (int64_t)hi;
            if (s && a >= b) continue;
            if ((size_t)o->nseg == cap) return tk_err_set(e, TK_EINTERNAL, "optimizer: more segments than planned");
            o->seg_host[o->nseg++] = (tk_opt_seg){.off = a, .n = b - a, .flags = seg_flags(p), .slot = i};
        }
    }
    return 0;
}

int tk_optimizer_init(tk_optimizer *o, const tk_opt_config *cfg, tk_params *P, tk_err *e) {
    return tk_optimizer_init_shard(o, cfg, P, NULL, e);
}

int tk_optimizer_init_shard(tk_optimizer *o, const tk_opt_config *cfg, tk_params *P, const tk_opt_shard *shard,
                            tk_err *e) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->c = P->c;
    TRY(ema_init(o, P, e));
    if (shard && shard->comm && shard->world > 1 && P->ndense > 0) {
        o->shard = *shard;
        if (shard->n != P->dense_n || shard->bucket == 0 || shard->bucket % tk_opt_shard_multiple(shard->world) ||
            shard->n % tk_opt_shard_multiple(shard->world))
            return tk_err_set(e, TK_EINTERNAL, "distributed optimizer: span %zu (dense %zu), buckets %zu, %d ranks",
                              shard->n, P->dense_n, shard->bucket, shard->world);
        o->dist = (tk_optim_dist){.world = shard->world, .nslot = P->ndense, .gather = gather_sums};
    }
    // DLRM's MLPerf optimizer is plain SGD: its one-launch update (tk_sgd_update, the same bits as
    // before the engine); everything else goes through the flat-buffer optimizer.
    o->plain_sgd = is_plain_sgd(&cfg->hp) && !o->shard.comm;
    if (o->plain_sgd || P->ndense == 0) return 0;
    TRY(segments(o, P, e));
    const tk_optim_dist *d = o->shard.comm ? &o->dist : NULL;
    TRY(tk_optim_check_dist(&cfg->hp, P->dense_n, o->seg_host, o->nseg, d, P->copy ? P->copy_type : TK_BF16, e));
    size_t sf = tk_optim_state_floats(cfg->hp.kind), bytes = ((size_t)o->nseg + 1) * sizeof *o->seg_host;
    TRY(tk_malloc(o->c, (void **)&o->seg_dev, bytes, e));
    TRY(tk_memcpy_h2d(o->c, o->seg_dev, o->seg_host, bytes - sizeof *o->seg_host, TK_STREAM_COMPUTE, e));
    size_t ws = tk_optim_ws_bytes_dist(o->c->backend, o->nseg, P->dense_n, d);
    if (ws) TRY(tk_malloc(o->c, &o->ws, ws, e));
    if (sf == 0) return 0;
    TRY(tk_malloc(o->c, (void **)&o->state, sf * P->dense_n * sizeof(float), e));
    TRY(tk_memset0(o->c, o->state, sf * P->dense_n * sizeof(float), TK_STREAM_COMPUTE, e));
    // The state as tensors of the checkpoint, one per dense tensor and moment.
    static const char *const moment[2] = {"optimizer.m", "optimizer.v"};
    for (size_t k = 0; k < sf; k++) TRY(add_views(P, moment[k], o->state + k * P->dense_n, e));
    return 0;
}

int tk_optimizer_gather_state(tk_optimizer *o, tk_params *P, tk_err *e) {
    if (!o->shard.comm || !o->state) return 0;
    size_t sf = tk_optim_state_floats(o->cfg.hp.kind);
    for (size_t k = 0; k < sf; k++) TRY(tk_opt_shard_gather(&o->shard, o->state + k * P->dense_n, TK_F32, e));
    return tk_ctx_sync(o->c, e);
}

void tk_optimizer_release(tk_optimizer *o) {
    if (!o->c) return;
    if (o->state) tk_free(o->c, o->state);
    if (o->seg_dev) tk_free(o->c, o->seg_dev);
    if (o->ws) tk_free(o->c, o->ws);
    if (o->ema) tk_free(o->c, o->ema);
    free(o->seg_host);
    memset(o, 0, sizeof *o);
}

int tk_optimizer_schedule(tk_optimizer *o, int64_t *step, float *lr, tk_err *e) {
    return tk_lr_schedule(o->c, &o->cfg.lr, step, lr, e);
}

int tk_optimizer_update(tk_optimizer *o, tk_params *P, const float *lr, int64_t *step, tk_err *e) {
    if (o->plain_sgd)
        TRY(tk_sgd_update(o->c, P->dense_w, P->dense_g, P->dense_n, lr, P->copy, P->copy ? P->copy_type : TK_F32, e));
    else if (o->shard.comm) { // (a rank may have no segment but joins the gathers)
        o->dist.arg = &o->shard;
        TRY(tk_optim_step_dist(o->c, &o->cfg.hp, P->dense_w, P->dense_g, o->state, P->dense_n, o->seg_dev,
                               o->seg_host, o->nseg, &o->dist, lr, step, P->copy, P->copy ? P->copy_type : TK_BF16,
                               o->ws, e));
        TRY(tk_opt_shard_gather(&o->shard, P->dense_w, TK_F32, e));
        if (P->copy) TRY(tk_opt_shard_gather(&o->shard, P->copy, P->copy_type, e));
    } else if (o->nseg > 0) // (the copy type is only read when there is a copy)
        TRY(tk_optim_step(o->c, &o->cfg.hp, P->dense_w, P->dense_g, o->state, P->dense_n, o->seg_dev, o->seg_host,
                          o->nseg, lr, step, P->copy, P->copy ? P->copy_type : TK_BF16, o->ws, e));
    return o->ema ? tk_ema_update(o->c, o->ema, P->dense_w, P->dense_n, o->cfg.ema, e) : 0;
}

// ---- MLLOG ----

// The value of v, and the config key whose JSON form 'g' follows (NULL: none, a real).
static double optv_value(const tk_run_cfg *run, tk_optv v, const char **src) {
    const tk_opt_config *o = &run->opt;
    const tk_lr_sched *s = &o->lr;
    const double spe = run->steps_per_epoch > 0 ? (double)run->steps_per_epoch : 0;
    const int poly = s->kind == TK_LR_POLY, floor_min = poly || s->kind == TK_LR_WARMUP_HOLD_EXP;
    *src = NULL;
    switch (v) {
    case TK_OPTV_NAME: return 0;
    case TK_OPTV_BASE_LR: return *src = "base_lr", s->base_lr;
    case TK_OPTV_END_LR: return floor_min ? (*src = "min_lr", s->min_lr) : (*src = "end_lr", s->end_lr);
    case TK_OPTV_POLY_POWER: return *src = "poly_power", s->power;
    case TK_OPTV_WARMUP_STEPS: return (double)s->warmup_steps;
    case TK_OPTV_WARMUP_EPOCHS:
        if (o->warmup_epochs >= 0) return *src = "warmup_epochs", o->warmup_epochs;
        return spe > 0 ? (double)s->warmup_steps / spe : 0;
    case TK_OPTV_START_WARMUP: return (double)s->start_warmup;
    case TK_OPTV_DECAY_START: return (double)s->decay_start;
    case TK_OPTV_DECAY_STEPS: return (double)s->decay_steps;
    case TK_OPTV_TOTAL_STEPS: return (double)(s->total_steps > 0 ? s->total_steps : run->max_steps);
    case TK_OPTV_DECAY_LENGTH:
        if (o->total_epochs >= 0) return *src = "total_epochs", o->total_epochs;
        if (poly) return *src = "decay_steps", (double)s->decay_steps;
        return spe > 0 ? (double)s->total_steps / spe : 0;
    case TK_OPTV_WEIGHT_DECAY: return *src = "weight_decay", o->hp.weight_decay;
    case TK_OPTV_MOMENTUM: return *src = "momentum", o->hp.momentum;
    case TK_OPTV_EPS: return *src = "eps", o->hp.eps;
    case TK_OPTV_BETA1: return *src = "beta1", o->hp.beta1;
    case TK_OPTV_BETA2: return *src = "beta2", o->hp.beta2;
    case TK_OPTV_ZERO: return 0;
    case TK_OPTV_INIT_LR: return *src = "warmup_init_lr", s->warmup_init_lr;
    case TK_OPTV_GAMMA:
        return s->kind == TK_LR_STEP || s->kind == TK_LR_WARMUP_HOLD_EXP ? (*src = "gamma", s->gamma) : 1.0;
    case TK_OPTV_MILESTONE_EPOCHS: return 0;
    case TK_OPTV_HOLD_EPOCHS:
        *src = "hold_epochs";
        return s->epoch_steps > 0 ? (double)(s->hold_steps / s->epoch_steps) : 0;
    case TK_OPTV_MAX_GRAD_NORM: return *src = "max_grad_norm", o->hp.max_grad_norm;
    case TK_OPTV_EMA: return *src = "ema", o->ema;
    }
    return 0;
}

// step's milestones in epochs of the run's steps per epoch, each an integer where it is whole.
static json_t *milestone_epochs(const tk_run_cfg *run) {
    const tk_lr_sched *s = &run->opt.lr;
    json_t *a = json_array();
    for (int i = 0; s->kind == TK_LR_STEP && run->steps_per_epoch > 0 && i < s->nmilestones; i++) {
        const int64_t m = s->milestones[i], spe = run->steps_per_epoch;
        json_array_append_new(a, m % spe == 0 ? json_integer((json_int_t)(m / spe)) : json_real((double)m / (double)spe));
    }
    return a;
}

int tk_optimizer_mllog(tk_mllog *L, const tk_run_cfg *run, const tk_opt_mllog_key *keys, tk_err *e) {
    const char *name = run->opt.name;
    if (!keys) return 0;
    if (!name) return tk_err_set(e, TK_EINTERNAL, "optimizer MLLOG keys before the optimizer was parsed");
    for (const tk_opt_mllog_key *k = keys; k && k->key; k++) {
        if (k->only && (k->only[0] == '!' ? strcmp(name, k->only + 1) == 0 : strcmp(name, k->only) != 0)) continue;
        char key[96];
        if (snprintf(key, sizeof key, k->key, name) >= (int)sizeof key)
            return tk_err_set(e, TK_EINTERNAL, "MLLOG key too long: %s", k->key);
        const char *src;
        double x = optv_value(run, k->v, &src);
        json_t *val;
        if (k->v == TK_OPTV_NAME) val = json_string(name);
        else if (k->v == TK_OPTV_MILESTONE_EPOCHS) val = milestone_epochs(run);
        else if (k->form == 'i' || (k->form == 'g' && src && tk_opt_config_given_int(&run->opt, src)))
            val = json_integer((json_int_t)llround(x));
        else val = json_real(x);
        TRY(TK_MLLOG_EVENT(L, key, val, NULL, e));
    }
    return 0;
}
