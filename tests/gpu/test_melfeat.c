// RNN-T's features on the cuda backend (kernels/melfeat.h) against the CPU reference, on fresh
// random audio of several lengths each run (1 sample, shorter than a window, a multiple of the
// hop, up to 2.5 s) with the dither on (the same Philox noise on both sides).
// Tolerances. Log-mel (normalized): norm-wise relative <= 1e-5 and no value off by more than
// 1e-3 absolute. The reference transforms in fp64, cuFFT in fp32: the CPU equivalent, the same
// features with torch.stft in float32 against float64 (contrib/peers/rnnt_features.py measure,
// random audio of 1 .. 40000 samples, both windows and normalizations), measured 1.7e-6
// norm-wise and 9e-5 at most on one value (the low bands, which pre-emphasis leaves with ~1e-3
// of a frame's power: the fp32 rounding of the strong bins weighs more there, and the log and the
// division by a band's std amplify it); the bounds leave 6x and 11x. Speed perturbation:
// norm-wise 1e-6 (both fp64 inside, the cuda side's sine by alternation). SpecAugment, splicing
// and the padding: bit-exact (the same Philox words; copies). The cuda features are also
// bit-for-bit repeatable.
#include <math.h>
#include <string.h>

#include "gpu_test.h"
#include "melfeat.h"

static int within(const char *what, const float *got, const float *ref, size_t n, double tol, double abs_tol) {
    const double err = gt_relerr(got, ref, n);
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs((double)got[i] - ref[i]));
    if (mx != mx) mx = INFINITY;
    const int ok = err <= tol && mx <= abs_tol;
    printf("# table melfeat %-40s rel err %.2e max abs %.2e (%zu of %zu differ)%s\n", what, err, mx,
           gt_ndiff(got, ref, n), n, ok ? "" : "  <-- FAIL");
    return ok;
}

typedef struct {
    int B, Fmax;
    int64_t off[9];
    int F[8];
    uint32_t utt[8];
    void *d_off, *d_F, *d_utt;
    tk_melfeat_batch host, dev;
} batch;

static void batch_make(batch *s, int B, const int64_t *len, int hop) {
    memset(s, 0, sizeof *s);
    s->B = B, s->Fmax = 1;
    for (int b = 0; b < B; b++) {
        s->off[b + 1] = s->off[b] + len[b];
        s->F[b] = (int)tk_melfeat_frames(len[b], hop);
        s->Fmax = s->F[b] > s->Fmax ? s->F[b] : s->Fmax;
        s->utt[b] = gt_u32(b) % 1000000;
    }
    s->d_off = gt_dev(sizeof s->off), s->d_F = gt_dev(sizeof s->F), s->d_utt = gt_dev(sizeof s->utt);
    gt_up(s->d_off, s->off, sizeof s->off), gt_up(s->d_F, s->F, sizeof s->F), gt_up(s->d_utt, s->utt, sizeof s->utt);
    s->host = (tk_melfeat_batch){B, s->Fmax, s->off, s->F, s->utt, NULL, NULL};
    s->dev = (tk_melfeat_batch){B, s->Fmax, s->d_off, s->d_F, s->d_utt, NULL, NULL};
}
static void batch_free(batch *s) { tk_free(gt_ctx_, s->d_off), tk_free(gt_ctx_, s->d_F), tk_free(gt_ctx_, s->d_utt); }

