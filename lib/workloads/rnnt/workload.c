// RNN-T (MLPerf Training v1.x speech recognition, LibriSpeech) as a workload of the training engine
// (lib/engine/workload.h): the configuration ("model", "data", "eval"), the training reader over
// prep librispeech's records (data.h: bucketing sampler, per-rank shares), the step (the batch's
// features computed from its audio in the step: rnnt_features, then the model's forward and
// backward, model.h), the evaluation (greedy decoding, decode.h, and the word error rate,
// lib/speech/wer.h) and the MLLOG keys (mllog.h). The optimizer (LAMB), its schedule
// (warmup_hold_exp), clipping and the weights' moving average for evaluation are the engine's
// "optimizer" section, as the reference's train.py (mlcommons/training rnn_speech_recognition/
// pytorch) does them.
//
// Which reference behaviour is followed where (the rest: model.h, data.h, decode.h, wer.h):
//  - the loss of a step: the per-utterance negative log-likelihoods summed and divided by the
//    global batch (the reference's RNNTLoss mean over the batch; several ranks' shares add up);
//  - evaluation (train.py evaluate, common/helpers.py process_evaluation_epoch): every utterance
//    of the evaluation set in the records' order, the validation features (no speed perturbation,
//    no SpecAugment), the encoder, the greedy decoder (max_symbols_per_step 30, eval.max_symbols
//    a hypothesis), the hypotheses' ids detokenized with the sentencepiece model, the references
//    the detokenized target ids (gather_transcripts), one WER over the whole set (errors and words
//    summed over the ranks before the division). The engine swaps the moving average's weights in.
//  - the sentencepiece model: the config's data.spm when given, else the file the records' schema
//    meta names (spm_model: prep librispeech trains it and writes it beside the records, as
//    librispeechN.model), looked up in the folder of the first evaluation file.
//
// The training step is one CUDA graph per key (graph_key): each batch's loader thread builds, beside
// the batch, its plan (an extra field "batch.plan": the features' offsets, rates, frame counts and
// epoch, data.h rnnt_feat_plan; the model's index arrays, lengths, labels, lattice rows and
// embedding segments, model.h rnnt_plan_fill; the transpose's rows), padded to extents that are
// multiples of RNNT_PAD_FRAMES output frames and RNNT_PAD_LABELS labels, the joint's rows rounded
// up to one of RNNT_ROW_LEVELS steps of the padded lattice. The engine copies it to the device with
// the batch; the step (features, then the model's forward and backward) reads only device memory,
// its launches depending only on the padded extents: the key is (Tp, Up, rows level), a bounded
// number of graphs (the engine keeps 64). The padded step computes the unpadded one's values (the
// time masks over the batch's own frames, StackTime's zeros past them, the LSTMs causal, padded
// rows and label positions zero; test_rnnt_model padded_step_is_the_step, test_melfeat
// melfeat_padded_call); the cost is the padding's work. The evaluation's features and decoding
// stay eager (decode.c captures its own loop).
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cfg.h"
#include "engine/data.h"
#include "engine/workload.h"
#include "rows.h"
#include "speech/wer.h"
#include "workloads/rnnt/data.h"
#include "workloads/rnnt/decode.h"
#include "workloads/rnnt/mllog.h"
#include "workloads/rnnt/model.h"
#include "workloads/rnnt/workload.h"

static const char *const rnnt_precisions[] = {"fp32", "bf16", NULL};
static const char *const rnnt_sections[] = {"eval", NULL};

#define RNNT_MAX_PER_STEP 30 // the reference's max_symbols_per_step (MLPerf's decoder)
#define RNNT_F_PLAN RNNT_NFIELDS // the batch's extra field

typedef struct rnnt_wl_cfg {
    rnnt_model_cfg net;          // b, max_frames set by create
    rnnt_data_cfg data;          // max_tokens resolved (the batch's token width K)
    rnnt_eval_cfg ev;
    int64_t Lmax;                // samples a training utterance at most (data.max_duration)
    int64_t Leval;               // samples an evaluation utterance at most (eval.max_duration)
    char spm[4096];              // data.spm, or ""
    int64_t batch;
    uint64_t seed;
} rnnt_wl_cfg;

// ---- configuration ----

