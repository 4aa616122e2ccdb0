// A workload's model made and driven by the engine (instance.h).
#include "engine/instance.h"

#include <stdlib.h>
#include <string.h>

#include "engine/ckpt.h"
#include "engine/registry.h"

// The sections --set KV may add keys to: the workload's, and for optimizer.distributed (a switch
// of the engine's that no config file needs to carry) the optimizer section, whose parser checks it.
static const char *const *creatable(const char *kv, const char *const *sections) {
    static const char *const opt[] = {"optimizer", NULL}, key[] = "optimizer.distributed=";
    return strncmp(kv, key, sizeof key - 1) == 0 ? opt : sections;
}

// The configuration's hash, which checkpoints carry and --resume compares, without
// optimizer.distributed: it changes where the update runs, not what it computes (up to the order
// of sums), and checkpoints have one layout, so either form resumes the other's.
static uint64_t config_hash(const json_t *root) {
    json_t *copy = json_deep_copy(root);
    if (!copy) return tk_config_hash(root);
    json_object_del(json_object_get(copy, "optimizer"), "distributed");
    uint64_t h = tk_config_hash(copy);
    json_decref(copy);
    return h;
}

int tk_instance_config(tk_instance *I, json_t *root, const char *path, char *const *sets, int nsets,
                       const char *data_meta, tk_err *e) {
    memset(I, 0, sizeof *I);
    I->effective = json_incref(root);
    snprintf(I->path, sizeof I->path, "%s", path);
    const char *name = json_string_value(json_object_get(root, "workload"));
    if (!name || !(I->wl = tk_workload_find(name))) {
        char msg[600];
        snprintf(msg, sizeof msg, "expected one of the workloads %s", tk_workload_names());
        return tk_cfg_bad(e, path, "workload", msg);
    }
    if (I->wl->version < TK_WORKLOAD_V1) return tk_err_set(e, TK_EINTERNAL, "workload %s: table version %d", name, I->wl->version);
    for (int i = 0; i < nsets; i++) TRY(tk_config_override(root, sets[i], creatable(sets[i], I->wl->sections), e));
    TRY(tk_run_config_parse(root, path, I->wl->name, I->wl->metric, I->wl->sections, &I->run, e));
    TRY(I->wl->config(root, path, &I->run, data_meta, &I->cfg, e));
    I->hash = config_hash(root);
    return 0;
}

// Bucketed, overlapped gradient all-reduce (workload.h grads_ready): buckets of BUCKET floats
// from the end of the dense span (the last layers' gradients are final first), each all-reduced on
// the comm stream once the backward has passed it; the rest after the step. With
// optimizer.distributed each bucket is reduce-scattered instead (engine/optimizer.h tk_opt_shard).
#define BUCKET ((size_t)8 << 20) // 32 MB of fp32 gradients (PyTorch DDP's default is 25 MB)

// TK_GRAD_BUCKET_FLOATS overrides the bucket size (tests use small ones to get many buckets).
static size_t bucket_floats(void) {
    const char *s = getenv("TK_GRAD_BUCKET_FLOATS");
    char *end;
    long long v = s ? strtoll(s, &end, 10) : 0;
    return s && *s && !*end && v > 0 ? (size_t)v : BUCKET;
}

// TK_GEMM_SM_MARGIN=N: from a step's first bucket on, the GEMMs leave N SMs to the all-reduce's
// kernel (tk_ctx.gemm_sm_margin; an experiment, 0 = off).
static int sm_margin(void) {
    const char *s = getenv("TK_GEMM_SM_MARGIN");
    return s && *s ? atoi(s) : 0;
}

static int reduce_span(tk_instance *I, size_t from, size_t to, tk_err *e) {
    tk_comm *m = I->dist.comm;
    I->c->gemm_sm_margin = I->sm_margin; // (the backward's GEMMs from here on run beside it)
    float *g = I->P.dense_g;
    TRY(tk_comm_stream_wait(m, TK_STREAM_COMM, TK_STREAM_COMPUTE, e));
    if (I->shard.comm) return tk_opt_shard_reduce(&I->shard, g, from, to, e); // (each rank its shares)
    return tk_allreduce_sum(m, g + from, g + from, to - from, TK_F32, 1.0f, TK_STREAM_COMM, e);
}

