// RNN-T's input pipeline (lib/workloads/rnnt/data.c): the data section's defaults and errors, the
// records and the 16.7 s filter (here a 1000-sample one), the batch's bytes (audio s / 32768,
// packed, zero tail; tokens padded with 0; speed factors from (seed, epoch, utterance)), the
// bucketed order's determinism, the same bytes from any rank split, reader or thread, and the
// features on the cpu: lengths ceil((L' / 160 + 1) / 3), L' = ceil(L r), frames past them zero,
// SpecAugment's zeros only in training.
//
// With TK_MELFEAT_DRIVE=dali|torch in the environment the binary is instead the C side of
// contrib/peers/rnnt_features.py's check (tests/cli/rnnt-data-oracle.bats), in test_melfeat's
// format: stdin "B" then per utterance "L" and L samples; stdout per utterance "utt b F" and F
// lines of n_mels values, here the evaluation features of rnnt_features (no dither) taken apart
// from their 3 x 3 splicing (lossless: output frame j holds frames 3j .. 3j + 2).
// With TK_RNNT_RECORDS=PATH (prep librispeech's .tks file or folder) and VOCAB=FILE (its .vocab),
// it loads them as the evaluation set and prints a line a record, in order: "ID<TAB>SAMPLES<TAB>
// FRAMES<TAB>DECODED<TAB>TRANSCRIPT" (FRAMES: rnnt_features' output length of an evaluation batch
// of all of them; DECODED: tk_spm_decode of the record's tokens) (tests/cli/rnnt-data.bats).
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tks/tks.h"
#include "tk_drive.h"
#include "tk_melfeat_stdin.h"
#include "tk_test.h"
#include "tk_test_cpu.h"
#include "speech/wer.h"
#include "workloads/rnnt/data.h"

enum { NREC = 40, MAXLEN = 1000 };
#define MAXDUR (MAXLEN / 16000.0)

// Record i: L_i samples (record 5 exactly MAXLEN, record 6 one more, records 7 and 8 past it),
// sample j = ((31 i + 17 j) % 2001) - 1000, 1 + i % 7 tokens 10 i + k + 1, id "1-2-i".
static int64_t rec_len(int i) {
    if (i == 5) return MAXLEN;
    if (i == 6) return MAXLEN + 1;
    if (i == 7 || i == 8) return 1500 + i;
    return 1 + (i * 137 + 60) % 990;
}
static int16_t rec_sample(int i, int64_t j) { return (int16_t)(((31 * i + 17 * j) % 2001) - 1000); }

static const char *write_records(const char *name, int bad_rate_at, int bad_schema) {
    const char *path = tk_test_path("test_rnnt_data", name);
    tks_schema s = {0};
    static const struct { const char *n; tks_dtype t; int ragged; } f[5] = {
        {"id", TKS_U8, 1}, {"pcm", TKS_I16, 1}, {"sample_rate", TKS_I32, 0}, {"transcript", TKS_U8, 1}, {"tokens", TKS_I32, 1}};
    for (int i = 0; i < 5; i++) {
        snprintf(s.f[i].name, sizeof s.f[i].name, "%s", f[i].n);
        s.f[i].dtype = bad_schema && i == 1 ? TKS_F32 : f[i].t, s.f[i].ndim = f[i].ragged;
        if (f[i].ragged) s.f[i].shape[0] = TKS_RAGGED;
    }
    s.nfields = 5;
    tk_err e = {0};
    tks_writer *w;
    tks_writer_opts wo = {.frame_bytes = 4096}; // several frames
    if (tks_schema_finish(&s, &e) || tks_writer_open(&w, path, &s, &wo, &e)) return NULL;
    for (int i = 0; i < NREC; i++) {
        char id[32], text[32];
        int ni = snprintf(id, sizeof id, "1-2-%04d", i), nt = snprintf(text, sizeof text, "word %d", i);
        int64_t L = rec_len(i);
        int16_t pcm[2000];
        float fpcm[2000];
        for (int64_t j = 0; j < L; j++) pcm[j] = rec_sample(i, j), fpcm[j] = (float)pcm[j];
        int32_t rate = i == bad_rate_at ? 8000 : 16000, tok[8];
        int nk = 1 + i % 7;
        for (int k = 0; k < nk; k++) tok[k] = 10 * i + k + 1;
        uint64_t oi[2] = {0, (uint64_t)ni}, op[2] = {0, (uint64_t)L * (bad_schema ? 4 : 2)}, ot[2] = {0, (uint64_t)nt},
                 ok[2] = {0, (uint64_t)nk * 4};
        tks_colref ref[5] = {{id, oi}, {bad_schema ? (void *)fpcm : (void *)pcm, op}, {&rate, NULL}, {text, ot}, {tok, ok}};
        if (tks_writer_append_ref(w, ref, 1, &e)) return NULL;
    }
    return tks_writer_close(w, &e) ? NULL : path;
}

