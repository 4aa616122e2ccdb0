// RNN-T's input pipeline: the records, the bucketed training reader, evaluation batches and the
// batch's features on the device (data.h says which reference behaviour each part follows).
#include "workloads/rnnt/data.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cfg.h"
#include "engine/data.h"
#include "speech/sampler.h"
#include "tks/tks.h"

// ---- configuration ----

void rnnt_data_cfg_default(rnnt_data_cfg *c) {
    *c = (rnnt_data_cfg){.max_duration = 16.7, .buckets = 6, .speed = 1, .speed_min = 0.85, .speed_max = 1.15,
                         .dither = 1e-5, .eval_dither = 1, .specaug = 1, .freq_masks = 2, .max_freq = 20,
                         .time_masks = 10, .max_time = 0.03, .features = TK_MELWIN_DALI, .n_mels = 80, .stack = 3,
                         .sub = 3, .max_tokens = 0};
}

static const char *const data_keys[] = {"max_duration", "buckets", "speed_perturbation", "speed_min", "speed_max",
                                        "dither", "eval_dither", "spec_augment", "freq_masks", "max_freq",
                                        "time_masks", "max_time", "features", "n_mels", "frame_stacking",
                                        "frame_subsampling", "max_tokens", "note", NULL};

// An int member: *out kept when absent.
static int int_key(json_t *root, const char *path, const char *key, int lo, int hi, int *out, tk_err *e) {
    int64_t v = *out;
    TRY(tk_cfg_int_opt(root, path, key, lo, hi, &v, e));
    *out = (int)v;
    return 0;
}

static int cfg_parse(json_t *root, const char *path, rnnt_data_cfg *c, tk_err *e) {
    TRY(tk_cfg_keys(root, path, "data", data_keys, e));
    TRY(tk_cfg_num_opt(root, path, "data.max_duration", 0.1, 1e6, &c->max_duration, e));
    TRY(int_key(root, path, "data.buckets", 1, 1000, &c->buckets, e));
    TRY(tk_cfg_bool_opt(root, path, "data.speed_perturbation", &c->speed, e));
    TRY(tk_cfg_num_opt(root, path, "data.speed_min", 0.25, 4, &c->speed_min, e));
    TRY(tk_cfg_num_opt(root, path, "data.speed_max", 0.25, 4, &c->speed_max, e));
    if (c->speed_max < c->speed_min)
        return tk_cfg_bad(e, path, "data.speed_max", "must be at least data.speed_min");
    TRY(tk_cfg_num_opt(root, path, "data.dither", 0, 1, &c->dither, e));
    TRY(tk_cfg_bool_opt(root, path, "data.eval_dither", &c->eval_dither, e));
    TRY(tk_cfg_bool_opt(root, path, "data.spec_augment", &c->specaug, e));
    TRY(int_key(root, path, "data.freq_masks", 0, 100, &c->freq_masks, e));
    TRY(int_key(root, path, "data.max_freq", 0, 1024, &c->max_freq, e));
    TRY(int_key(root, path, "data.time_masks", 0, 1000, &c->time_masks, e));
    TRY(tk_cfg_num_opt(root, path, "data.max_time", 0, 10000, &c->max_time, e));
    static const char *const features[] = {"dali", "torch", NULL}; // TK_MELWIN_DALI, TK_MELWIN_TORCH
    TRY(tk_cfg_enum(root, path, "data.features", features, c->features, &c->features, e));
    TRY(int_key(root, path, "data.n_mels", 1, 1024, &c->n_mels, e));
    TRY(int_key(root, path, "data.frame_stacking", 1, 16, &c->stack, e));
    TRY(int_key(root, path, "data.frame_subsampling", 1, 16, &c->sub, e));
    TRY(int_key(root, path, "data.max_tokens", 0, 1 << 20, &c->max_tokens, e));
    return 0;
}