// TK_CHECK_GRADS_READY=1 (the cpu backend, several ranks; tests): a gradient that grads_ready
// reported final must keep its value to the step's end but for its all-reduce, or the all-reduce
// may read it too early. Each call compares the reported gradients not reduced yet with their
// copy (before an all-reduce hides a change), keeps a copy of what it adds to the reported tail,
// and copies what it reduces again as reduced; the whole tail is compared once the workload's step
// returned.
static int check_wanted(const tk_instance *I) {
    const char *s = getenv("TK_CHECK_GRADS_READY");
    return s && strcmp(s, "1") == 0 && I->c->backend == TK_BACKEND_CPU;
}

static void check_keep(tk_instance *I, size_t from, size_t to) {
    if (I->ready_copy && from < to) memcpy(I->ready_copy + from, I->P.dense_g + from, (to - from) * sizeof(float));
}

static int check_same(const tk_instance *I, size_t from, size_t to, tk_err *e) {
    if (!I->ready_copy) return 0;
    const float *g = I->P.dense_g;
    size_t i = from;
    while (i < to && memcmp(&g[i], &I->ready_copy[i], sizeof *g) == 0) i++;
    if (i == to) return 0;
    const char *name = "(an alignment gap)";
    for (int k = 0; k < I->P.ndense; k++)
        if (g + i >= I->P.p[k].g && g + i < I->P.p[k].g + tk_param_numel(&I->P.p[k])) name = I->P.p[k].name;
    return tk_err_set(e, TK_EINTERNAL,
                      "workload %s: the gradient of %s (float %zu of the dense span) changed after grads_ready "
                      "reported every gradient from float %zu on final",
                      I->wl->name, name, i, I->checked_from);
}

static int grads_ready(void *arg, size_t off, tk_err *e) {
    tk_instance *I = arg;
    if (off > I->P.dense_n) return tk_err_set(e, TK_EINTERNAL, "grads_ready past the dense span");
    // whole buckets only: [start, reduced_from) with start a multiple of the bucket size
    size_t start = (off + I->bucket - 1) / I->bucket * I->bucket;
    if (start < I->reduced_from) TRY(check_same(I, start > I->checked_from ? start : I->checked_from, I->reduced_from, e));
    if (off < I->checked_from) check_keep(I, off, I->checked_from), I->checked_from = off;
    if (start + I->bucket > I->reduced_from) return 0;
    TRY(reduce_span(I, start, I->reduced_from, e));
    check_keep(I, start, I->reduced_from); // (the cpu backend's all-reduce is done on return)
    I->reduced_from = start;
    return 0;
}

// The precision the configuration asks for, of those the workload supports: the cpu backend, the
// fp32 reference, computes tf32 in fp32 (tf32 only lets cuda's tensor cores round fp32 inputs) and
// has no bf16 compute.
static int precision_check(const tk_instance *I, tk_err *e) {
    tk_precision pr = TK_PRECISION_FP32;
    if (I->wl->precisions) TRY(tk_cfg_precision(I->effective, I->path, I->wl->precisions, &pr, e));
    if (pr != TK_PRECISION_BF16 || I->c->backend == TK_BACKEND_CUDA) return 0;
    tk_err_set(e, TK_EUSAGE, "%s: precision %s needs the cuda backend", I->wl->name, tk_precision_names[pr]);
    return tk_err_hint(e, "the cpu backend is the fp32 reference: --set model.precision=fp32");
}