static rnnt_dataset *load(double maxdur) {
    const char *p = write_records("ok.tks", -1, 0);
    if (!p) return NULL;
    char *paths[1] = {(char *)p};
    rnnt_dataset *d = NULL;
    tk_err e = {0};
    if (rnnt_dataset_load(paths, 1, maxdur, &d, &e)) printf("#   load: %s\n", e.what);
    return d;
}

// ---- configuration ----

TK_TEST(rnnt_data_cfg_defaults_and_errors) {
    rnnt_data_cfg c = {.seed = 42, .batch = 8};
    tk_err e = {0};
    CHECK_EQ_INT(rnnt_data_cfg_parse(NULL, "c.json", &c, &e), 0);
    // configs/baseline_v3-1023sp.yaml and train.py --num_buckets 6
    CHECK(c.max_duration == 16.7 && c.buckets == 6 && c.speed && c.speed_min == 0.85 && c.speed_max == 1.15);
    CHECK(c.dither == 1e-5 && c.eval_dither && c.specaug && c.freq_masks == 2 && c.max_freq == 20);
    CHECK(c.time_masks == 10 && c.max_time == 0.03 && c.n_mels == 80 && c.stack == 3 && c.sub == 3);
    CHECK(c.features == TK_MELWIN_DALI && c.max_tokens == 0 && c.seed == 42 && c.batch == 8);
    json_t *j = json_loads("{\"buckets\": 4, \"features\": \"torch\", \"speed_perturbation\": false, \"max_time\": 5}", 0, NULL);
    CHECK_EQ_INT(rnnt_data_cfg_parse(j, "c.json", &c, &e), 0);
    CHECK(c.buckets == 4 && c.features == TK_MELWIN_TORCH && !c.speed && c.max_time == 5 && c.seed == 42);
    json_decref(j);
    const char *bad[] = {"{\"bogus\": 1}", "{\"buckets\": 0}", "{\"speed_min\": 1.2, \"speed_max\": 1.1}",
                         "{\"features\": \"htk\"}", "[]"};
    const char *where[] = {"c.json: $.data.bogus", "c.json: $.data.buckets", "c.json: $.data.speed_max",
                           "c.json: $.data.features", "c.json: $.data"};
    for (int i = 0; i < 5; i++) {
        j = json_loads(bad[i], 0, NULL);
        CHECK_EQ_INT(rnnt_data_cfg_parse(j, "c.json", &c, &e), TK_EDATA);
        char msg[512];
        tk_err_format(&e, msg, sizeof msg);
        if (!strstr(msg, where[i])) printf("#   %s\n", msg);
        CHECK(strstr(msg, where[i]) != NULL);
        json_decref(j);
    }
}

// ---- the records ----