// The whole chain: log-mel, SpecAugment, splice, for both windows/normalizations.
TK_TEST(melfeat_chain_matches_reference) {
    tk_err e = {0};
    const int64_t len[6] = {1, 200, 16000, 1 + gt_u32(90) % 40000, 161 + gt_u32(91) % 3000, 4800};
    batch s;
    batch_make(&s, 6, len, 160);
    const int64_t total = s.off[6];
    const int M = 80, nb = 257;
    float *a = gt_host(total * 4), *fb = gt_host(M * nb * 4);
    gt_fill(a, total, -0.5f, 0.5f, 0);
    CHECK_EQ_INT(tk_mel_filterbank(16000, 512, M, fb, &e), 0);
    float *d_a = gt_dev_from(a, total, TK_F32), *d_fb = gt_dev_from(fb, M * nb, TK_F32);
    const size_t nx = (size_t)6 * s.Fmax * M;
    const int Tout = (s.Fmax + 2) / 3;
    const size_t ny = (size_t)6 * Tout * 3 * M;
    float *d_x = gt_dev(nx * 4), *d_y = gt_dev(ny * 4), *x = gt_host(nx * 4), *y = gt_host(ny * 4);
    float *gx = gt_host(nx * 4), *gx2 = gt_host(nx * 4), *gy = gt_host(ny * 4);
    for (int mode = 0; mode < 2; mode++) {
        tk_melfeat_cfg c;
        tk_melfeat_default(&c);
        c.seed = gt_u32(92), c.epoch = gt_u32(93) % 100;
        if (mode) c.window = TK_MELWIN_TORCH, c.norm_ddof = 1, c.norm_eps = 1e-5f;
        void *ws = gt_dev(tk_melfeat_ws_bytes(TK_BACKEND_CUDA, &c, 6, s.Fmax));
        gt_poison(d_x, nx * 4, 0xff);
        CHECK_EQ_INT(tk_melfeat_logmel(gt_ctx_, &c, &s.dev, d_a, d_fb, d_x, ws, &e), 0);
        gt_down(gx, d_x, nx * 4);
        CHECK_EQ_INT(tk_melfeat_logmel_ref(&c, &s.host, a, fb, x, &e), 0);
        CHECK(within(mode ? "log-mel (torch window, ddof 1)" : "log-mel (DALI window, ddof 0)", gx, x, nx, 1e-5,
                     1e-3));
        for (int b = 0; b < 6; b++) // padding frames exactly 0
            for (size_t i = ((size_t)b * s.Fmax + s.F[b]) * M; i < (size_t)(b + 1) * s.Fmax * M; i++) CHECK(gx[i] == 0);
        gt_poison(d_x, nx * 4, 0xff);
        CHECK_EQ_INT(tk_melfeat_logmel(gt_ctx_, &c, &s.dev, d_a, d_fb, d_x, ws, &e), 0);
        gt_down(gx2, d_x, nx * 4);
        CHECK(memcmp(gx, gx2, nx * 4) == 0);
        // SpecAugment and the splice on the same input (the device's features, copied to the host).
        memcpy(x, gx, nx * 4);
        tk_specaug_cfg sa;
        tk_specaug_default(&sa);
        sa.seed = c.seed, sa.epoch = c.epoch;
        CHECK_EQ_INT(tk_specaug(gt_ctx_, &sa, &s.dev, M, d_x, &e), 0);
        CHECK_EQ_INT(tk_specaug_ref(&sa, &s.host, M, x, &e), 0);
        gt_down(gx, d_x, nx * 4);
        CHECK(within("specaug", gx, x, nx, 0, 0));
        gt_poison(d_y, ny * 4, 0xff);
        CHECK_EQ_INT(tk_melfeat_splice(gt_ctx_, &s.dev, M, 3, 3, Tout, d_x, d_y, &e), 0);
        CHECK_EQ_INT(tk_melfeat_splice_ref(&s.host, M, 3, 3, Tout, x, y, &e), 0);
        gt_down(gy, d_y, ny * 4);
        CHECK(within("splice x3 / 3", gy, y, ny, 0, 0));
        tk_free(gt_ctx_, ws);
    }
    tk_free(gt_ctx_, d_a), tk_free(gt_ctx_, d_fb), tk_free(gt_ctx_, d_x), tk_free(gt_ctx_, d_y);
    free(a), free(fb), free(x), free(y), free(gx), free(gx2), free(gy);
    batch_free(&s);
}