// The workload's warm-up (workload.h): one step on cuda on the buffers as create left them, so that
// every cuDNN plan, cuBLASLt heuristic and kernel module has run before the engine captures the
// first step in a CUDA graph (loading a module or sizing a workspace is not capturable), and an
// error shows here, eagerly. The step writes gradients, what the forward keeps (BatchNorm's
// running statistics) and the loss accumulator; the weights stay (no optimizer runs). init_weights
// or a checkpoint's load sets the model afterwards; the loss accumulator is zeroed here.
static int warm_up(tk_instance *I, tk_err *e) {
    if (I->wl->version < TK_WORKLOAD_V6 || !I->wl->warmup || I->c->backend != TK_BACKEND_CUDA) return 0;
    I->reduced_from = I->P.dense_n;
    int rc = I->wl->step(I->model, e);
    I->c->gemm_sm_margin = 0;
    TRY(rc);
    TRY(tk_memset0(I->c, I->loss_acc, 16, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(I->c, e);
}

// optimizer.distributed with several ranks (engine/optimizer.h): the shares' layout, its buckets
// the exchange's, padded so that every bucket splits evenly (the dense span is padded by
// tk_params_alloc). Read here, before the workload allocates its tensors; tk_optimizer_config
// checks the key's form later. A workload reducing its own gradients (DLRM: the dense part beside
// its embeddings' exchange) has no bucketed reduction to scatter: a usage error.
static int shard_plan(tk_instance *I, tk_comm *comm, tk_err *e) {
    const json_t *o = json_object_get(I->effective, "optimizer");
    if (!comm || I->dist.world < 2 || !json_is_true(json_object_get(o, "distributed"))) return 0;
    if (I->wl->own_grad_reduce) {
        tk_err_set(e, TK_EUSAGE, "%s: optimizer.distributed: the workload reduces its own gradients", I->wl->name);
        return tk_err_hint(e, "set optimizer.distributed=false");
    }
    size_t m = tk_opt_shard_multiple(I->dist.world);
    I->bucket = (I->bucket + m - 1) / m * m;
    I->P.dense_multiple = m;
    I->shard = (tk_opt_shard){.comm = comm, .rank = I->dist.rank, .world = I->dist.world, .bucket = I->bucket};
    return 0;
}

int tk_instance_create(tk_instance *I, tk_ctx *c, tk_comm *comm, double comm_timeout, tk_err *e) {
    I->c = c;
    TRY(tk_dist_init(&I->dist, c, comm, comm_timeout, e));
    tk_params_init(&I->P, c, I->dist.rank);
    TRY(tk_malloc(c, &I->scalars, 64, e));
    TRY(tk_memset0(c, I->scalars, 64, TK_STREAM_COMPUTE, e));
    I->lr = (float *)I->scalars;
    I->step = (int64_t *)((char *)I->scalars + 8);
    I->loss_acc = (double *)((char *)I->scalars + 16);
    tk_wl_env env = {.c = c, .dist = &I->dist, .params = &I->P, .lr = I->lr, .step = I->step, .loss_acc = I->loss_acc,
                     .prof = &I->prof, .acts = &I->acts};
    I->bucket = bucket_floats();
    I->sm_margin = sm_margin();
    if (comm && I->dist.world > 1 && !I->wl->own_grad_reduce) {
        env.grads_ready = grads_ready;
        env.grads_arg = I;
    }
    int rc = precision_check(I, e);
    if (!rc) rc = shard_plan(I, comm, e);
    if (!rc) rc = I->wl->create(I->cfg, &env, &I->model, e);
    if (rc) {
        if (I->model) I->wl->destroy(I->model); // (as far as create got)
        I->model = NULL;
        return rc;
    }
    if (!I->P.allocated) return tk_err_set(e, TK_EINTERNAL, "workload %s: create did not allocate its tensors", I->wl->name);
    I->shard.n = I->P.dense_n;
    if (env.grads_ready && check_wanted(I) && !(I->ready_copy = malloc(I->P.dense_n * sizeof(float) + 1)))
        return tk_err_set(e, TK_EIO, "out of host memory");
    return warm_up(I, e);
}

int tk_wl_acts(const tk_wl_env *env, const size_t *sz, void **const *dst, int n, tk_err *e) {
    tk_arena *a = env->acts;
    if (a->base) return tk_err_set(e, TK_EINTERNAL, "the activation arena is taken already");
    size_t total = 256; // (none: still one allocation)
    for (int k = 0; k < n; k++) total += ((sz[k] ? sz[k] : 1) + 255) & ~(size_t)255;
    TRY(tk_arena_init(env->c, a, total, "activations", e));
    for (int k = 0; k < n; k++) {
        void *p;
        TRY(tk_arena_take(a, sz[k] ? sz[k] : 1, &p, e));
        memcpy(dst[k], &p, sizeof p); // (the slots are pointers of several types)
    }
    TRY(tk_memset0(env->c, a->base, a->cap, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(env->c, e);
}

int tk_instance_optimizer(tk_instance *I, int64_t steps_per_epoch, tk_err *e) {
    I->run.steps_per_epoch = steps_per_epoch;
    TRY(tk_optimizer_config(I->effective, I->path, steps_per_epoch, &I->run.opt, e));
    return tk_optimizer_init_shard(&I->opt, &I->run.opt, &I->P, I->shard.comm ? &I->shard : NULL, e);
}

int tk_instance_profile(tk_instance *I, tk_err *e) {
    return I->wl->profile_marks > 0 ? tk_prof_start(I->c, I->wl->profile_marks, I->wl->name, &I->prof, e) : 0;
}

void tk_instance_destroy(tk_instance *I) {
    if (I->model) I->wl->destroy(I->model);
    I->model = NULL;
    if (I->acts.base) tk_arena_release(I->c, &I->acts);
    tk_prof_stop(&I->prof);
    tk_optimizer_release(&I->opt);
    if (I->P.c) tk_params_release(&I->P);
    if (I->scalars) tk_free(I->c, I->scalars);
    I->scalars = NULL;
    free(I->ready_copy);
    I->ready_copy = NULL;
    if (I->dist.c) tk_dist_release(&I->dist);
    if (I->cfg) I->wl->config_free(I->cfg);
    I->cfg = NULL;
    json_decref(I->effective);
    I->effective = NULL;
}

int tk_instance_step(tk_instance *I, tk_err *e) {
    tk_ctx *c = I->c;
    TRY(tk_optimizer_schedule(&I->opt, I->step, I->lr, e));
    I->reduced_from = I->checked_from = I->P.dense_n;
    int src = I->wl->step(I->model, e);
    c->gemm_sm_margin = 0; // (the optimizer and the next forward have every SM)
    TRY(src);
    TRY(check_same(I, I->checked_from, I->P.dense_n, e));
    if (!I->wl->own_grad_reduce && I->dist.comm && I->dist.world > 1 && I->P.dense_n > 0) {
        // The dense gradients summed over the ranks (the loss is normalized by the global batch):
        // what grads_ready has not reduced yet, then the compute stream joins the comm stream
        // (forked and joined: capturable).
        if (I->reduced_from > 0) TRY(reduce_span(I, 0, I->reduced_from, e));
        TRY(tk_comm_stream_wait(I->dist.comm, TK_STREAM_COMPUTE, TK_STREAM_COMM, e));
    }
    tk_range_push("optimizer");
    int rc = tk_optimizer_update(&I->opt, &I->P, I->lr, I->step, e);
    tk_range_pop();
    if (!rc && I->wl->after_update) rc = I->wl->after_update(I->model, e);
    (void)c;
    return rc;
}

int tk_instance_read_loss(tk_instance *I, double *mean, int reset, tk_err *e) {
    // Each rank accumulated its samples' loss sum / global batch per step: the ranks' accumulators
    // add up to the global mean's, summed here in rank order (every rank logs the same value).
    double all[2 * TK_MAX_WORLD];
    TRY(tk_dist_gather16(&I->dist, I->loss_acc, all, e));
    double sum = 0;
    for (int i = 0; i < I->dist.world; i++) sum += all[2 * i];
    *mean = all[1] > 0 ? sum / all[1] : 0.0 / 0.0;
    if (reset) TRY(tk_memset0(I->c, I->loss_acc, 16, TK_STREAM_COMPUTE, e));
    return 0;
}

int tk_instance_write_step(tk_instance *I, int64_t step, tk_err *e) {
    TRY(tk_memcpy_h2d(I->c, I->step, &step, 8, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(I->c, e);
}

int tk_instance_init_weights(tk_instance *I, uint64_t seed, tk_err *e) {
    TRY(I->wl->init_weights(I->model, seed, e));
    if (I->wl->weights_loaded) TRY(I->wl->weights_loaded(I->model, e));
    TRY(tk_optimizer_ema_reset(&I->opt, &I->P, e)); // (the average starts at the initial weights)
    TRY(tk_memset0(I->c, I->step, 8, TK_STREAM_COMPUTE, e));
    TRY(tk_memset0(I->c, I->loss_acc, 16, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(I->c, e);
}

int tk_instance_save(tk_instance *I, const char *path, const json_t *meta, tk_err *e) {
    TRY(tk_optimizer_gather_state(&I->opt, &I->P, e)); // (distributed: the file holds the whole state)
    return tk_ckpt_save(&I->dist, &I->P, path, meta, e);
}

int tk_instance_load(tk_instance *I, const char *path, int flags, json_t **meta, int *verified, tk_err *e) {
    int rc = tk_ckpt_load(&I->P, path, flags, meta, verified, e);
    if (!rc && I->wl->weights_loaded) rc = I->wl->weights_loaded(I->model, e);
    // weights alone (--init-checkpoint): the moving average starts at them, as at an initialization
    if (!rc && (flags & TK_CKPT_MODEL_ONLY)) rc = tk_optimizer_ema_reset(&I->opt, &I->P, e);
    if (rc && meta) {
        json_decref(*meta);
        *meta = NULL;
    }
    return rc;
}

int tk_instance_ema_swap(tk_instance *I, tk_err *e) {
    if (!I->opt.ema) return 0;
    TRY(tk_optimizer_ema_swap(&I->opt, &I->P, e));
    return I->wl->weights_loaded ? I->wl->weights_loaded(I->model, e) : 0;
}