TK_TEST(rnnt_data_records_and_filter) {
    rnnt_dataset *d = load(MAXDUR);
    CHECK(d != NULL);
    if (!d) return;
    CHECK_EQ_INT(rnnt_dataset_count(d), NREC - 3); // 6, 7, 8 over 1000 samples; 5 (exactly 1000) kept
    CHECK_EQ_INT(rnnt_dataset_dropped(d), 3);
    CHECK_EQ_INT(rnnt_dataset_max_samples(d), MAXLEN);
    CHECK_EQ_INT(rnnt_dataset_max_tokens(d), 7);
    for (int64_t k = 0, i = 0; k < rnnt_dataset_count(d); k++, i++) {
        if (i == 6) i = 9;
        rnnt_record r;
        rnnt_dataset_record(d, k, &r);
        char id[32];
        snprintf(id, sizeof id, "1-2-%04d", (int)i);
        CHECK(r.id_len == strlen(id) && memcmp(r.id, id, r.id_len) == 0);
        CHECK_EQ_INT(r.n, rec_len((int)i));
        CHECK_EQ_INT(r.pcm[r.n - 1], rec_sample((int)i, r.n - 1));
        CHECK_EQ_INT(r.ntok, 1 + i % 7);
        CHECK_EQ_INT(r.tokens[r.ntok - 1], 10 * i + r.ntok);
        CHECK(rnnt_dataset_durations(d)[k] == (double)r.n / 16000);
    }
    rnnt_dataset_free(d);
    d = load(0); // evaluation: everything
    CHECK(d && rnnt_dataset_count(d) == NREC && rnnt_dataset_max_samples(d) == 1508);
    rnnt_dataset_free(d);
    d = load(INFINITY);
    CHECK(d && rnnt_dataset_count(d) == NREC);
    rnnt_dataset_free(d);
}

TK_TEST(rnnt_data_bad_records) {
    tk_err e = {0};
    rnnt_dataset *d = NULL;
    char *p[1] = {(char *)write_records("rate.tks", 11, 0)};
    CHECK_EQ_INT(rnnt_dataset_load(p, 1, 0, &d, &e), TK_EDATA);
    char msg[512];
    tk_err_format(&e, msg, sizeof msg);
    CHECK(strstr(msg, "rate.tks: record 11") && strstr(msg, "16000"));
    p[0] = (char *)write_records("schema.tks", -1, 1);
    CHECK_EQ_INT(rnnt_dataset_load(p, 1, 0, &d, &e), TK_EDATA);
    tk_err_format(&e, msg, sizeof msg);
    CHECK(strstr(msg, "field \"pcm\"") && strstr(msg, "prep librispeech"));
    p[0] = (char *)write_records("ok.tks", -1, 0);
    CHECK_EQ_INT(rnnt_dataset_load(p, 1, 1e-5, &d, &e), TK_EDATA); // nothing that short
    CHECK(d == NULL);
}

// ---- batches ----

typedef struct {
    rnnt_batch b;
    int B, K;
    int64_t L;
} bbuf;

static void balloc(bbuf *x, int B, int64_t L, int K) {
    x->B = B, x->L = L, x->K = K;
    x->b.pcm = calloc((size_t)B * L, 4);
    x->b.len = calloc((size_t)B, 4), x->b.utt = calloc((size_t)B, 4), x->b.rate = calloc((size_t)B, 4);
    x->b.tokens = calloc((size_t)B * K, 4), x->b.ntok = calloc((size_t)B, 4), x->b.epoch = calloc(1, 4);
}
static void bfree(bbuf *x) {
    free(x->b.pcm), free(x->b.len), free(x->b.utt), free(x->b.rate), free(x->b.tokens), free(x->b.ntok), free(x->b.epoch);
}
static int64_t pcm_at(const rnnt_batch *b, int k) {
    int64_t at = 0;
    for (int i = 0; i < k; i++) at += b->len[i];
    return at;
}
// Utterance k of a equals utterance j of b, every byte.
static int same_utt(const bbuf *a, int k, const bbuf *b, int j) {
    const rnnt_batch *x = &a->b, *y = &b->b;
    return x->len[k] == y->len[j] && x->utt[k] == y->utt[j] && x->rate[k] == y->rate[j] &&
           x->ntok[k] == y->ntok[j] && x->epoch[0] == y->epoch[0] &&
           memcmp(x->pcm + pcm_at(x, k), y->pcm + pcm_at(y, j), (size_t)x->len[k] * 4) == 0 &&
           memcmp(x->tokens + (int64_t)k * a->K, y->tokens + (int64_t)j * b->K, (size_t)a->K * 4) == 0;
}