static int config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **out,
                        tk_err *e) {
    static const char *const model_keys[] = {"enc_hidden",   "enc_pre_layers",   "enc_post_layers",    "stack_time_factor",
                                             "pred_hidden",  "pred_layers",      "joint_hidden",       "vocab",
                                             "forget_gate_bias", "weights_init_scale", "dropouts", "precision", NULL};
    static const char *const dropouts_keys[] = {"enc", "pred", "joint", NULL};
    *out = NULL;
    rnnt_wl_cfg *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = 0;
    json_t *meta = NULL;
#define TRYC(x)                                                                                                        \
    do {                                                                                                               \
        if ((rc = (x))) goto out;                                                                                      \
    } while (0)
    TRYC(tk_cfg_keys(root, path, "model", model_keys, e));
    TRYC(tk_cfg_keys(root, path, "model.dropouts", dropouts_keys, e));
    // "data": the reader's keys (data.c) and data.spm, the workload's
    json_t *data = json_object_get(root, "data");
    json_t *spm = data ? json_object_get(data, "spm") : NULL;
    if (spm && !json_is_null(spm)) {
        if (!json_is_string(spm) || !json_string_length(spm) || json_string_length(spm) >= sizeof cfg->spm) {
            rc = tk_cfg_bad(e, path, "data.spm", "expected a file name");
            goto out;
        }
        snprintf(cfg->spm, sizeof cfg->spm, "%s", json_string_value(spm));
    }
    json_t *rest = data && json_is_object(data) ? json_copy(data) : NULL;
    if (rest) json_object_del(rest, "spm");
    rnnt_data_cfg_default(&cfg->data);
    rc = rnnt_data_cfg_parse(rest ? rest : data, path, &cfg->data, e);
    json_decref(rest);
    if (rc) goto out;
    cfg->data.seed = run->seed, cfg->data.batch = run->batch;
    TRYC(rnnt_eval_cfg_parse(root, path, &cfg->ev, e));
    if (run->batch > 65536) {
        rc = tk_cfg_bad(e, path, "train.global_batch_size", "too large (at most 65536)");
        goto out;
    }
    rnnt_model_cfg *n = &cfg->net;
    *n = rnnt_model_cfg_default(1, 1, 0);
    // the model's keys onto rnnt_model_cfg (model.h; absent: the reference's sizes)
    int stack = 2;
    const struct { const char *key; int lo, hi; int *dst; } ints[] = {
        {"model.enc_hidden", 1, 8192, &n->enc_n_hid},         {"model.enc_pre_layers", 1, 16, &n->enc_pre_rnn_layers},
        {"model.enc_post_layers", 1, 16, &n->enc_post_rnn_layers},
        {"model.stack_time_factor", 2, 2, &stack}, // (model.h: the only factor)
        {"model.pred_hidden", 1, 8192, &n->pred_n_hid},       {"model.pred_layers", 1, 16, &n->pred_rnn_layers},
        {"model.joint_hidden", 1, 8192, &n->joint_n_hid},     {"model.vocab", 2, 1 << 20, &n->n_classes}};
    for (size_t k = 0; k < sizeof ints / sizeof *ints; k++) {
        int64_t v = *ints[k].dst;
        TRYC(tk_cfg_int_opt(root, path, ints[k].key, ints[k].lo, ints[k].hi, &v, e));
        *ints[k].dst = (int)v;
    }
    const struct { const char *key; double lo, hi; float *dst; } nums[] = {
        {"model.forget_gate_bias", -100, 100, &n->forget_gate_bias}, {"model.weights_init_scale", 0, 100, &n->weights_init_scale},
        {"model.dropouts.enc", 0, 0.999, &n->enc_dropout},           {"model.dropouts.pred", 0, 0.999, &n->pred_dropout},
        {"model.dropouts.joint", 0, 0.999, &n->joint_dropout}};
    for (size_t k = 0; k < sizeof nums / sizeof *nums; k++) {
        double d = *nums[k].dst;
        TRYC(tk_cfg_num_opt(root, path, nums[k].key, nums[k].lo, nums[k].hi, &d, e));
        *nums[k].dst = (float)d;
    }
    tk_precision pr;
    TRYC(tk_cfg_precision(root, path, rnnt_precisions, &pr, e));
    n->bf16 = pr == TK_PRECISION_BF16;
    n->in_feats = cfg->data.n_mels * cfg->data.stack;
    n->seed = run->seed;
    // the training data's vocabulary (prep librispeech's meta vocab_size: pieces, the blank not
    // counted) must fit below the blank
    meta = data_meta ? json_loads(data_meta, 0, NULL) : NULL;
    json_t *vs = meta ? json_object_get(meta, "vocab_size") : NULL;
    if (json_is_integer(vs) && json_integer_value(vs) >= n->n_classes) {
        char what[160];
        snprintf(what, sizeof what, "%d classes for the data's %lld sentence pieces and the blank (want at least %lld)",
                 n->n_classes, (long long)json_integer_value(vs), (long long)json_integer_value(vs) + 1);
        rc = tk_cfg_bad(e, path, "model.vocab", what);
        goto out;
    }
    // the batch's bounds: samples from the durations; tokens from data.max_tokens, else 20 a second
    // of the longest utterance (LibriSpeech's 1023 pieces give about 5; a small vocabulary more)
    cfg->Lmax = (int64_t)ceil(cfg->data.max_duration * RNNT_SAMPLE_RATE);
    cfg->Leval = (int64_t)ceil(cfg->ev.max_duration * RNNT_SAMPLE_RATE);
    if (cfg->data.max_tokens <= 0) cfg->data.max_tokens = (int)ceil(20 * cfg->data.max_duration);
    n->max_labels = cfg->data.max_tokens;
    cfg->batch = run->batch;
    cfg->seed = run->seed;
#undef TRYC
out:
    json_decref(meta);
    if (rc) free(cfg);
    else *out = cfg;
    return rc;
}

static void config_free(void *cfg) { free(cfg); }