int rnnt_data_cfg_parse(json_t *data, const char *path, rnnt_data_cfg *c, tk_err *e) {
    uint64_t seed = c->seed;
    int64_t batch = c->batch;
    rnnt_data_cfg_default(c);
    c->seed = seed, c->batch = batch;
    // the section under a root of its own, so the helpers name its members $.data.KEY
    json_t *root = json_object();
    if (!root || (data && json_object_set(root, "data", data) != 0)) {
        json_decref(root);
        return tk_err_errno(e, ENOMEM, "out of memory");
    }
    int rc = data && !json_is_object(data) ? tk_cfg_bad(e, path, "data", "expected an object") : cfg_parse(root, path, c, e);
    json_decref(root);
    return rc;
}

void rnnt_melfeat_cfg(const rnnt_data_cfg *c, int train, uint32_t epoch, tk_melfeat_cfg *m) {
    tk_melfeat_default(m);
    m->n_mels = c->n_mels;
    m->window = c->features;
    if (c->features == TK_MELWIN_TORCH) m->norm_ddof = 1, m->norm_eps = 1e-5f;
    m->dither = train || c->eval_dither ? (float)c->dither : 0.0f;
    m->seed = c->seed;
    m->epoch = train ? epoch : 0;
}

void rnnt_specaug_cfg(const rnnt_data_cfg *c, uint32_t epoch, tk_specaug_cfg *s) {
    tk_specaug_default(s);
    s->freq_masks = c->freq_masks, s->max_freq = c->max_freq;
    s->time_masks = c->time_masks, s->max_time = c->max_time;
    s->seed = c->seed, s->epoch = epoch;
}

// ---- the records ----

struct rnnt_dataset {
    int64_t n, cap, dropped, max_samples;
    int max_tokens;
    int16_t *pcm;                // all samples, record i at pcm_off[i]
    int32_t *tok;
    char *text;                  // ids and transcripts
    int64_t *pcm_off, *tok_off, *id_off, *text_off; // n + 1 each
    int64_t npcm, ntok, ntext, cappcm, captok, captext;
    double *dur;
};

enum { F_ID, F_PCM, F_RATE, F_TEXT, F_TOK, NF };

void rnnt_dataset_free(rnnt_dataset *d) {
    if (!d) return;
    free(d->pcm), free(d->tok), free(d->text), free(d->pcm_off), free(d->tok_off), free(d->id_off);
    free(d->text_off), free(d->dur), free(d);
}

int64_t rnnt_dataset_count(const rnnt_dataset *d) { return d->n; }
int64_t rnnt_dataset_dropped(const rnnt_dataset *d) { return d->dropped; }
int64_t rnnt_dataset_max_samples(const rnnt_dataset *d) { return d->max_samples; }
int rnnt_dataset_max_tokens(const rnnt_dataset *d) { return d->max_tokens; }
const double *rnnt_dataset_durations(const rnnt_dataset *d) { return d->dur; }

void rnnt_dataset_record(const rnnt_dataset *d, int64_t i, rnnt_record *r) {
    *r = (rnnt_record){.id = d->text + d->id_off[i], .id_len = (size_t)(d->text_off[i] - d->id_off[i]),
                       .pcm = d->pcm + d->pcm_off[i], .n = d->pcm_off[i + 1] - d->pcm_off[i],
                       .tokens = d->tok + d->tok_off[i], .ntok = (int)(d->tok_off[i + 1] - d->tok_off[i]),
                       .text = d->text + d->text_off[i], .text_len = (size_t)(d->id_off[i + 1] - d->text_off[i])};
}

// Room for `more` of each: elements of an array of `size` bytes, capacity doubled.
static int grow(void **p, int64_t *cap, int64_t need, size_t size, tk_err *e) {
    if (need <= *cap) return 0;
    int64_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return tk_err_errno(e, ENOMEM, "out of host memory for the speech records (%lld bytes)", (long long)c * (long long)size);
    *p = q, *cap = c;
    return 0;
}