static rnnt_data_cfg test_cfg(int64_t batch) {
    rnnt_data_cfg c;
    rnnt_data_cfg_default(&c);
    c.seed = 1234, c.batch = batch, c.max_duration = MAXDUR, c.buckets = 3;
    return c;
}

// The batch's bytes: audio s / 32768 packed with a zero tail, tokens padded with 0, the speed
// factor the fp32 of U(0.85, 1.15) drawn from (seed, epoch, utterance), 1 in eval batches.
TK_TEST(rnnt_data_batch_bytes) {
    rnnt_dataset *d = load(MAXDUR);
    if (!d) {
        CHECK(0);
        return;
    }
    rnnt_data_cfg c = test_cfg(8);
    rnnt_reader *r;
    tk_err e = {0};
    CHECK_EQ_INT(rnnt_reader_open(&c, d, 0, 1, &r, &e), 0);
    CHECK_EQ_INT(rnnt_reader_steps_per_epoch(r), 37 / 8);
    bbuf x;
    balloc(&x, 8, MAXLEN, 7);
    CHECK_EQ_INT(rnnt_reader_batch(r, 5, 4, &x.b, &e), 0); // epoch 1, its second batch
    CHECK_EQ_INT(x.b.epoch[0], 1);
    int64_t at = 0;
    for (int k = 0; k < 8; k++) {
        rnnt_record rec;
        rnnt_dataset_record(d, x.b.utt[k], &rec);
        CHECK_EQ_INT(x.b.len[k], rec.n);
        for (int64_t j = 0; j < rec.n; j++)
            if (x.b.pcm[at + j] != (float)rec.pcm[j] / 32768.0f) {
                CHECK(0);
                break;
            }
        at += rec.n;
        const double u = (x.b.rate[k] - 0.85) / 0.3;
        CHECK(x.b.rate[k] >= 0.85f && x.b.rate[k] < 1.15f);
        CHECK(x.b.rate[k] == (float)tk_speed_rate(1234, 1, (uint32_t)x.b.utt[k], 0.85, 1.15));
        CHECK(x.b.rate[k] != (float)tk_speed_rate(1234, 0, (uint32_t)x.b.utt[k], 0.85, 1.15));
        (void)u;
        CHECK_EQ_INT(x.b.ntok[k], rec.ntok);
        for (int t = 0; t < 7; t++) CHECK_EQ_INT(x.b.tokens[k * 7 + t], t < rec.ntok ? rec.tokens[t] : 0);
    }
    for (int64_t j = at; j < 8 * MAXLEN; j++)
        if (x.b.pcm[j] != 0) {
            CHECK(0);
            break;
        }
    CHECK_EQ_INT(rnnt_eval_batch(d, &c, 30, 7, MAXLEN, 7, &x.b, &e), 0);
    for (int k = 0; k < 7; k++) CHECK(x.b.utt[k] == 30 + k && x.b.rate[k] == 1.0f);
    CHECK_EQ_INT(x.b.epoch[0], 0);
    CHECK_EQ_INT(rnnt_eval_batch(d, &c, 31, 7, MAXLEN, 7, &x.b, &e), TK_EINTERNAL); // past the end
    CHECK_EQ_INT(rnnt_eval_batch(d, &c, 0, 1, 10, 7, &x.b, &e), TK_EDATA);         // longer than the batch holds
    c.speed = 0;
    rnnt_reader_close(r);
    CHECK_EQ_INT(rnnt_reader_open(&c, d, 0, 1, &r, &e), 0);
    CHECK_EQ_INT(rnnt_reader_batch(r, 0, 4, &x.b, &e), 0);
    for (int k = 0; k < 8; k++) CHECK(x.b.rate[k] == 1.0f);
    rnnt_reader_close(r);
    bfree(&x);
    rnnt_dataset_free(d);
}