// The model's configuration at B utterances a step (create and the readers' plans agree on it):
// frames the features of the longest utterance have, training (speed perturbed) or evaluation;
// the joint's cells bounded by the training batches (the evaluation's longer utterances only
// encode and decode): frames of max_duration at the fastest speed (10 ms hops, subsampled, stacked
// by 2; a few frames of margin), times the labels + 1.
static rnnt_model_cfg net_cfg(const rnnt_wl_cfg *cfg, int B) {
    rnnt_model_cfg n = cfg->net;
    const int64_t L = cfg->Lmax > cfg->Leval ? cfg->Lmax : cfg->Leval;
    n.b = B, n.max_frames = (int)((rnnt_feat_frames_cap(&cfg->data, L) + cfg->data.sub - 1) / cfg->data.sub);
    const double rmax = cfg->data.speed && cfg->data.speed_max > 1 ? cfg->data.speed_max : 1;
    const int64_t Ttr = (int64_t)ceil((double)cfg->Lmax * rmax / 160.0 / cfg->data.sub) + 4;
    n.max_rows = (int64_t)B * ((Ttr + 1) / 2) * (cfg->data.max_tokens + 1);
    return n;
}

// The plan field: the features' plan, the model's, the transpose's rows (Tmax B int32).
typedef struct plan_layout {
    size_t model, spos, bytes;   // offsets (the features' at 0), the total
} plan_layout;
static plan_layout layout_of(const rnnt_model_cfg *n) {
    const rnnt_plan_dims d = rnnt_model_plan_dims(n);
    plan_layout l;
    l.model = (rnnt_feat_plan_bytes(n->b) + 7) / 8 * 8;
    l.spos = (l.model + rnnt_plan_bytes(&d) + 7) / 8 * 8;
    l.bytes = l.spos + (size_t)n->max_frames * (size_t)n->b * 4;
    return l;
}

// The plan of batch hb (host fields) into plan (plan_layout, host memory): lab scratch (B K).
static int plan_fill(const rnnt_wl_cfg *cfg, const rnnt_model_cfg *n, const rnnt_batch *hb, int32_t *lab,
                     char *plan, tk_err *e) {
    const int B = n->b, K = cfg->data.max_tokens;
    const plan_layout l = layout_of(n);
    const int64_t Lfeat = cfg->Lmax > cfg->Leval ? cfg->Lmax : cfg->Leval;
    TRY(rnnt_feat_plan_fill(&cfg->data, 1, B, hb, Lfeat, plan, e));
    const rnnt_feat_plan fp = rnnt_feat_plan_at(plan, B);
    // the labels (B, U) at the batch's longest transcript
    int U = 0;
    for (int b = 0; b < B; b++)
        if (hb->ntok[b] > U) U = hb->ntok[b];
    for (int b = 0; b < B; b++)
        for (int u = 0; u < U; u++) lab[(size_t)b * U + u] = hb->tokens[(size_t)b * K + u];
    const rnnt_step_batch bt = {*fp.T, U, fp.ylen, hb->ntok, lab};
    const rnnt_plan_pad pad = {RNNT_PAD_FRAMES, RNNT_PAD_LABELS, RNNT_ROW_LEVELS};
    const rnnt_plan_dims d = rnnt_model_plan_dims(n);
    rnnt_plan_shape s;
    TRY(rnnt_plan_fill(&d, &bt, &pad, plan + l.model, &s, e));
    // the features (B, Tp, I) to time major (Tp, B, I): row t B + b from row b Tp + t
    int32_t *spos = (int32_t *)(plan + l.spos);
    for (int t = 0; t < s.Tp; t++)
        for (int b = 0; b < B; b++) spos[(size_t)t * B + b] = b * s.Tp + t;
    return 0;
}

// ---- the model ----

typedef struct rnnt_wl {
    rnnt_wl_cfg cfg;
    tk_wl_env env;
    tk_ctx *c;
    int B;                       // this rank's utterances a step
    rnnt_model *m;
    rnnt_feat *feat;
    rnnt_decoder *dec;
    int64_t Tmax;                // feature frames at most (the model's max_frames)
    rnnt_field f[RNNT_NFIELDS];  // the batch's fields (K = cfg.data.max_tokens)
    plan_layout lay;             // the plan field's
    tk_arena ar;                 // the workload's device buffers:
    void *in[RNNT_NFIELDS + 1];  // the batch's input fields, the plan last
    float *y;                    // (B, Tmax, I) the features, batch major
    int32_t *spos;               // (Tmax B) the transpose's rows (evaluation)
    // host
    rnnt_plan_shape shape[2];    // the staging slots' plans' extents
    rnnt_plan_shape cur;         // the input's
    int32_t *ylen, *h_spos;
} rnnt_wl;

static void wl_destroy(void *model) {
    rnnt_wl *w = model;
    if (!w) return;
    rnnt_decoder_destroy(w->dec);
    rnnt_model_destroy(w->m);
    rnnt_feat_destroy(w->feat);
    if (w->ar.base) tk_arena_release(w->c, &w->ar);
    free(w->ylen), free(w->h_spos);
    free(w);
}