// A call padded to fixed shapes (the captured RNN-T step's): x padded 40 frames past the batch's
// Fmax, the time masks' extent (Fmask, the batch's Fmax) and the epoch read from device memory,
// the cfg's epoch another: the cuda side's log-mel and SpecAugment match the reference's padded
// call (within the log-mel bounds; the masks bit for bit on the same input), whose values the
// unit test melfeat_padded_call shows equal the unpadded call's.
TK_TEST(melfeat_padded_call_matches_reference) {
    tk_err e = {0};
    const int64_t len[4] = {16000, 1 + gt_u32(120) % 12000, 4800, 161 + gt_u32(121) % 3000};
    batch s;
    batch_make(&s, 4, len, 160);
    const int64_t total = s.off[4];
    const int M = 80, nb = 257, Fp = s.Fmax + 40;
    float *a = gt_host(total * 4), *fb = gt_host(M * nb * 4);
    gt_fill(a, total, -0.5f, 0.5f, 0);
    CHECK_EQ_INT(tk_mel_filterbank(16000, 512, M, fb, &e), 0);
    float *d_a = gt_dev_from(a, total, TK_F32), *d_fb = gt_dev_from(fb, M * nb, TK_F32);
    const uint32_t epoch = 1 + gt_u32(122) % 100;
    int *d_fmask = gt_dev(4);
    uint32_t *d_epoch = gt_dev(4);
    gt_up(d_fmask, &s.Fmax, 4), gt_up(d_epoch, &epoch, 4);
    tk_melfeat_batch hp = s.host, dp = s.dev;
    hp.Fmax = dp.Fmax = Fp;
    hp.Fmask = &s.Fmax, hp.epoch = &epoch, dp.Fmask = d_fmask, dp.epoch = d_epoch;
    const size_t nx = (size_t)4 * Fp * M;
    float *d_x = gt_dev(nx * 4), *x = gt_host(nx * 4), *gx = gt_host(nx * 4);
    tk_melfeat_cfg c;
    tk_melfeat_default(&c);
    c.seed = gt_u32(123), c.epoch = 0; // (the device's epoch wins)
    void *ws = gt_dev(tk_melfeat_ws_bytes(TK_BACKEND_CUDA, &c, 4, Fp));
    gt_poison(d_x, nx * 4, 0xff);
    CHECK_EQ_INT(tk_melfeat_logmel(gt_ctx_, &c, &dp, d_a, d_fb, d_x, ws, &e), 0);
    gt_down(gx, d_x, nx * 4);
    CHECK_EQ_INT(tk_melfeat_logmel_ref(&c, &hp, a, fb, x, &e), 0);
    CHECK(within("log-mel padded, epoch from memory", gx, x, nx, 1e-5, 1e-3));
    memcpy(x, gx, nx * 4);
    tk_specaug_cfg sa;
    tk_specaug_default(&sa);
    sa.seed = c.seed, sa.epoch = 0;
    CHECK_EQ_INT(tk_specaug(gt_ctx_, &sa, &dp, M, d_x, &e), 0);
    CHECK_EQ_INT(tk_specaug_ref(&sa, &hp, M, x, &e), 0);
    gt_down(gx, d_x, nx * 4);
    CHECK(within("specaug padded, Fmask and epoch from memory", gx, x, nx, 0, 0));
    tk_free(gt_ctx_, d_a), tk_free(gt_ctx_, d_fb), tk_free(gt_ctx_, d_x), tk_free(gt_ctx_, ws);
    tk_free(gt_ctx_, d_fmask), tk_free(gt_ctx_, d_epoch);
    free(a), free(fb), free(x), free(gx);
    batch_free(&s);
}