// Each epoch holds every utterance at most once, 4 whole batches of 8 (32 of the 37), the same
// order for the same (seed, epoch) and another for the next epoch.
TK_TEST(rnnt_data_order_deterministic) {
    rnnt_dataset *d = load(MAXDUR);
    if (!d) {
        CHECK(0);
        return;
    }
    rnnt_data_cfg c = test_cfg(8);
    int64_t o[NREC], o2[NREC], used = 0;
    tk_err e = {0};
    CHECK_EQ_INT(rnnt_epoch_order(&c, d, 0, o, &used, &e), 0);
    CHECK_EQ_INT(used, 32);
    int seen[NREC] = {0};
    for (int i = 0; i < used; i++) seen[o[i]]++;
    for (int i = 0; i < NREC; i++) CHECK(seen[i] <= 1);
    CHECK_EQ_INT(rnnt_epoch_order(&c, d, 0, o2, &used, &e), 0);
    CHECK(memcmp(o, o2, 32 * sizeof *o) == 0);
    CHECK_EQ_INT(rnnt_epoch_order(&c, d, 1, o2, &used, &e), 0);
    CHECK(memcmp(o, o2, 32 * sizeof *o) != 0);
    // the reader's batches are that order's consecutive slices
    rnnt_reader *r;
    CHECK_EQ_INT(rnnt_reader_open(&c, d, 0, 1, &r, &e), 0);
    bbuf x;
    balloc(&x, 8, MAXLEN, 7);
    for (int s = 0; s < 4; s++) {
        CHECK_EQ_INT(rnnt_reader_batch(r, 4 + s, 4, &x.b, &e), 0);
        for (int k = 0; k < 8; k++) CHECK_EQ_INT(x.b.utt[k], o2[8 * s + k]);
    }
    CHECK_EQ_INT(rnnt_reader_batch(r, 4, 5, &x.b, &e), TK_EINTERNAL); // a fifth batch: past the 32
    rnnt_reader_close(r);
    c.batch = 7;
    CHECK_EQ_INT(rnnt_reader_open(&c, d, 0, 2, &r, &e), TK_EUSAGE);
    c.batch = 38;
    CHECK_EQ_INT(rnnt_reader_open(&c, d, 0, 1, &r, &e), TK_EDATA);
    bfree(&x);
    rnnt_dataset_free(d);
}

typedef struct {
    const rnnt_dataset *d;
    rnnt_data_cfg c;
    int rank, world, reverse;
    bbuf out[8];
    int rc;
} job;

// Steps 0 .. 7 (two epochs of 4) of one rank, in order or backwards.
static void *run_job(void *p) {
    job *j = p;
    rnnt_reader *r;
    tk_err e = {0};
    j->rc = rnnt_reader_open(&j->c, j->d, j->rank, j->world, &r, &e);
    for (int s = 0; !j->rc && s < 8; s++) {
        int step = j->reverse ? 7 - s : s;
        balloc(&j->out[step], 8 / j->world, MAXLEN, 7);
        j->rc = rnnt_reader_batch(r, step, 4, &j->out[step].b, &e);
    }
    if (!j->rc) rnnt_reader_close(r);
    return NULL;
}