static int wl_create(const void *cfgp, const tk_wl_env *env, void **model, tk_err *e) {
    const rnnt_wl_cfg *cfg = cfgp;
    rnnt_wl *w = calloc(1, sizeof *w);
    if (!w) return tk_err_set(e, TK_EIO, "out of host memory");
    *model = w;
    w->cfg = *cfg, w->env = *env, w->c = env->c;
    int64_t b;
    TRY(tk_per_rank_batch("rnnt", cfg->batch, env->dist->world, &b, e));
    w->B = (int)b;
    // the features of the longest utterance, training (speed perturbed) or evaluation
    const int64_t L = cfg->Lmax > cfg->Leval ? cfg->Lmax : cfg->Leval;
    TRY(rnnt_feat_create(w->c, &cfg->data, w->B, L, &w->feat, e));
    w->Tmax = rnnt_feat_max_out(w->feat);
    const rnnt_model_cfg n = net_cfg(cfg, w->B);
    if (n.max_frames != w->Tmax)
        return tk_err_set(e, TK_EINTERNAL, "rnnt: %d frames for the model, %lld for the features", n.max_frames,
                          (long long)w->Tmax);
    TRY(rnnt_model_create(&n, env, &w->m, e));
    TRY(rnnt_decoder_create(w->m, RNNT_MAX_PER_STEP, cfg->ev.max_symbols, w->c->backend == TK_BACKEND_CUDA, &w->dec,
                            e));
    rnnt_batch_fields(w->B, cfg->Lmax, cfg->data.max_tokens, w->f);
    const int I = w->m->I;
    w->lay = layout_of(&n);
    w->cur.key = -1;
    enum { NB = RNNT_NFIELDS + 3 };
    void **slot[NB];
    size_t size[NB];
    for (int k = 0; k < RNNT_NFIELDS; k++) slot[k] = &w->in[k], size[k] = (size_t)w->f[k].count * tk_dtype_size(w->f[k].dtype);
    slot[RNNT_F_PLAN] = &w->in[RNNT_F_PLAN], size[RNNT_F_PLAN] = w->lay.bytes;
    slot[NB - 2] = (void **)&w->y, size[NB - 2] = (size_t)w->B * (size_t)w->Tmax * (size_t)I * 4;
    slot[NB - 1] = (void **)&w->spos, size[NB - 1] = (size_t)w->B * (size_t)w->Tmax * 4;
    size_t total = 256;
    for (int k = 0; k < NB; k++) total += (size[k] + 255) & ~(size_t)255;
    TRY(tk_arena_init(w->c, &w->ar, total, "rnnt", e));
    for (int k = 0; k < NB; k++) TRY(tk_arena_take(&w->ar, size[k] ? size[k] : 1, slot[k], e));
    TRY(tk_memset0(w->c, w->ar.base, w->ar.cap, TK_STREAM_COMPUTE, e));
    w->ylen = calloc((size_t)w->B, 4);
    w->h_spos = calloc((size_t)w->B * (size_t)w->Tmax, 4);
    if (!w->ylen || !w->h_spos) return tk_err_set(e, TK_EIO, "out of host memory");
    // The features once, eagerly, on a batch of one silent sample an utterance: cuFFT makes its
    // plan on the first call, which a CUDA graph's capture (the first training step) cannot do.
    int32_t *len = malloc((size_t)w->B * 4), *zero = calloc((size_t)w->B, 4);
    float *rate = malloc((size_t)w->B * 4);
    int rc = len && zero && rate ? 0 : tk_err_set(e, TK_EIO, "out of host memory");
    for (int b = 0; !rc && b < w->B; b++) len[b] = 1, rate[b] = 1;
    const rnnt_batch hb = {.len = len, .utt = zero, .rate = rate, .ntok = zero, .epoch = zero};
    int64_t T;
    if (!rc) rc = rnnt_features(w->feat, 0, w->B, &hb, w->in[RNNT_F_PCM], w->y, w->ylen, NULL, &T, e);
    free(len), free(zero), free(rate);
    return rc ? rc : tk_ctx_sync(w->c, e);
}

static int wl_init_weights(void *model, uint64_t seed, tk_err *e) { return rnnt_model_init(((rnnt_wl *)model)->m, seed, e); }

static int wl_weights_loaded(void *model, tk_err *e) {
    return tk_params_refresh_copy(((rnnt_wl *)model)->m->P, e); // (the bf16 compute copy)
}

// The batch: the reader's fields as it writes them (data.h), then the step's plan (bytes); the
// features are computed in the step.
static int wl_batch(const void *model, tk_wl_field *f) {
    const rnnt_wl *w = model;
    for (int k = 0; k < RNNT_NFIELDS; k++)
        f[k] = (tk_wl_field){w->f[k].name, w->f[k].dtype, 1, {w->f[k].count}, w->in[k]};
    f[RNNT_F_PLAN] = (tk_wl_field){"batch.plan", TK_U8, 1, {(int64_t)w->lay.bytes}, w->in[RNNT_F_PLAN]};
    return RNNT_NFIELDS + 1;
}

