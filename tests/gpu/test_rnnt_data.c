// RNN-T's batch features (lib/workloads/rnnt/data.c rnnt_features) on the cuda backend against the
// same function on the cpu backend, on fresh random batches each run (8 utterances of 1 sample to
// 3 s of i16-valued audio / 32768, packed as the reader packs them): training (speed perturbation
// with the batch's fp32 factors, dither, SpecAugment, splicing) and evaluation (dither only). What
// this adds to tests/gpu/test_melfeat.c (the ops one by one): the offsets, frame counts, ids and
// rates the function computes on the host and copies to the device, the resampled lengths, the
// batch's Fmax, the output's T and lengths (ylen on the host and on the device, exact), and the
// ops chained through its device buffers. Tolerance as test_melfeat.c's log-mel: norm-wise relative
// <= 1e-5 and no value off by more than 1e-3 (fp32 cuFFT against the fp64 reference); which values
// are 0 (SpecAugment's masks, the padding) must agree exactly. A second run on the device gives
// the same bytes.
#include <math.h>
#include <string.h>

#include "gpu_test.h"
#include "workloads/rnnt/data.h"

enum { B = 8, LMAX = 48000 };

typedef struct {
    float pcm[B * LMAX], rate[B];
    int32_t len[B], utt[B], epoch;
} host_batch;

static void make_batch(host_batch *h, int train, uint32_t epoch) {
    float u[B];
    gt_fill(u, B, 0, 1, 0);
    const int fixed[B] = {1, 100, 160, 320, 16000, 0, 0, LMAX}; // edge lengths, then random ones
    int64_t at = 0;
    for (int b = 0; b < B; b++) {
        h->len[b] = fixed[b] ? fixed[b] : 1 + (int32_t)(u[b] * (LMAX - 1));
        h->utt[b] = (int32_t)(gt_u32((uint64_t)b) % 100000u);
        h->rate[b] = train ? (float)tk_speed_rate(7, epoch, (uint32_t)h->utt[b], 0.85, 1.15) : 1.0f;
        gt_fill(h->pcm + at, (size_t)h->len[b], -32768, 32767, 1);
        for (int64_t i = 0; i < h->len[b]; i++) h->pcm[at + i] /= 32768.0f;
        at += h->len[b];
    }
    memset(h->pcm + at, 0, (size_t)(B * LMAX - at) * sizeof(float));
    h->epoch = (int32_t)epoch;
}

static int within(const char *what, const float *got, const float *ref, size_t n) {
    const double err = gt_relerr(got, ref, n);
    double mx = 0;
    size_t zeros = 0;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs((double)got[i] - ref[i]));
        zeros += (got[i] == 0) != (ref[i] == 0);
    }
    if (mx != mx) mx = INFINITY;
    const int ok = err <= 1e-5 && mx <= 1e-3 && zeros == 0;
    printf("# table rnnt_data %-32s rel err %.2e max abs %.2e zeros differing %zu of %zu%s\n", what, err, mx, zeros,
           n, ok ? "" : "  <-- FAIL");
    return ok;
}

static void run_case(int *tk_failed_, int train) {
    static host_batch h;
    make_batch(&h, train, 3);
    rnnt_data_cfg c;
    rnnt_data_cfg_default(&c);
    c.seed = 7;
    tk_err e = {0};
    tk_ctx *cpu;
    if (tk_ctx_create(&cpu, TK_BACKEND_CPU, 0, &e)) gt_die_("cpu context", &e);
    rnnt_feat *fc, *fg;
    if (rnnt_feat_create(cpu, &c, B, LMAX, &fc, &e) || rnnt_feat_create(gt_ctx_, &c, B, LMAX, &fg, &e))
        gt_die_("rnnt_feat_create", &e);
    const int64_t cap = rnnt_feat_max_out(fg);
    CHECK_EQ_INT(cap, rnnt_feat_max_out(fc));
    const size_t ny = (size_t)B * cap * 240;
    float *yc = gt_host(ny * 4), *yg = gt_host(ny * 4), *yg2 = gt_host(ny * 4);
    float *dpcm = gt_dev(sizeof h.pcm), *dy = gt_dev(ny * 4);
    int32_t *dlen = gt_dev(B * 4), lc[B], lg[B], ld[B];
    gt_up(dpcm, h.pcm, sizeof h.pcm);
    rnnt_batch hb = {.pcm = h.pcm, .len = h.len, .utt = h.utt, .rate = h.rate, .epoch = &h.epoch};
    int64_t Tc = -1, Tg = -2;
    CHECK_EQ_INT(rnnt_features(fc, train, B, &hb, h.pcm, yc, lc, NULL, &Tc, &e), 0);
    gt_poison(dy, ny * 4, 0xff);
    CHECK_EQ_INT(rnnt_features(fg, train, B, &hb, dpcm, dy, lg, dlen, &Tg, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    CHECK_EQ_INT(Tg, Tc);
    gt_down(yg, dy, (size_t)B * Tg * 240 * 4);
    gt_down(ld, dlen, sizeof ld);
    for (int b = 0; b < B; b++) {
        CHECK_EQ_INT(lg[b], lc[b]);
        CHECK_EQ_INT(ld[b], lc[b]);
        const int64_t n = train ? (int64_t)ceil((double)h.len[b] * (double)h.rate[b]) : h.len[b];
        CHECK_EQ_INT(lc[b], (n / 160 + 1 + 2) / 3);
    }
    CHECK(within(train ? "train (speed, dither, masks)" : "eval (dither)", yg, yc, (size_t)B * Tc * 240));
    gt_poison(dy, ny * 4, 0xff);
    CHECK_EQ_INT(rnnt_features(fg, train, B, &hb, dpcm, dy, lg, dlen, &Tg, &e), 0);
    gt_down(yg2, dy, (size_t)B * Tg * 240 * 4);
    CHECK(memcmp(yg, yg2, (size_t)B * Tg * 240 * 4) == 0);
    rnnt_feat_destroy(fc), rnnt_feat_destroy(fg);
    tk_free(gt_ctx_, dpcm), tk_free(gt_ctx_, dy), tk_free(gt_ctx_, dlen);
    free(yc), free(yg), free(yg2);
    tk_ctx_destroy(cpu);
}

TK_TEST(rnnt_data_features_train_cuda_vs_cpu) { run_case(tk_failed_, 1); }
TK_TEST(rnnt_data_features_eval_cuda_vs_cpu) { run_case(tk_failed_, 0); }