static int reserve_records(rnnt_dataset *d, int64_t n, tk_err *e) {
    if (n + 1 <= d->cap) return 0;
    int64_t c = d->cap ? d->cap : 1024;
    while (c < n + 1) c *= 2;
    int64_t **arr[] = {&d->pcm_off, &d->tok_off, &d->id_off, &d->text_off};
    for (int k = 0; k < 4; k++) {
        int64_t *q = realloc(*arr[k], (size_t)c * sizeof **arr[k]);
        if (!q) return tk_err_errno(e, ENOMEM, "out of host memory for the speech records' index");
        *arr[k] = q;
    }
    double *q = realloc(d->dur, (size_t)c * sizeof *q);
    if (!q) return tk_err_errno(e, ENOMEM, "out of host memory for the speech records' index");
    d->dur = q, d->cap = c;
    return 0;
}

static int schema_fields(const tks_schema *s, const char *path, int at[NF], tk_err *e) {
    static const struct { const char *name; tks_dtype t; int ragged; } want[NF] = {
        {"id", TKS_U8, 1}, {"pcm", TKS_I16, 1}, {"sample_rate", TKS_I32, 0}, {"transcript", TKS_U8, 1}, {"tokens", TKS_I32, 1}};
    for (int i = 0; i < NF; i++) {
        int k = tks_schema_field(s, want[i].name);
        const tks_field *f = k >= 0 ? &s->f[k] : NULL;
        if (!f || f->dtype != want[i].t || f->ragged != want[i].ragged || f->ndim != (want[i].ragged ? 1 : 0)) {
            tk_err_set(e, TK_EDATA, "not LibriSpeech records: expected the fields id u8 [-1], pcm i16 [-1], "
                                    "sample_rate i32, transcript u8 [-1], tokens i32 [-1] (field \"%s\")", want[i].name);
            tk_err_where(e, "%s", path);
            return tk_err_hint(e, "make the records with prep librispeech");
        }
        at[i] = k;
    }
    return 0;
}

static int bad_record(tk_err *e, const char *path, uint64_t rec, const char *what) {
    tk_err_set(e, TK_EDATA, "%s", what);
    return tk_err_where(e, "%s: record %llu", path, (unsigned long long)rec);
}

static int add_frame(rnnt_dataset *d, const tks_frame *fr, const int at[NF], double max_duration, const char *path,
                     uint64_t rec0, tk_err *e) {
    const uint64_t *io = fr->col[at[F_ID]].off, *po = fr->col[at[F_PCM]].off, *xo = fr->col[at[F_TEXT]].off,
                   *ko = fr->col[at[F_TOK]].off;
    const int32_t *rate = fr->col[at[F_RATE]].data;
    for (size_t j = 0; j < fr->n; j++) {
        const uint64_t rec = rec0 + j;
        const int64_t ns = (int64_t)((po[j + 1] - po[j]) / 2), nk = (int64_t)((ko[j + 1] - ko[j]) / 4);
        const int64_t ni = (int64_t)(io[j + 1] - io[j]), nx = (int64_t)(xo[j + 1] - xo[j]);
        if (rate[j] != RNNT_SAMPLE_RATE) return bad_record(e, path, rec, "a sample rate other than 16000 Hz");
        if (ns < 1) return bad_record(e, path, rec, "an utterance without samples");
        if (nk < 1) return bad_record(e, path, rec, "a transcript without tokens");
        if (ns > INT32_MAX || nk > (1 << 20)) return bad_record(e, path, rec, "an utterance over 2^31 samples or 2^20 tokens");
        const int32_t *tk = (const int32_t *)((const uint8_t *)fr->col[at[F_TOK]].data + ko[j]);
        for (int64_t t = 0; t < nk; t++)
            if (tk[t] < 0) return bad_record(e, path, rec, "a negative token id");
        // the reference's predicate: original_duration <= max_duration
        const double dur = (double)ns / RNNT_SAMPLE_RATE;
        if (max_duration > 0 && dur > max_duration) {
            d->dropped++;
            continue;
        }
        if (d->n == (int64_t)UINT32_MAX) return bad_record(e, path, rec, "more than 2^32 - 1 records");
        TRY(reserve_records(d, d->n + 1, e));
        TRY(grow((void **)&d->pcm, &d->cappcm, d->npcm + ns, sizeof *d->pcm, e));
        TRY(grow((void **)&d->tok, &d->captok, d->ntok + nk, sizeof *d->tok, e));
        TRY(grow((void **)&d->text, &d->captext, d->ntext + ni + nx, 1, e));
        memcpy(d->pcm + d->npcm, (const uint8_t *)fr->col[at[F_PCM]].data + po[j], (size_t)ns * 2);
        memcpy(d->tok + d->ntok, tk, (size_t)nk * 4);
        d->id_off[d->n] = d->ntext;
        memcpy(d->text + d->ntext, (const uint8_t *)fr->col[at[F_ID]].data + io[j], (size_t)ni);
        d->text_off[d->n] = d->ntext + ni;
        memcpy(d->text + d->ntext + ni, (const uint8_t *)fr->col[at[F_TEXT]].data + xo[j], (size_t)nx);
        d->npcm += ns, d->ntok += nk, d->ntext += ni + nx;
        d->dur[d->n] = dur;
        if (ns > d->max_samples) d->max_samples = ns;
        if (nk > d->max_tokens) d->max_tokens = (int)nk;
        d->n++;
        d->pcm_off[d->n] = d->npcm, d->tok_off[d->n] = d->ntok, d->id_off[d->n] = d->ntext;
    }
    return 0;
}