// More frames than one cuFFT chunk (4096): 8 utterances of 5 .. 10 s.
TK_TEST(melfeat_many_frames) {
    tk_err e = {0};
    int64_t len[8];
    for (int b = 0; b < 8; b++) len[b] = 80000 + gt_u32(100 + b) % 80000;
    batch s;
    batch_make(&s, 8, len, 160);
    const int64_t total = s.off[8];
    float *a = gt_host(total * 4), *fb = gt_host(80 * 257 * 4);
    gt_fill(a, total, -1, 1, 0);
    CHECK_EQ_INT(tk_mel_filterbank(16000, 512, 80, fb, &e), 0);
    tk_melfeat_cfg c;
    tk_melfeat_default(&c);
    c.seed = gt_u32(110);
    const size_t nx = (size_t)8 * s.Fmax * 80;
    float *d_a = gt_dev_from(a, total, TK_F32), *d_fb = gt_dev_from(fb, 80 * 257, TK_F32), *d_x = gt_dev(nx * 4);
    float *x = gt_host(nx * 4), *gx = gt_host(nx * 4);
    void *ws = gt_dev(tk_melfeat_ws_bytes(TK_BACKEND_CUDA, &c, 8, s.Fmax));
    CHECK_EQ_INT(tk_melfeat_logmel(gt_ctx_, &c, &s.dev, d_a, d_fb, d_x, ws, &e), 0);
    gt_down(gx, d_x, nx * 4);
    CHECK_EQ_INT(tk_melfeat_logmel_ref(&c, &s.host, a, fb, x, &e), 0);
    CHECK(within("log-mel, 8 utterances of 5-10 s", gx, x, nx, 1e-5, 1e-3));
    tk_free(gt_ctx_, d_a), tk_free(gt_ctx_, d_fb), tk_free(gt_ctx_, d_x), tk_free(gt_ctx_, ws);
    free(a), free(fb), free(x), free(gx);
    batch_free(&s);
}

// Speed perturbation: random rates of the Philox draw, random audio; a rate of exactly 1 on
// small integers returns the input exactly on both sides.
TK_TEST(melfeat_resample_matches_reference) {
    tk_err e = {0};
    const int B = 4;
    int64_t in_off[5] = {0}, out_off[5] = {0};
    double rate[4];
    for (int b = 0; b < B; b++) {
        const int64_t n = 1 + gt_u32(120 + b) % 30000;
        in_off[b + 1] = in_off[b] + n;
        rate[b] = b == 0 ? 1.0 : tk_speed_rate(gt_u32(125), 0, (uint32_t)b, 0.85, 1.15);
        out_off[b + 1] = out_off[b] + tk_speed_len(n, rate[b]);
    }
    float *in = gt_host(in_off[B] * 4), *out = gt_host(out_off[B] * 4), *got = gt_host(out_off[B] * 4);
    gt_fill(in, in_off[B], -8, 8, 1);
    float *d_in = gt_dev_from(in, in_off[B], TK_F32), *d_out = gt_dev(out_off[B] * 4);
    void *d_io = gt_dev(sizeof in_off), *d_oo = gt_dev(sizeof out_off), *d_r = gt_dev(sizeof rate);
    gt_up(d_io, in_off, sizeof in_off), gt_up(d_oo, out_off, sizeof out_off), gt_up(d_r, rate, sizeof rate);
    gt_poison(d_out, out_off[B] * 4, 0xff);
    CHECK_EQ_INT(tk_speed_resample(gt_ctx_, B, d_io, d_oo, d_r, d_in, d_out, &e), 0);
    gt_down(got, d_out, out_off[B] * 4);
    CHECK_EQ_INT(tk_speed_resample_ref(B, in_off, out_off, rate, in, out, &e), 0);
    CHECK(within("speed perturbation", got, out, out_off[B], 1e-6, 1e-4));
    for (int64_t i = 0; i < in_off[1]; i++) CHECK(fabsf(got[i] - in[i]) <= 1e-5f); // rate 1
    tk_free(gt_ctx_, d_in), tk_free(gt_ctx_, d_out), tk_free(gt_ctx_, d_io), tk_free(gt_ctx_, d_oo);
    tk_free(gt_ctx_, d_r);
    free(in), free(out), free(got);
}