// One rank's batch 8 equals the concatenation of two ranks' 4 + 4 and four ranks' 2 each, utterance
// by utterance, every byte, read by readers on their own threads, some backwards.
TK_TEST(rnnt_data_rank_and_thread_independent) {
    rnnt_dataset *d = load(MAXDUR);
    if (!d) {
        CHECK(0);
        return;
    }
    job jobs[7];
    const int world[7] = {1, 2, 2, 4, 4, 4, 4}, rank[7] = {0, 0, 1, 0, 1, 2, 3};
    pthread_t t[7];
    for (int i = 0; i < 7; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].d = d, jobs[i].c = test_cfg(8), jobs[i].rank = rank[i], jobs[i].world = world[i], jobs[i].reverse = i % 2;
        CHECK_EQ_INT(pthread_create(&t[i], NULL, run_job, &jobs[i]), 0);
    }
    for (int i = 0; i < 7; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 7; i++) CHECK_EQ_INT(jobs[i].rc, 0);
    int bad = 0;
    for (int s = 0; s < 8; s++)
        for (int i = 1; i < 7; i++) {
            const int b = 8 / world[i];
            for (int k = 0; k < b; k++) bad += !same_utt(&jobs[0].out[s], rank[i] * b + k, &jobs[i].out[s], k);
        }
    CHECK_EQ_INT(bad, 0);
    // the two epochs differ
    int differ = 0;
    for (int k = 0; k < 8; k++) differ += jobs[0].out[0].b.utt[k] != jobs[0].out[4].b.utt[k];
    CHECK(differ > 0);
    for (int i = 0; i < 7; i++)
        for (int s = 0; s < 8; s++) bfree(&jobs[i].out[s]);
    rnnt_dataset_free(d);
}

// ---- features ----

static int64_t frames_out(int64_t L) { return ((L / 160 + 1) + 2) / 3; } // ceil((L / 160 + 1) / 3)