// A staged batch's plan extents (its step's shapes and graph key), read from the host plan.
static void wl_host_batch(void *model, int slot, void *const *fields) {
    rnnt_wl *w = model;
    rnnt_plan_shape_of((const char *)fields[RNNT_F_PLAN] + w->lay.model, &w->shape[slot & 1]);
}

static int wl_use(void *model, int slot, tk_err *e) {
    (void)e;
    rnnt_wl *w = model;
    w->cur = w->shape[slot & 1];
    return 0;
}

// The features of batch hb (pcm: its audio in the backend's memory) into the model's input, time
// major: (B, T, I) -> (T, B, I). *T the frames, w->ylen each utterance's.
static int features(rnnt_wl *w, int train, const rnnt_batch *hb, const float *pcm, int *T, tk_err *e) {
    int64_t T64;
    TRY(rnnt_features(w->feat, train, w->B, hb, pcm, w->y, w->ylen, NULL, &T64, e));
    const int B = w->B;
    *T = (int)T64;
    for (int b = 0; b < B; b++)
        if (w->ylen[b] < 1) return tk_err_set(e, TK_EDATA, "rnnt: utterance %d of the batch has no feature frames", hb->utt[b]);
    for (int t = 0; t < *T; t++)
        for (int b = 0; b < B; b++) w->h_spos[(size_t)t * B + b] = b * *T + t;
    TRY(tk_memcpy_h2d(w->c, w->spos, w->h_spos, (size_t)*T * B * 4, TK_STREAM_COMPUTE, e));
    return tk_rows_copy(w->c, w->y, TK_F32, w->spos, w->m->feat, TK_F32, NULL, (int64_t)*T * B, NULL, w->m->I, e);
}

// ---- the training step ----

// The step of the input batch from its plan (device memory only; shapes: the plan's padded
// extents): the features at Tp output frames (Tp sub STFT frames, at most the buffers'), time
// major, then the model's forward and backward.
static int wl_step(void *model, tk_err *e) {
    rnnt_wl *w = model;
    const rnnt_plan_shape *s = &w->cur;
    const int B = w->B, sub = w->cfg.data.sub;
    if (s->Tp < 1) return tk_err_set(e, TK_EINTERNAL, "rnnt: a step before any batch");
    const char *plan = w->in[RNNT_F_PLAN];
    const int64_t Fcap = rnnt_feat_frames_cap(&w->cfg.data, w->cfg.Lmax > w->cfg.Leval ? w->cfg.Lmax : w->cfg.Leval);
    const int Fp = (int64_t)s->Tp * sub < Fcap ? s->Tp * sub : (int)Fcap;
    TRY(rnnt_features_plan(w->feat, 1, B, plan, w->in[RNNT_F_PCM], Fp, s->Tp, w->y, e));
    TRY(tk_rows_copy(w->c, w->y, TK_F32, (const int32_t *)(plan + w->lay.spos), w->m->feat, TK_F32, NULL,
                     (int64_t)s->Tp * B, NULL, w->m->I, e));
    // this rank's share of the global batch's mean loss
    const float scale = (float)(1.0 / (double)(w->cfg.batch > 0 ? w->cfg.batch : B));
    return rnnt_model_step_plan(w->m, plan + w->lay.model, s, scale, 1, e);
}

// One graph per plan key: the padded frames, labels and row level.
static int64_t wl_graph_key(void *model) { return ((rnnt_wl *)model)->cur.key; }

int rnnt_wl_input(void *model, void *const *fields, tk_err *e) {
    rnnt_wl *w = model;
    const rnnt_model_cfg n = net_cfg(&w->cfg, w->B);
    char *plan = malloc(w->lay.bytes);
    int32_t *lab = malloc((size_t)w->B * (size_t)(w->cfg.data.max_tokens + 1) * 4);
    const rnnt_batch hb = rnnt_batch_from_fields(fields);
    int rc = plan && lab ? 0 : tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = plan_fill(&w->cfg, &n, &hb, lab, plan, e);
    for (int k = 0; k < RNNT_NFIELDS && !rc; k++)
        rc = tk_memcpy_h2d(w->c, w->in[k], fields[k], (size_t)w->f[k].count * tk_dtype_size(w->f[k].dtype),
                           TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(w->c, w->in[RNNT_F_PLAN], plan, w->lay.bytes, TK_STREAM_COMPUTE, e);
    if (!rc) {
        void *f[RNNT_NFIELDS + 1];
        memcpy(f, fields, RNNT_NFIELDS * sizeof *f);
        f[RNNT_F_PLAN] = plan;
        wl_host_batch(w, 0, f);
        rc = wl_use(w, 0, e);
    }
    free(plan), free(lab);
    return rc;
}

// ---- the training reader ----

// The training records are read once and shared by the process's readers (one a loader thread):
// one slot, the dataset of the last paths loaded while a reader holds it (as ssd's workload).
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char key[4096];
    rnnt_dataset *d;
    double max_duration;
    int refs;
} shared;