static int load_file(rnnt_dataset *d, const char *path, double max_duration, tk_err *e) {
    tks_reader *r;
    TRY(tks_reader_open(&r, path, e));
    int at[NF];
    int rc = schema_fields(tks_reader_schema(r), path, at, e);
    tks_frame fr = {0};
    uint64_t rec = 0;
    for (size_t i = 0; !rc && i < tks_reader_nframes(r); i++) {
        if ((rc = tks_reader_read(r, i, &fr, e))) break;
        rc = add_frame(d, &fr, at, max_duration, path, rec, e);
        rec += fr.n;
    }
    tks_frame_free(&fr);
    tks_reader_close(r);
    return rc;
}

int rnnt_dataset_load(char *const *paths, int npaths, double max_duration, rnnt_dataset **out, tk_err *e) {
    *out = NULL;
    char **list;
    int n;
    TRY(tk_data_paths(paths, npaths, &list, &n, e));
    rnnt_dataset *d = calloc(1, sizeof *d);
    int rc = d ? reserve_records(d, 0, e) : tk_err_errno(e, ENOMEM, "out of host memory");
    if (!rc) d->pcm_off[0] = d->tok_off[0] = d->id_off[0] = d->text_off[0] = 0;
    if (isinf(max_duration)) max_duration = 0;
    for (int i = 0; !rc && i < n; i++) rc = load_file(d, list[i], max_duration, e);
    if (!rc && d->n == 0) {
        tk_err_set(e, TK_EDATA, "no utterance of at most %g s in the records (%lld dropped)", max_duration,
                   (long long)d->dropped);
        rc = tk_err_where(e, "%s", n ? list[0] : "");
    }
    tk_data_paths_free(list, n);
    if (rc) {
        rnnt_dataset_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

// ---- the batch ----

void rnnt_batch_fields(int B, int64_t Lmax, int K, rnnt_field f[RNNT_NFIELDS]) {
    f[RNNT_F_PCM] = (rnnt_field){"batch.pcm", TK_F32, (int64_t)B * Lmax};
    f[RNNT_F_LEN] = (rnnt_field){"batch.pcm_len", TK_I32, B};
    f[RNNT_F_UTT] = (rnnt_field){"batch.utt", TK_I32, B};
    f[RNNT_F_RATE] = (rnnt_field){"batch.speed", TK_F32, B};
    f[RNNT_F_TOKENS] = (rnnt_field){"batch.tokens", TK_I32, (int64_t)B * K};
    f[RNNT_F_NTOK] = (rnnt_field){"batch.tokens_len", TK_I32, B};
    f[RNNT_F_EPOCH] = (rnnt_field){"batch.epoch", TK_I32, 1};
}

rnnt_batch rnnt_batch_from_fields(void *const *fields) {
    return (rnnt_batch){.pcm = fields[RNNT_F_PCM], .len = fields[RNNT_F_LEN], .utt = fields[RNNT_F_UTT],
                        .rate = fields[RNNT_F_RATE], .tokens = fields[RNNT_F_TOKENS], .ntok = fields[RNNT_F_NTOK],
                        .epoch = fields[RNNT_F_EPOCH]};
}

void rnnt_batch_dims(const rnnt_data_cfg *c, const rnnt_dataset *d, int64_t *Lmax, int *K) {
    *Lmax = d->max_samples;
    *K = c->max_tokens > 0 ? c->max_tokens : d->max_tokens;
}

int rnnt_fill_batch(const rnnt_dataset *d, const rnnt_data_cfg *c, int train, uint32_t epoch, const int64_t *rec,
                    int n, int64_t Lmax, int K, const rnnt_batch *out, tk_err *e) {
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        if (rec[k] < 0 || rec[k] >= d->n)
            return tk_err_set(e, TK_EINTERNAL, "rnnt: record %lld of %lld", (long long)rec[k], (long long)d->n);
        rnnt_record r;
        rnnt_dataset_record(d, rec[k], &r);
        if (r.n > Lmax || r.ntok > K)
            return tk_err_set(e, TK_EDATA, "utterance %.*s (record %lld): %lld samples and %d tokens, the batch "
                                           "holds %lld and %d", (int)r.id_len, r.id, (long long)rec[k],
                              (long long)r.n, r.ntok, (long long)Lmax, K);
        for (int64_t i = 0; i < r.n; i++) out->pcm[at + i] = (float)r.pcm[i] / RNNT_PCM_SCALE;
        at += r.n;
        out->len[k] = (int32_t)r.n;
        out->utt[k] = (int32_t)rec[k];
        out->rate[k] = train && c->speed
                           ? (float)tk_speed_rate(c->seed, epoch, (uint32_t)rec[k], c->speed_min, c->speed_max)
                           : 1.0f;
        memcpy(out->tokens + (int64_t)k * K, r.tokens, (size_t)r.ntok * 4);
        memset(out->tokens + (int64_t)k * K + r.ntok, 0, (size_t)(K - r.ntok) * 4);
        out->ntok[k] = r.ntok;
    }
    memset(out->pcm + at, 0, (size_t)((int64_t)n * Lmax - at) * sizeof *out->pcm);
    out->epoch[0] = train ? (int32_t)epoch : 0;
    return 0;
}

// ---- training reader ----

struct rnnt_reader {
    rnnt_data_cfg c;
    const rnnt_dataset *d;
    int rank, world, b, K;
    int64_t Lmax, *order, used, order_epoch, *rec;
};

int rnnt_epoch_order(const rnnt_data_cfg *c, const rnnt_dataset *d, uint32_t epoch, int64_t *order, int64_t *used,
                     tk_err *e) {
    int nb = c->buckets < d->n ? c->buckets : (int)d->n;
    return tk_speech_bucket_epoch(d->dur, d->n, nb, c->batch, c->seed, epoch, order, used, e);
}

int rnnt_reader_open(const rnnt_data_cfg *c, const rnnt_dataset *d, int rank, int world, rnnt_reader **out,
                     tk_err *e) {
    *out = NULL;
    if (world < 1 || rank < 0 || rank >= world || c->batch < 1 || c->batch % world)
        return tk_err_set(e, TK_EUSAGE, "rnnt: a global batch of %lld over %d ranks: must divide evenly",
                          (long long)c->batch, world);
    if (d->n < c->batch)
        return tk_err_set(e, TK_EDATA, "rnnt: %lld utterances, fewer than a global batch of %lld", (long long)d->n,
                          (long long)c->batch);
    rnnt_reader *r = calloc(1, sizeof *r);
    if (r) *r = (rnnt_reader){.c = *c, .d = d, .rank = rank, .world = world, .b = (int)(c->batch / world), .order_epoch = -1};
    if (r) rnnt_batch_dims(c, d, &r->Lmax, &r->K);
    if (r) r->order = malloc((size_t)d->n * sizeof *r->order);
    if (r) r->rec = malloc((size_t)r->b * sizeof *r->rec);
    if (!r || !r->order || !r->rec) {
        rnnt_reader_close(r);
        return tk_err_errno(e, ENOMEM, "out of host memory");
    }
    *out = r;
    return 0;
}

void rnnt_reader_close(rnnt_reader *r) {
    if (!r) return;
    free(r->order), free(r->rec), free(r);
}

int rnnt_reader_per_rank(const rnnt_reader *r) { return r->b; }
int64_t rnnt_reader_steps_per_epoch(const rnnt_reader *r) { return r->d->n / r->c.batch; }

int rnnt_reader_batch(rnnt_reader *r, int64_t step, int64_t spe, const rnnt_batch *out, tk_err *e) {
    if (spe < 1 || step < 0 || step / spe > UINT32_MAX)
        return tk_err_set(e, TK_EINTERNAL, "rnnt: batch %lld of %lld an epoch", (long long)step, (long long)spe);
    const int64_t epoch = step / spe, first = (step % spe) * r->c.batch + (int64_t)r->rank * r->b;
    if (r->order_epoch != epoch) {
        TRY(rnnt_epoch_order(&r->c, r->d, (uint32_t)epoch, r->order, &r->used, e));
        r->order_epoch = epoch;
    }
    if (first + r->b > r->used)
        return tk_err_set(e, TK_EINTERNAL, "rnnt: batch %lld past the epoch's %lld utterances", (long long)step,
                          (long long)r->used);
    for (int k = 0; k < r->b; k++) r->rec[k] = r->order[first + k];
    return rnnt_fill_batch(r->d, &r->c, 1, (uint32_t)epoch, r->rec, r->b, r->Lmax, r->K, out, e);
}

int rnnt_eval_batch(const rnnt_dataset *d, const rnnt_data_cfg *c, int64_t first, int n, int64_t Lmax, int K,
                    const rnnt_batch *out, tk_err *e) {
    if (first < 0 || n < 0 || first + n > d->n)
        return tk_err_set(e, TK_EINTERNAL, "rnnt: eval records [%lld, %lld) past the %lld records", (long long)first,
                          (long long)(first + n), (long long)d->n);
    int64_t *rec = malloc((size_t)(n ? n : 1) * sizeof *rec);
    if (!rec) return tk_err_errno(e, ENOMEM, "out of host memory");
    for (int k = 0; k < n; k++) rec[k] = first + k;
    int rc = rnnt_fill_batch(d, c, 0, 0, rec, n, Lmax, K, out, e);
    free(rec);
    return rc;
}

// ---- features on the device ----

// The plan's arrays in one buffer (the 64-bit ones first).
size_t rnnt_feat_plan_bytes(int B) {
    const size_t b = (size_t)B;
    return (2 * (b + 1) + b) * 8 + ((3 * b + 3) * 4 + 7) / 8 * 8;
}

rnnt_feat_plan rnnt_feat_plan_at(void *base, int B) {
    rnnt_feat_plan p;
    p.in_off = base, p.out_off = p.in_off + B + 1;
    p.rate = (double *)(p.out_off + B + 1);
    p.F = (int32_t *)(p.rate + B), p.utt = (uint32_t *)(p.F + B), p.ylen = (int32_t *)(p.utt + B);
    p.Fmax = p.ylen + B, p.epoch = (uint32_t *)(p.Fmax + 1), p.T = (int32_t *)(p.epoch + 1);
    return p;
}

// The longest resampled utterance of at most Lmax samples: ceil(Lmax r) for the largest r an fp32
// draw can give.
static int64_t speed_cap(const rnnt_data_cfg *c, int64_t Lmax) {
    double rmax = c->speed ? (double)nextafterf((float)c->speed_max, INFINITY) : 1.0;
    return tk_speed_len(Lmax, rmax > 1.0 ? rmax : 1.0);
}

int64_t rnnt_feat_frames_cap(const rnnt_data_cfg *c, int64_t Lmax) {
    tk_melfeat_cfg m;
    rnnt_melfeat_cfg(c, 1, 0, &m);
    return tk_melfeat_frames(speed_cap(c, Lmax), m.hop);
}

int rnnt_feat_plan_fill(const rnnt_data_cfg *c, int train, int B, const rnnt_batch *hb, int64_t Lmax, void *plan,
                        tk_err *e) {
    const rnnt_feat_plan p = rnnt_feat_plan_at(plan, B);
    tk_melfeat_cfg m;
    rnnt_melfeat_cfg(c, train, 0, &m);
    const int speed = train && c->speed;
    const int64_t Lspeed = speed_cap(c, Lmax);
    p.in_off[0] = p.out_off[0] = 0;
    int Fmax = 1;
    for (int b = 0; b < B; b++) {
        if (hb->len[b] < 1 || hb->len[b] > Lmax)
            return tk_err_set(e, TK_EINTERNAL, "rnnt: utterance %d of the batch has %d samples (1 .. %lld)", b,
                              hb->len[b], (long long)Lmax);
        p.rate[b] = speed ? (double)hb->rate[b] : 1.0;
        p.utt[b] = (uint32_t)hb->utt[b];
        p.in_off[b + 1] = p.in_off[b] + hb->len[b];
        const int64_t n = speed ? tk_speed_len(hb->len[b], p.rate[b]) : hb->len[b];
        if (n > Lspeed)
            return tk_err_set(e, TK_EINTERNAL, "rnnt: speed %g makes %lld samples (room for %lld)", p.rate[b],
                              (long long)n, (long long)Lspeed);
        p.out_off[b + 1] = p.out_off[b] + n;
        p.F[b] = (int)tk_melfeat_frames(n, m.hop);
        if (p.F[b] > Fmax) Fmax = p.F[b];
        p.ylen[b] = (p.F[b] + c->sub - 1) / c->sub;
    }
    *p.Fmax = Fmax, *p.epoch = train ? (uint32_t)hb->epoch[0] : 0, *p.T = (Fmax + c->sub - 1) / c->sub;
    return 0;
}

struct rnnt_feat {
    tk_ctx *ctx;
    rnnt_data_cfg c;
    int B;
    int64_t Lmax, Lspeed, Fcap;  // samples in, after speed perturbation, frames
    void *hplan, *dplan;         // rnnt_features' plan (host; the backend's memory)
    float *fb, *audio, *x;
    void *ws;
    size_t ws_bytes;
};

void rnnt_feat_destroy(rnnt_feat *f) {
    if (!f) return;
    void *dev[] = {f->dplan, f->fb, f->audio, f->x, f->ws};
    for (size_t k = 0; k < sizeof dev / sizeof *dev; k++)
        if (dev[k]) tk_free(f->ctx, dev[k]);
    free(f->hplan), free(f);
}

int64_t rnnt_feat_max_out(const rnnt_feat *f) { return (f->Fcap + f->c.sub - 1) / f->c.sub; }

int rnnt_feat_create(tk_ctx *ctx, const rnnt_data_cfg *c, int B, int64_t Lmax, rnnt_feat **out, tk_err *e) {
    *out = NULL;
    if (B < 1 || Lmax < 1) return tk_err_set(e, TK_EINTERNAL, "rnnt: features of %d utterances of %lld samples", B, (long long)Lmax);
    rnnt_feat *f = calloc(1, sizeof *f);
    if (!f) return tk_err_errno(e, ENOMEM, "out of host memory");
    *f = (rnnt_feat){.ctx = ctx, .c = *c, .B = B, .Lmax = Lmax};
    f->Lspeed = speed_cap(c, Lmax);
    tk_melfeat_cfg m;
    rnnt_melfeat_cfg(c, 1, 0, &m);
    f->Fcap = tk_melfeat_frames(f->Lspeed, m.hop);
    const int nbin = m.n_fft / 2 + 1;
    f->ws_bytes = tk_melfeat_ws_bytes(ctx->backend, &m, B, (int)f->Fcap);
    f->hplan = malloc(rnnt_feat_plan_bytes(B));
    float *fb = malloc((size_t)m.n_mels * nbin * sizeof *fb);
    int rc = f->hplan && fb ? 0 : tk_err_errno(e, ENOMEM, "out of host memory");
    if (!rc) rc = tk_mel_filterbank(m.sample_rate, m.n_fft, m.n_mels, fb, e);
    const struct { void **p; size_t bytes; } want[] = {
        {&f->dplan, rnnt_feat_plan_bytes(B)},           {(void **)&f->fb, (size_t)m.n_mels * nbin * 4},
        {(void **)&f->audio, (size_t)B * f->Lspeed * 4}, {(void **)&f->x, (size_t)B * f->Fcap * m.n_mels * 4},
        {&f->ws, f->ws_bytes ? f->ws_bytes : 1}};
    for (size_t k = 0; !rc && k < sizeof want / sizeof *want; k++) rc = tk_malloc(ctx, want[k].p, want[k].bytes, e);
    if (!rc) rc = tk_memcpy_h2d(ctx, f->fb, fb, (size_t)m.n_mels * nbin * 4, TK_STREAM_COMPUTE, e);
    free(fb);
    if (rc) {
        rnnt_feat_destroy(f);
        return rc;
    }
    *out = f;
    return 0;
}

int rnnt_features_plan(rnnt_feat *f, int train, int B, const void *plan, const float *pcm, int Fp, int Tout, float *y,
                       tk_err *e) {
    tk_ctx *ctx = f->ctx;
    const rnnt_data_cfg *c = &f->c;
    if (B < 1 || B > f->B || Fp < 1 || Fp > f->Fcap || Tout < (Fp + c->sub - 1) / c->sub)
        return tk_err_set(e, TK_EINTERNAL, "rnnt: a feature batch of %d, %d frames, %d out (room for %d, %lld)", B, Fp,
                          Tout, f->B, (long long)f->Fcap);
    const rnnt_feat_plan p = rnnt_feat_plan_at((void *)plan, B);
    tk_melfeat_cfg m;
    rnnt_melfeat_cfg(c, train, 0, &m); // (the epoch: the plan's, read when the ops run)
    const int speed = train && c->speed;
    const tk_melfeat_batch bt = {.B = B, .Fmax = Fp, .off = speed ? p.out_off : p.in_off, .F = p.F, .utt = p.utt,
                                 .Fmask = p.Fmax, .epoch = p.epoch};
    const float *audio = pcm;
    if (speed) {
        TRY(tk_speed_resample(ctx, B, p.in_off, p.out_off, p.rate, pcm, f->audio, e));
        audio = f->audio;
    }
    TRY(tk_melfeat_logmel(ctx, &m, &bt, audio, f->fb, f->x, f->ws, e));
    if (train && c->specaug) {
        tk_specaug_cfg s;
        rnnt_specaug_cfg(c, 0, &s);
        TRY(tk_specaug(ctx, &s, &bt, c->n_mels, f->x, e));
    }
    return tk_melfeat_splice(ctx, &bt, c->n_mels, c->stack, c->sub, Tout, f->x, y, e);
}

int rnnt_features(rnnt_feat *f, int train, int B, const rnnt_batch *hb, const float *pcm, float *y, int32_t *ylen,
                  int32_t *ylen_dev, int64_t *T, tk_err *e) {
    if (B < 1 || B > f->B) return tk_err_set(e, TK_EINTERNAL, "rnnt: a feature batch of %d (room for %d)", B, f->B);
    TRY(rnnt_feat_plan_fill(&f->c, train, B, hb, f->Lmax, f->hplan, e));
    const rnnt_feat_plan p = rnnt_feat_plan_at(f->hplan, B);
    TRY(tk_memcpy_h2d(f->ctx, f->dplan, f->hplan, rnnt_feat_plan_bytes(B), TK_STREAM_COMPUTE, e));
    TRY(rnnt_features_plan(f, train, B, f->dplan, pcm, *p.Fmax, *p.T, y, e));
    memcpy(ylen, p.ylen, (size_t)B * sizeof *ylen);
    if (ylen_dev) TRY(tk_memcpy_h2d(f->ctx, ylen_dev, ylen, (size_t)B * 4, TK_STREAM_COMPUTE, e));
    *T = *p.T;
    return 0;
}