// Lengths, the zero frames past them, and SpecAugment only in training: evaluation features have no
// zero band, training ones with 2 frequency masks of up to 20 of 80 bands in every frame have
// some; the same (seed, epoch) gives the same bytes, another epoch others.
TK_TEST(rnnt_data_features_cpu) {
    rnnt_dataset *d = load(MAXDUR);
    if (!d) {
        CHECK(0);
        return;
    }
    rnnt_data_cfg c = test_cfg(8);
    tk_err e = {0};
    rnnt_feat *f;
    CHECK_EQ_INT(rnnt_feat_create(tk_test_cpu(), &c, 8, MAXLEN, &f, &e), 0);
    const int64_t Tcap = rnnt_feat_max_out(f);
    CHECK_EQ_INT(Tcap, frames_out((int64_t)ceil(MAXLEN * (double)nextafterf(1.15f, 2.0f))));
    float *y = calloc((size_t)8 * Tcap * 240, 4), *y2 = calloc((size_t)8 * Tcap * 240, 4);
    int32_t ylen[8];
    int64_t T;
    bbuf x;
    balloc(&x, 8, MAXLEN, 7);
    rnnt_reader *r;
    CHECK_EQ_INT(rnnt_reader_open(&c, d, 0, 1, &r, &e), 0);
    CHECK_EQ_INT(rnnt_reader_batch(r, 1, 4, &x.b, &e), 0);
    // training: the lengths after speed perturbation
    CHECK_EQ_INT(rnnt_features(f, 1, 8, &x.b, x.b.pcm, y, ylen, NULL, &T, &e), 0);
    int64_t Tmax = 0, zero_band = 0;
    for (int k = 0; k < 8; k++) {
        const int64_t want = frames_out((int64_t)ceil((double)x.b.len[k] * (double)x.b.rate[k]));
        CHECK_EQ_INT(ylen[k], want);
        Tmax = want > Tmax ? want : Tmax;
        for (int64_t t = 0; t < T; t++)
            for (int m = 0; m < 240; m++) {
                float v = y[((size_t)k * T + t) * 240 + m];
                if (t >= ylen[k] && v != 0) {
                    CHECK(0);
                    t = T;
                    break;
                }
            }
        // feature band 0 .. 79 of output frame 0 (input frame 0): count the bands all zero
        for (int m = 0; m < 80; m++) zero_band += y[(size_t)k * T * 240 + m] == 0;
    }
    CHECK_EQ_INT(T, Tmax);
    CHECK(zero_band > 0);
    CHECK_EQ_INT(rnnt_features(f, 1, 8, &x.b, x.b.pcm, y2, ylen, NULL, &T, &e), 0);
    CHECK(memcmp(y, y2, (size_t)8 * T * 240 * 4) == 0);
    // eval of the same batch: no speed, no masks (every value of a frame inside the utterance
    // nonzero, the normalized log-mel of noise-free audio hits 0 exactly only by chance)
    CHECK_EQ_INT(rnnt_features(f, 0, 8, &x.b, x.b.pcm, y, ylen, NULL, &T, &e), 0);
    int64_t zeros = 0, Tev = 0;
    for (int k = 0; k < 8; k++) {
        CHECK_EQ_INT(ylen[k], frames_out(x.b.len[k]));
        Tev = ylen[k] > Tev ? ylen[k] : Tev;
        const int64_t F = x.b.len[k] / 160 + 1;
        for (int64_t t = 0; t < F; t++)
            for (int m = 0; m < 80; m++) zeros += y[((size_t)k * T + t / 3) * 240 + (t % 3) * 80 + m] == 0;
    }
    CHECK_EQ_INT(T, Tev);
    CHECK(zeros < 8);
    // the next epoch's batch of the same utterances: other rates and masks
    x.b.epoch[0] = 2;
    for (int k = 0; k < 8; k++) x.b.rate[k] = (float)tk_speed_rate(1234, 2, (uint32_t)x.b.utt[k], 0.85, 1.15);
    CHECK_EQ_INT(rnnt_features(f, 1, 8, &x.b, x.b.pcm, y2, ylen, NULL, &T, &e), 0);
    CHECK(memcmp(y, y2, (size_t)8 * T * 240 * 4) != 0);
    // bad lengths are refused
    x.b.len[3] = MAXLEN + 1;
    CHECK_EQ_INT(rnnt_features(f, 0, 8, &x.b, x.b.pcm, y, ylen, NULL, &T, &e), TK_EINTERNAL);
    CHECK_EQ_INT(rnnt_features(f, 0, 9, &x.b, x.b.pcm, y, ylen, NULL, &T, &e), TK_EINTERNAL);
    rnnt_reader_close(r);
    rnnt_feat_destroy(f);
    free(y), free(y2);
    bfree(&x);
    rnnt_dataset_free(d);
}

// ---- the oracle driver (see the top of the file) ----

static int drive(const char *mode, tk_err *e) {
    rnnt_data_cfg c;
    rnnt_data_cfg_default(&c);
    c.eval_dither = 0;
    if (strcmp(mode, "dali") != 0 && strcmp(mode, "torch") != 0)
        return tk_err_set(e, TK_EUSAGE, "TK_MELFEAT_DRIVE must be dali or torch, not \"%s\"", mode);
    c.features = mode[0] == 't' ? TK_MELWIN_TORCH : TK_MELWIN_DALI;
    int B;
    int64_t off[65], Lmax = 1, T;
    int32_t len[64], utt[64], ylen[64], epoch = 0;
    float rate[64], *a, *y = NULL;
    int rc = tk_melfeat_read_stdin(&B, off, &a, e);
    for (int b = 0; b < B && !rc; b++) {
        len[b] = (int32_t)(off[b + 1] - off[b]), utt[b] = b, rate[b] = 1;
        Lmax = len[b] > Lmax ? len[b] : Lmax;
    }
    rnnt_feat *f = NULL;
    if (!rc) rc = rnnt_feat_create(tk_test_cpu(), &c, B, Lmax, &f, e);
    if (!rc) y = malloc((size_t)B * rnnt_feat_max_out(f) * 240 * sizeof *y);
    if (!rc && !y) rc = tk_err_errno(e, ENOMEM, "out of memory");
    rnnt_batch hb = {.pcm = a, .len = len, .utt = utt, .rate = rate, .epoch = &epoch};
    if (!rc) rc = rnnt_features(f, 0, B, &hb, a, y, ylen, NULL, &T, e);
    for (int b = 0; b < B && !rc; b++) {
        const int64_t F = len[b] / 160 + 1;
        printf("utt %d %lld\n", b, (long long)F);
        for (int64_t t = 0; t < F; t++)
            for (int m = 0; m < 80; m++)
                printf("%.9g%c", y[((size_t)b * T + t / 3) * 240 + (t % 3) * 80 + m], m + 1 < 80 ? ' ' : '\n');
    }
    rnnt_feat_destroy(f);
    free(a), free(y);
    return rc;
}