static int dataset_get(char *const *paths, int npaths, double max_duration, rnnt_dataset **d, tk_err *e) {
    char key[sizeof shared.key];
    size_t k = 0;
    key[0] = 0;
    for (int i = 0; i < npaths && k < sizeof key; i++) k += (size_t)snprintf(key + k, sizeof key - k, "%s%c", paths[i], 1);
    if (k >= sizeof key) key[0] = 0; // too long to share
    pthread_mutex_lock(&shared_mu);
    int rc = 0;
    if (key[0] && shared.refs && shared.max_duration == max_duration && strcmp(shared.key, key) == 0)
        shared.refs++, *d = shared.d;
    else {
        rc = rnnt_dataset_load(paths, npaths, max_duration, d, e);
        if (!rc && key[0] && !shared.refs) {
            snprintf(shared.key, sizeof shared.key, "%s", key);
            shared.d = *d, shared.refs = 1, shared.max_duration = max_duration;
        }
    }
    pthread_mutex_unlock(&shared_mu);
    return rc;
}

static void dataset_put(rnnt_dataset *d) {
    pthread_mutex_lock(&shared_mu);
    if (d == shared.d && shared.refs) {
        if (--shared.refs == 0) rnnt_dataset_free(d), shared.d = NULL, shared.key[0] = 0;
    } else rnnt_dataset_free(d);
    pthread_mutex_unlock(&shared_mu);
}

typedef struct rnnt_rd {
    const rnnt_wl_cfg *cfg;
    rnnt_dataset *d;
    rnnt_reader *r;
    int64_t room, Ld;            // the field's samples (B Lmax) and the batch's (B, the data's longest)
    rnnt_model_cfg net;          // the model's (its plan's extents)
    int32_t *lab;                // (B K) the plan's labels
} rnnt_rd;

static void rd_close(void *p) {
    rnnt_rd *r = p;
    if (!r) return;
    rnnt_reader_close(r->r);
    if (r->d) dataset_put(r->d);
    free(r->lab), free(r);
}

static int rd_open(const void *cfgp, int rank, int world, char *const *paths, int npaths, void **out, tk_err *e) {
    const rnnt_wl_cfg *cfg = cfgp;
    *out = NULL;
    rnnt_rd *r = calloc(1, sizeof *r);
    if (!r) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = dataset_get(paths, npaths, cfg->data.max_duration, &r->d, e);
    int64_t Ld = 0;
    int K = 0;
    if (!rc) {
        rnnt_batch_dims(&cfg->data, r->d, &Ld, &K);
        if (Ld > cfg->Lmax) // (the filter keeps utterances of at most max_duration: cannot happen)
            rc = tk_err_set(e, TK_EINTERNAL, "rnnt: an utterance of %lld samples passed max_duration", (long long)Ld);
        else if (rnnt_dataset_max_tokens(r->d) > K)
            rc = tk_err_set(e, TK_EDATA, "%s: a transcript of %d tokens, more than the batch's %d (data.max_tokens)",
                            paths[0], rnnt_dataset_max_tokens(r->d), K);
    }
    if (!rc) rc = rnnt_reader_open(&cfg->data, r->d, rank, world, &r->r, e);
    if (!rc) {
        const int b = rnnt_reader_per_rank(r->r);
        r->room = (int64_t)b * cfg->Lmax, r->Ld = (int64_t)b * Ld;
        r->cfg = cfg, r->net = net_cfg(cfg, b);
        if (!(r->lab = calloc((size_t)b * (size_t)(cfg->data.max_tokens + 1), 4)))
            rc = tk_err_set(e, TK_EIO, "out of host memory");
    }
    if (rc) rd_close(r);
    else *out = r;
    return rc;
}

static uint64_t rd_count(void *p) { return (uint64_t)rnnt_dataset_count(((rnnt_rd *)p)->d); }

static int rd_batch(void *p, int64_t step, int64_t spe, void *const *fields, tk_err *e) {
    rnnt_rd *r = p;
    rnnt_batch b = rnnt_batch_from_fields(fields);
    TRY(rnnt_reader_batch(r->r, step, spe, &b, e));
    // the reader zeroes its B Lmax of the data; the field's rest (the config's bound) too
    memset(b.pcm + r->Ld, 0, (size_t)(r->room - r->Ld) * sizeof *b.pcm);
    return plan_fill(r->cfg, &r->net, &b, r->lab, fields[RNNT_F_PLAN], e);
}

// ---- evaluation ----

typedef struct rnnt_evalset {
    rnnt_dataset *d;
    tk_spm_vocab *v;
    char **ref;                  // the references' texts (the target ids detokenized)
    int64_t n, Lmax;
    int K;
    void *hmem[RNNT_NFIELDS];    // a batch on the host
    rnnt_batch hb;
    float *pcm;                  // its audio in the backend's memory
    int32_t *hyp, *nhyp;
} rnnt_evalset;

static void es_free(void *model, void *p) {
    rnnt_wl *w = model;
    rnnt_evalset *s = p;
    if (!s) return;
    for (int64_t i = 0; s->ref && i < s->n; i++) free(s->ref[i]);
    free(s->ref);
    for (int k = 0; k < RNNT_NFIELDS; k++) free(s->hmem[k]);
    if (s->pcm) tk_free(w->c, s->pcm);
    free(s->hyp), free(s->nhyp);
    tk_spm_vocab_free(s->v);
    if (s->d) rnnt_dataset_free(s->d);
    free(s);
}