// Every record of path as one evaluation batch: its features' lengths and its decoded tokens.
static int drive_records(const char *path, tk_err *e) {
    const char *vpath = getenv("VOCAB");
    if (!vpath) return tk_err_set(e, TK_EUSAGE, "VOCAB=FILE is needed");
    char *paths[1] = {(char *)path};
    rnnt_dataset *d = NULL;
    tk_spm_vocab *v = NULL;
    rnnt_feat *f = NULL;
    bbuf x = {0};
    float *y = NULL;
    rnnt_data_cfg c;
    rnnt_data_cfg_default(&c);
    int rc = rnnt_dataset_load(paths, 1, 0, &d, e);
    if (!rc) rc = tk_spm_vocab_load(vpath, &v, e);
    const int n = rc ? 0 : (int)rnnt_dataset_count(d);
    int64_t L = 0, T;
    int K = 0;
    if (!rc) rnnt_batch_dims(&c, d, &L, &K), balloc(&x, n, L, K);
    if (!rc) rc = rnnt_eval_batch(d, &c, 0, n, L, K, &x.b, e);
    if (!rc) rc = rnnt_feat_create(tk_test_cpu(), &c, n, L, &f, e);
    if (!rc && !(y = malloc((size_t)n * rnnt_feat_max_out(f) * 240 * sizeof *y))) rc = tk_err_errno(e, ENOMEM, "out of memory");
    int32_t *ylen = rc ? NULL : malloc((size_t)n * sizeof *ylen);
    if (!rc && !ylen) rc = tk_err_errno(e, ENOMEM, "out of memory");
    if (!rc) rc = rnnt_features(f, 0, n, &x.b, x.b.pcm, y, ylen, NULL, &T, e);
    for (int k = 0; k < n && !rc; k++) {
        rnnt_record r;
        rnnt_dataset_record(d, k, &r);
        char *text;
        if ((rc = tk_spm_decode(v, x.b.tokens + (int64_t)k * K, x.b.ntok[k], &text, NULL, e))) break;
        printf("%.*s\t%lld\t%d\t%s\t%.*s\n", (int)r.id_len, r.id, (long long)r.n, ylen[k], text, (int)r.text_len, r.text);
        free(text);
    }
    if (x.B) bfree(&x);
    free(y), free(ylen);
    rnnt_feat_destroy(f);
    tk_spm_vocab_free(v);
    rnnt_dataset_free(d);
    return rc;
}

__attribute__((constructor(200))) static void drive_mode(void) {
    const char *s = getenv("TK_MELFEAT_DRIVE"), *r = getenv("TK_RNNT_RECORDS");
    if (!s && !r) return;
    tk_err e = {0};
    int rc = s ? drive(s, &e) : drive_records(r, &e);
    tk_drive_exit("test_rnnt_data", rc, &e);
}