// The sentencepiece model: data.spm, else the records' meta spm_model in the first file's folder.
static int spm_path(const rnnt_wl *w, char *const *paths, int npaths, char *out, size_t n, tk_err *e) {
    if (w->cfg.spm[0]) return snprintf(out, n, "%s", w->cfg.spm), 0;
    char **files = NULL, *meta = NULL;
    int nf = 0;
    TRY(tk_data_paths(paths, npaths, &files, &nf, e));
    int rc = tk_data_meta(files, nf, &meta, e);
    json_t *j = !rc && meta ? json_loads(meta, 0, NULL) : NULL;
    const char *name = json_string_value(json_object_get(j, "spm_model"));
    if (!rc && !name) {
        rc = tk_err_set(e, TK_EDATA, "%s: the records name no sentencepiece model (spm_model)", nf ? files[0] : paths[0]);
        rc = tk_err_hint(e, "set data.spm to the .model prep librispeech used");
    } else if (!rc) {
        const char *slash = strrchr(files[0], '/');
        if (name[0] == '/' || !slash) snprintf(out, n, "%s", name);
        else snprintf(out, n, "%.*s/%s", (int)(slash - files[0]), files[0], name);
    }
    json_decref(j);
    free(meta);
    tk_data_paths_free(files, nf);
    return rc;
}

static int es_load(void *model, char *const *paths, int npaths, void **out, tk_err *e) {
    rnnt_wl *w = model;
    *out = NULL;
    rnnt_evalset *s = calloc(1, sizeof *s);
    if (!s) return tk_err_set(e, TK_EIO, "out of host memory");
    char spm[4200];
    int rc = rnnt_dataset_load(paths, npaths, 0, &s->d, e); // (every utterance, as input_val)
    if (!rc) rc = spm_path(w, paths, npaths, spm, sizeof spm, e);
    if (!rc) rc = tk_spm_vocab_load(spm, &s->v, e);
    if (!rc) {
        s->n = rnnt_dataset_count(s->d);
        s->Lmax = rnnt_dataset_max_samples(s->d), s->K = rnnt_dataset_max_tokens(s->d);
        if (s->Lmax > w->cfg.Leval)
            rc = tk_err_set(e, TK_EDATA, "%s: an utterance of %.2f s, longer than eval.max_duration %g s", paths[0],
                            (double)s->Lmax / RNNT_SAMPLE_RATE, w->cfg.ev.max_duration);
    }
    if (!rc && !(s->ref = calloc((size_t)s->n, sizeof *s->ref))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    for (int64_t i = 0; !rc && i < s->n; i++) {
        rnnt_record r;
        rnnt_dataset_record(s->d, i, &r);
        rc = tk_spm_decode(s->v, r.tokens, r.ntok, &s->ref[i], NULL, e);
    }
    if (!rc) {
        rnnt_field f[RNNT_NFIELDS];
        rnnt_batch_fields(w->B, s->Lmax, s->K, f);
        for (int k = 0; k < RNNT_NFIELDS && !rc; k++)
            if (!(s->hmem[k] = calloc((size_t)f[k].count, tk_dtype_size(f[k].dtype))))
                rc = tk_err_set(e, TK_EIO, "out of host memory");
        s->hyp = calloc((size_t)w->B * (size_t)w->cfg.ev.max_symbols, 4), s->nhyp = calloc((size_t)w->B, 4);
        if (!rc && (!s->hyp || !s->nhyp)) rc = tk_err_set(e, TK_EIO, "out of host memory");
        if (!rc) rc = tk_malloc(w->c, (void **)&s->pcm, (size_t)f[RNNT_F_PCM].count * 4, e);
        s->hb = rnnt_batch_from_fields(s->hmem);
    }
    if (rc) es_free(w, s);
    else *out = s;
    return rc;
}

static int64_t es_count(const void *s) { return ((const rnnt_evalset *)s)->n; }

// The WER over the set: rank r decodes the batches r, r + world, ... of B utterances in order
// (the last one filled up with its last utterance again, whose second decoding is not counted).
static int wl_evaluate(void *model, void *es, double *metric, tk_err *e) {
    rnnt_wl *w = model;
    rnnt_evalset *s = es;
    const int B = w->B, cap = w->cfg.ev.max_symbols, world = w->env.dist->world, rank = w->env.dist->rank;
    tk_wer wer = {0, 0};
    int64_t rec[B > 0 ? B : 1];
    int rc = 0;
    for (int64_t first = (int64_t)rank * B; !rc && first < s->n; first += (int64_t)world * B) {
        const int n = s->n - first < B ? (int)(s->n - first) : B;
        for (int k = 0; k < B; k++) rec[k] = first + (k < n ? k : n - 1);
        int T;
        if ((rc = rnnt_fill_batch(s->d, &w->cfg.data, 0, 0, rec, B, s->Lmax, s->K, &s->hb, e)) ||
            (rc = tk_memcpy_h2d(w->c, s->pcm, s->hb.pcm, (size_t)B * (size_t)s->Lmax * 4, TK_STREAM_COMPUTE, e)) ||
            (rc = features(w, 0, &s->hb, s->pcm, &T, e)) || (rc = rnnt_decode(w->dec, T, w->ylen, s->hyp, s->nhyp, e)))
            break;
        for (int k = 0; k < n && !rc; k++) {
            char *text = NULL;
            rc = tk_spm_decode(s->v, s->hyp + (size_t)k * cap, s->nhyp[k], &text, NULL, e);
            if (!rc) rc = tk_wer_add(&wer, text, s->ref[first + k], e);
            free(text);
        }
    }
    // every rank's sums (collective: each rank gathers even after a failure of its own)
    int64_t all[2][world > 0 ? world : 1];
    tk_err e2;
    int rs = tk_dist_gather_i64(w->env.dist, rc ? -1 : wer.errors, all[0], 0, rc ? &e2 : e);
    if (!rc) rc = rs;
    if (!rc) rc = tk_dist_gather_i64(w->env.dist, wer.words, all[1], 0, e);
    if (rc) return rc;
    tk_wer sum = {0, 0};
    for (int r = 0; r < world; r++) {
        if (all[0][r] < 0) return tk_err_set(e, TK_EDEVICE, "rnnt: rank %d's evaluation failed", r);
        sum.errors += all[0][r], sum.words += all[1][r];
    }
    *metric = tk_wer_value(&sum);
    return 0;
}

// ---- MLLOG ----

// closed_rnnt's keys that the workload logs (mllog.c's rnnt_mllog_sources with a config or
// constant source), their values from the parsed configuration.
static json_t *source_value(const rnnt_wl *w, const char *src) {
    const rnnt_data_cfg *d = &w->cfg.data;
    if (strncmp(src, "const: ", 7) == 0) {
        const char *v = src + 7;
        return strcmp(v, "true") == 0 ? json_true() : strcmp(v, "false") == 0 ? json_false() : json_integer(atoll(v));
    }
    static const char *const keys[] = {"model.weights_init_scale", "eval.max_symbols", "data.max_duration",
                                       "data.buckets", "data.speed_min", "data.speed_max", "data.freq_masks",
                                       "data.max_freq", "data.time_masks", "data.max_time", NULL};
    if (!strcmp(src, keys[0])) return json_real(w->cfg.net.weights_init_scale);
    if (!strcmp(src, keys[1])) return json_integer(w->cfg.ev.max_symbols);
    if (!strcmp(src, keys[2])) return json_real(d->max_duration);
    if (!strcmp(src, keys[3])) return json_integer(d->buckets);
    if (!strcmp(src, keys[4])) return json_real(d->speed ? d->speed_min : 1.0);
    if (!strcmp(src, keys[5])) return json_real(d->speed ? d->speed_max : 1.0);
    if (!strcmp(src, keys[6])) return json_integer(d->specaug ? d->freq_masks : 0);
    if (!strcmp(src, keys[7])) return json_integer(d->max_freq);
    if (!strcmp(src, keys[8])) return json_integer(d->specaug ? d->time_masks : 0);
    if (!strcmp(src, keys[9])) return json_real(d->max_time);
    return NULL;
}

static int wl_mllog_hparams(void *model, const tk_run_cfg *run, tk_mllog *L, tk_err *e) {
    const rnnt_wl *w = model;
    (void)run;
    for (const rnnt_mllog_src *s = rnnt_mllog_sources; s->key; s++) {
        if (strcmp(s->source, "engine") == 0) continue;
        json_t *v = source_value(w, s->source);
        if (!v) return tk_err_set(e, TK_EINTERNAL, "rnnt: no value for MLLOG %s (%s)", s->key, s->source);
        TRY(TK_MLLOG_EVENT(L, s->key, v, NULL, e));
    }
    return 0;
}

static int wl_mllog_weights(void *model, tk_mllog *L, tk_err *e) {
    (void)model;
    for (const char *const *t = rnnt_mllog_tensors; *t; t++)
        TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", *t), e));
    return 0;
}

const tk_workload tk_workload_rnnt = {
    .version = TK_WORKLOAD_V6, .name = "rnnt", .metric = "wer", .lower_is_better = 1, .precisions = rnnt_precisions,
    .summary = "RNN-T (MLPerf Training v1.x speech recognition, LibriSpeech), target word error rate",
    .sections = rnnt_sections,
    .config = config_parse, .config_free = config_free,
    .create = wl_create, .destroy = wl_destroy, .init_weights = wl_init_weights, .weights_loaded = wl_weights_loaded,
    .reader_open = rd_open, .reader_close = rd_close, .reader_count = rd_count, .read_batch = rd_batch,
    .batch = wl_batch, .host_batch = wl_host_batch, .use = wl_use,
    .step = wl_step, .graph_key = wl_graph_key,
    .evalset_load = es_load, .evalset_count = es_count, .evalset_free = es_free, .evaluate = wl_evaluate,
    .opt_mllog = rnnt_opt_mllog, .mllog_hparams = wl_mllog_hparams, .mllog_weights = wl_mllog_weights,
};
