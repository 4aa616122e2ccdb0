// The CPU reference of RNN-T's features (kernels/melfeat_ref.c): the FFT on a pure cosine and
// against a direct DFT, the mel filterbank's known values (from an independent numpy transcription
// of librosa's Slaney filterbank) and properties (support, area normalization), frame counts and
// padding, the normalization's mean 0 and std 1, SpecAugment's mask ranges (widths, Python's
// half-to-even rounding of 0.03 F), the splice layout, and the resampler (rate 1 is the identity,
// lengths ceil(L r), a slow sine stays a sine at the new rate).
// With TK_MELFEAT_DRIVE=dali|torch in the environment the binary is instead the C side of
// tests/cli/rnnt-features-oracle.bats: it reads "B" then, per utterance, "L" and L samples from
// stdin, runs tk_melfeat_logmel_ref with the MLPerf parameters, no dither, and the window and
// normalization of DALI (dali) or of features.py (torch), and prints per utterance "utt b F" then
// F lines of n_mels values; then it exits before its TAP tests: 0, or the error's code with a
// message on stderr.
#include <errno.h>
#include <math.h>
#include <string.h>

#include "melfeat.h"
#include "tk_drive.h"
#include "tk_melfeat_stdin.h"
#include "tk_test.h"
#include "tk_test_cpu.h"

// ---- the FFT ----

// cos(2 pi k n / N) has X_k = X_{N-k} = N / 2 and nothing else; a direct DFT agrees on random data.
TK_TEST(melfeat_fft) {
    double x[512], X[514];
    for (int n = 0; n < 512; n++) x[n] = cos(6.283185307179586 * 37 * n / 512);
    tk_rfft_ref(512, x, X);
    for (int k = 0; k <= 256; k++) {
        CHECK_NEAR(X[2 * k], k == 37 ? 256.0 : 0.0, 1e-10);
        CHECK_NEAR(X[2 * k + 1], 0.0, 1e-10);
    }
    for (int n = 0; n < 16; n++) x[n] = tk_philox_uniform(7, 1, n) - 0.5;
    tk_rfft_ref(16, x, X);
    for (int k = 0; k <= 8; k++) {
        double re = 0, im = 0;
        for (int n = 0; n < 16; n++) {
            const double ph = 6.283185307179586 * k * n / 16;
            re += x[n] * cos(ph), im -= x[n] * sin(ph);
        }
        CHECK_NEAR(X[2 * k], re, 1e-12);
        CHECK_NEAR(X[2 * k + 1], im, 1e-12);
    }
}

// ---- the mel filterbank ----

// Values from numpy (Slaney scale, 82 points from 0 to 8000 Hz, triangles times 2 / (f2 - f0)):
// filter 0 covers bins 1 and 2 only (0.02253456, 0.00863771), filter 40 bins 54 .. 57, filter 79
// ends before bin 256 (8 kHz); every filter's sampled area (sum of weights times 31.25 Hz; the
// continuous triangle's is 1) is near 1: within 0.11 for the narrow filters below 35 (0.906 ..
// 1.108 in numpy), within 0.025 from 35 on.
TK_TEST(melfeat_filterbank) {
    tk_err e = {0};
    float *fb = malloc(80 * 257 * sizeof *fb);
    CHECK_EQ_INT(tk_mel_filterbank(16000, 512, 80, fb, &e), 0);
    CHECK_NEAR(fb[1], 0.02253456, 1e-6);
    CHECK_NEAR(fb[2], 0.00863771, 1e-6);
    CHECK(fb[0] == 0 && fb[3] == 0);
    for (int k = 0; k < 257; k++) CHECK((fb[40 * 257 + k] > 0) == (k >= 54 && k <= 57));
    CHECK_NEAR(fb[40 * 257 + 54], 0.00715944, 1e-6);
    CHECK(fb[79 * 257 + 256] == 0 && fb[79 * 257 + 255] > 0);
    for (int m = 0; m < 80; m++) {
        double area = 0;
        int peak = 0;
        for (int k = 0; k < 257; k++) {
            CHECK(fb[m * 257 + k] >= 0);
            area += fb[m * 257 + k] * 31.25;
            if (fb[m * 257 + k] > fb[m * 257 + peak]) peak = k;
        }
        CHECK(fabs(area - 1) < (m < 35 ? 0.11 : 0.025));
        if (m > 0) { // peaks move up with m
            int prev = 0;
            for (int k = 0; k < 257; k++)
                if (fb[(m - 1) * 257 + k] > fb[(m - 1) * 257 + prev]) prev = k;
            CHECK(peak >= prev);
        }
    }
    free(fb);
}

// ---- log-mel ----

// Frames 1 + floor(L / 160); padding frames 0; each feature's mean over the frames 0 and its std
// 1 (ddof 0 with DALI's settings, ddof 1 with features.py's, whose eps 1e-5 shifts it slightly).
TK_TEST(melfeat_logmel_frames_norm) {
    tk_err e = {0};
    CHECK_EQ_INT(tk_melfeat_frames(16000, 160), 101);
    CHECK_EQ_INT(tk_melfeat_frames(15999, 160), 100);
    CHECK_EQ_INT(tk_melfeat_frames(1, 160), 1);
    tk_melfeat_cfg c;
    tk_melfeat_default(&c);
    c.seed = 3;
    float *fb = malloc(80 * 257 * sizeof *fb);
    CHECK_EQ_INT(tk_mel_filterbank(16000, 512, 80, fb, &e), 0);
    const int64_t off[4] = {0, 3200, 3200 + 1000, 3200 + 1000 + 50};
    const int F[3] = {21, 7, 1}, Fmax = 24;
    uint32_t utt[3] = {5, 9, 11};
    float *a = malloc(4250 * sizeof *a), *x = malloc(3 * Fmax * 80 * sizeof *x);
    tk_test_fill(a, 4250, 11, 1, -0.5f, 0.5f);
    for (int ddof = 0; ddof <= 1; ddof++) {
        c.norm_ddof = ddof, c.norm_eps = ddof ? 1e-5f : 0.0f, c.window = ddof ? TK_MELWIN_TORCH : TK_MELWIN_DALI;
        tk_melfeat_batch bt = {3, Fmax, off, F, utt, NULL, NULL};
        CHECK_EQ_INT(tk_melfeat_logmel_ref(&c, &bt, a, fb, x, &e), 0);
        for (int b = 0; b < 3; b++) {
            for (int t = F[b]; t < Fmax; t++)
                for (int m = 0; m < 80; m++) CHECK(x[((size_t)b * Fmax + t) * 80 + m] == 0);
            if (F[b] < 2) continue;
            for (int m = 0; m < 80; m++) {
                double s = 0, q = 0;
                for (int t = 0; t < F[b]; t++) s += x[((size_t)b * Fmax + t) * 80 + m];
                for (int t = 0; t < F[b]; t++) q += pow(x[((size_t)b * Fmax + t) * 80 + m] - s / F[b], 2);
                CHECK_NEAR(s / F[b], 0.0, 1e-5);
                CHECK_NEAR(sqrt(q / (F[b] - ddof)), 1.0, 1e-3);
            }
        }
    }
    // Fmax too small for an utterance: refused.
    tk_melfeat_batch bad = {3, 20, off, F, utt, NULL, NULL};
    CHECK_EQ_INT(tk_melfeat_logmel_ref(&c, &bad, a, fb, x, &e), TK_EINTERNAL);
    free(a), free(x), free(fb);
}

// Silence then a pure tone at 1 kHz, no dither: silent frames hold ln(1e-20) in every band
// before normalization, which recovers the other frames' values from the normalized ones (with
// norm_eps 1e6, x = (v - mean) / (std + 1e6): v = 1e6 (x - x_silent) + ln(1e-20) to ~1e-5); in
// every frame inside the tone the largest band is the one whose filter weighs bin 32 (1 kHz) most.
TK_TEST(melfeat_logmel_tone) {
    tk_err e = {0};
    tk_melfeat_cfg c;
    tk_melfeat_default(&c);
    c.dither = 0, c.norm_eps = 1e6f;
    float *fb = malloc(80 * 257 * sizeof *fb), *a = malloc(4000 * sizeof *a), *x = malloc(26 * 80 * sizeof *x);
    CHECK_EQ_INT(tk_mel_filterbank(16000, 512, 80, fb, &e), 0);
    int best = 0;
    for (int m = 0; m < 80; m++)
        if (fb[m * 257 + 32] > fb[best * 257 + 32]) best = m;
    for (int i = 0; i < 4000; i++) a[i] = i < 2000 ? 0.0f : (float)sin(6.283185307179586 * 1000 * i / 16000);
    const int64_t off[2] = {0, 4000};
    const int F[1] = {26};
    uint32_t utt[1] = {0};
    tk_melfeat_batch bt = {1, 26, off, F, utt, NULL, NULL};
    CHECK_EQ_INT(tk_melfeat_logmel_ref(&c, &bt, a, fb, x, &e), 0);
    for (int m = 0; m < 80; m++) CHECK(x[5 * 80 + m] == x[0 * 80 + m]); // frames 0 .. 11 are silent
    for (int t = 14; t < 24; t++) { // frames 14 .. 23 lie inside the tone
        int arg = 0;
        double v[80];
        for (int m = 0; m < 80; m++) {
            v[m] = 1e6 * ((double)x[t * 80 + m] - x[m]) + log(1e-20);
            if (v[m] > v[arg]) arg = m;
        }
        CHECK_EQ_INT(arg, best);
        CHECK(v[arg] > 0 && v[0] < v[arg] - 10);
    }
    free(fb), free(a), free(x);
}

// ---- SpecAugment ----

// On all-ones features: the zeroed features are at most 2 bands of width <= 20 inside [0, 80),
// the zeroed frames at most 10 runs of width <= round(0.03 F) (half to even: F 50 -> 2, F 150 ->
// 4, F 250 -> 8 (7.5)) starting before Tmax - w; over many utterances the widths reach their
// maxima and 0. The same (seed, epoch, utterance) gives the same masks; another epoch others.
TK_TEST(melfeat_specaug_ranges) {
    tk_err e = {0};
    tk_specaug_cfg s;
    tk_specaug_default(&s);
    s.seed = 9;
    const int M = 80, Tmax = 260;
    float *x = malloc((size_t)Tmax * M * sizeof *x);
    const int Fs[3] = {50, 150, 250}, want[3] = {2, 4, 8};
    for (int q = 0; q < 3; q++) {
        int maxf = 0, minf = 99, maxt = 0, mint = 99;
        for (uint32_t u = 0; u < 400; u++) {
            for (int k = 0; k < 12; k++) {
                int lo, hi;
                tk_specaug_mask(&s, u, k, Fs[q], Tmax, M, &lo, &hi);
                const int w = hi - lo;
                CHECK(lo >= 0 && w >= 0);
                if (k < 2) {
                    CHECK(w <= 20 && (hi < M || (w == 0 && lo < M)));
                    maxf = w > maxf ? w : maxf, minf = w < minf ? w : minf;
                } else {
                    CHECK(w <= want[q] && lo < (Tmax - w > 1 ? Tmax - w : 1));
                    maxt = w > maxt ? w : maxt, mint = w < mint ? w : mint;
                }
            }
        }
        CHECK_EQ_INT(maxf, 20);
        CHECK_EQ_INT(minf, 0);
        CHECK_EQ_INT(maxt, want[q]);
        CHECK_EQ_INT(mint, 0);
    }
    // Applied: zeroed features and frames are exactly the masks' union.
    const int F[1] = {250};
    uint32_t utt[1] = {17};
    tk_melfeat_batch bt = {1, Tmax, NULL, F, utt, NULL, NULL};
    for (size_t i = 0; i < (size_t)Tmax * M; i++) x[i] = 1;
    CHECK_EQ_INT(tk_specaug_ref(&s, &bt, M, x, &e), 0);
    for (int t = 0; t < Tmax; t++)
        for (int m = 0; m < M; m++) {
            int z = 0;
            for (int k = 0; k < 12; k++) {
                int lo, hi;
                tk_specaug_mask(&s, 17, k, 250, Tmax, M, &lo, &hi);
                z |= (k < 2 ? m : t) >= lo && (k < 2 ? m : t) < hi;
            }
            CHECK(x[(size_t)t * M + m] == (z ? 0.0f : 1.0f));
        }
    int lo1, hi1, lo2, hi2, differ = 0;
    for (uint32_t u = 0; u < 20; u++) {
        tk_specaug_mask(&s, u, 0, 250, Tmax, M, &lo1, &hi1);
        s.epoch = 1;
        tk_specaug_mask(&s, u, 0, 250, Tmax, M, &lo2, &hi2);
        s.epoch = 0;
        differ += lo1 != lo2 || hi1 != hi2;
    }
    CHECK(differ > 10);
    free(x);
}

// A call padded to fixed shapes (a CUDA graph's step): x padded to Fp > the batch's Fmax frames,
// the time masks' extent (Fmask) and the epoch read from memory, gives the features of the call at
// the batch's own Fmax with the cfg's epoch, frame for frame, and zeros past each utterance's F.
TK_TEST(melfeat_padded_call) {
    tk_err e = {0};
    tk_melfeat_cfg c;
    tk_melfeat_default(&c);
    c.seed = 5, c.epoch = 3; // (dithered: the epoch matters)
    tk_specaug_cfg s;
    tk_specaug_default(&s);
    s.seed = 5, s.epoch = 3;
    const int M = c.n_mels, B = 2;
    const int64_t off[3] = {0, 4000, 4000 + 2500};
    int F[2];
    uint32_t utt[2] = {4, 9};
    for (int b = 0; b < B; b++) F[b] = (int)tk_melfeat_frames(off[b + 1] - off[b], c.hop);
    const int Fmax = F[0] > F[1] ? F[0] : F[1], Fp = Fmax + 17;
    float *a = malloc((size_t)off[B] * sizeof *a), *fb = malloc((size_t)M * (c.n_fft / 2 + 1) * sizeof *fb);
    float *x = malloc((size_t)B * Fmax * M * sizeof *x), *xp = malloc((size_t)B * Fp * M * sizeof *xp);
    for (int64_t i = 0; i < off[B]; i++) a[i] = (float)sin(0.01 * (double)i * (1 + i % 7)) * 0.5f;
    CHECK_EQ_INT(tk_mel_filterbank(c.sample_rate, c.n_fft, M, fb, &e), 0);
    tk_melfeat_batch bt = {B, Fmax, off, F, utt, NULL, NULL};
    CHECK_EQ_INT(tk_melfeat_logmel_ref(&c, &bt, a, fb, x, &e), 0);
    CHECK_EQ_INT(tk_specaug_ref(&s, &bt, M, x, &e), 0);
    const uint32_t epoch = 3;
    tk_melfeat_cfg c0 = c;
    tk_specaug_cfg s0 = s;
    c0.epoch = 0, s0.epoch = 0; // (the memory's epoch wins)
    tk_melfeat_batch bp = {B, Fp, off, F, utt, &Fmax, &epoch};
    CHECK_EQ_INT(tk_melfeat_logmel_ref(&c0, &bp, a, fb, xp, &e), 0);
    CHECK_EQ_INT(tk_specaug_ref(&s0, &bp, M, xp, &e), 0);
    int same = 1, zeros = 1, masked = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Fp; t++)
            for (int m = 0; m < M; m++) {
                const float v = xp[((size_t)b * Fp + t) * M + m];
                if (t < Fmax) same &= memcmp(&v, &x[((size_t)b * Fmax + t) * M + m], sizeof v) == 0;
                if (t >= F[b]) zeros &= v == 0.0f;
                else masked += v == 0.0f;
            }
    CHECK(same);
    CHECK(zeros);
    CHECK(masked > 0); // (the masks did zero something)
    // without the pointers, the padded call's masks spread over Fp frames: other features
    tk_melfeat_batch bq = {B, Fp, off, F, utt, NULL, NULL};
    CHECK_EQ_INT(tk_melfeat_logmel_ref(&c, &bq, a, fb, xp, &e), 0);
    CHECK_EQ_INT(tk_specaug_ref(&s, &bq, M, xp, &e), 0);
    int differ = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Fmax; t++)
            differ |= memcmp(&xp[((size_t)b * Fp + t) * M], &x[((size_t)b * Fmax + t) * M], (size_t)M * 4) != 0;
    CHECK(differ);
    const int bad = Fp + 1;
    bp.Fmask = &bad;
    CHECK_EQ_INT(tk_specaug_ref(&s0, &bp, M, xp, &e), TK_EINTERNAL);
    free(a), free(fb), free(x), free(xp);
}

// ---- splicing ----

// x[b, t, m] = 1000 t + m + 1: y[b, j, s 80 + m] = x[b, 3 j + s, m] while 3 j + s < F_b, else 0;
// Tout = ceil(Fmax / 3) frames.
TK_TEST(melfeat_splice_layout) {
    tk_err e = {0};
    const int M = 80, Fmax = 10, Tout = 4, F[2] = {10, 5};
    float *x = malloc(2 * Fmax * M * sizeof *x), *y = malloc(2 * Tout * 3 * M * sizeof *y);
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < Fmax; t++)
            for (int m = 0; m < M; m++) x[(b * Fmax + t) * M + m] = t < F[b] ? 1000.0f * t + m + 1 : 0.0f;
    tk_melfeat_batch bt = {2, Fmax, NULL, F, NULL, NULL, NULL};
    CHECK_EQ_INT(tk_melfeat_splice_ref(&bt, M, 3, 3, Tout, x, y, &e), 0);
    CHECK(y[0] == 1 && y[80] == 1001 && y[160] == 2001 && y[240] == 3001);              // b 0, j 0 and j 1
    CHECK(y[3 * 240 + 0] == 9001 && y[3 * 240 + 80] == 0 && y[3 * 240 + 239] == 0);     // b 0, j 3: frame 9 only
    CHECK(y[(Tout + 1) * 240 + 80] == 4001 && y[(Tout + 1) * 240 + 160] == 0);          // b 1, j 1: frame 4 then F
    for (int i = (Tout + 2) * 240; i < 2 * Tout * 240; i++) CHECK(y[i] == 0);           // b 1, j >= ceil(5 / 3)
    CHECK_EQ_INT(tk_melfeat_splice_ref(&bt, M, 3, 3, 3, x, y, &e), TK_EINTERNAL);      // Tout < ceil(10 / 3)
    free(x), free(y);
}

// ---- speed perturbation ----

// Rate 1: out = in (the window is 1 at 0 and the sinc 0 at the other integers). Rate r: ceil(L r)
// samples, and a slow sine sin(w i) becomes sin(w x_j), x_j = (j + 0.5) / r - 0.5, away from the
// ends (within 1e-3: the truncated sinc). The rates drawn lie in [0.85, 1.15) and spread over it.
TK_TEST(melfeat_resample) {
    tk_err e = {0};
    const int L = 2000;
    float *in = malloc(L * sizeof *in), *out = malloc(3000 * sizeof *out);
    tk_test_fill(in, L, 5, 2, -1, 1);
    int64_t io[2] = {0, L}, oo[2] = {0, L};
    double r1 = 1.0;
    CHECK_EQ_INT(tk_speed_resample_ref(1, io, oo, &r1, in, out, &e), 0);
    for (int i = 0; i < L; i++) CHECK_NEAR(out[i], in[i], 1e-6);
    const double rs[2] = {0.85, 1.15};
    for (int q = 0; q < 2; q++) {
        const double w = 0.05;
        for (int i = 0; i < L; i++) in[i] = (float)sin(w * i);
        oo[1] = tk_speed_len(L, rs[q]);
        CHECK_EQ_INT(oo[1], q ? 2300 : 1700);
        CHECK_EQ_INT(tk_speed_resample_ref(1, io, oo, &rs[q], in, out, &e), 0);
        for (int64_t j = 40; j < oo[1] - 40; j++) CHECK_NEAR(out[j], sin(w * ((j + 0.5) / rs[q] - 0.5)), 1e-3);
    }
    CHECK_EQ_INT(tk_speed_len(16001, 1.1), 17602);
    double lo = 2, hi = 0;
    for (uint32_t u = 0; u < 1000; u++) {
        double r = tk_speed_rate(1, 0, u, 0.85, 1.15);
        CHECK(r >= 0.85 && r < 1.15);
        lo = r < lo ? r : lo, hi = r > hi ? r : hi;
    }
    CHECK(lo < 0.86 && hi > 1.14);
    // The plan: offsets of ceil(L_b r_b) samples, the rates of the utterances' ids.
    const int64_t po[4] = {0, 1000, 1001, 17001};
    const uint32_t pu[3] = {4, 8, 15};
    double pr[3];
    int64_t pq[4];
    tk_speed_plan(3, po, pu, 6, 1, 0.85, 1.15, pr, pq);
    CHECK_EQ_INT(pq[0], 0);
    for (int b = 0; b < 3; b++) {
        CHECK(pr[b] == tk_speed_rate(6, 1, pu[b], 0.85, 1.15));
        CHECK_EQ_INT(pq[b + 1] - pq[b], (int64_t)ceil((po[b + 1] - po[b]) * pr[b]));
    }
    free(in), free(out);
}

// The dither noise: standard normal (mean near 0, variance near 1 over 20000 samples), a pure
// function of (seed, epoch, utterance, sample).
TK_TEST(melfeat_noise) {
    double s = 0, q = 0;
    for (int i = 0; i < 20000; i++) {
        const double n = tk_melfeat_noise(4, 2, 7, i);
        s += n, q += n * n;
    }
    CHECK(fabs(s / 20000) < 0.03 && fabs(q / 20000 - 1) < 0.05);
    CHECK(tk_melfeat_noise(4, 2, 7, 123) == tk_melfeat_noise(4, 2, 7, 123));
    CHECK(tk_melfeat_noise(4, 2, 7, 123) != tk_melfeat_noise(4, 3, 7, 123));
}

// ---- the oracle driver (see the top of the file) ----

static int drive(const char *mode, tk_err *e) {
    if (strcmp(mode, "dali") != 0 && strcmp(mode, "torch") != 0)
        return tk_err_set(e, TK_EUSAGE, "TK_MELFEAT_DRIVE must be dali or torch, not \"%s\"", mode);
    tk_melfeat_cfg c;
    tk_melfeat_default(&c);
    c.dither = 0;
    if (mode[0] == 't') c.window = TK_MELWIN_TORCH, c.norm_ddof = 1, c.norm_eps = 1e-5f;
    int B, F[64], Fmax = 1;
    int64_t off[65];
    uint32_t utt[64];
    float *a;
    int rc = tk_melfeat_read_stdin(&B, off, &a, e);
    for (int b = 0; b < B && !rc; b++) {
        utt[b] = (uint32_t)b;
        F[b] = (int)tk_melfeat_frames(off[b + 1] - off[b], c.hop), Fmax = F[b] > Fmax ? F[b] : Fmax;
    }
    float *fb = rc ? NULL : malloc((size_t)c.n_mels * (c.n_fft / 2 + 1) * sizeof *fb);
    float *x = rc ? NULL : malloc((size_t)B * Fmax * c.n_mels * sizeof *x);
    if (!rc && (!fb || !x)) rc = tk_err_errno(e, ENOMEM, "out of memory");
    if (!rc) rc = tk_mel_filterbank(c.sample_rate, c.n_fft, c.n_mels, fb, e);
    tk_melfeat_batch bt = {B, Fmax, off, F, utt, NULL, NULL};
    if (!rc) rc = tk_melfeat_logmel_ref(&c, &bt, a, fb, x, e);
    for (int b = 0; b < B && !rc; b++) {
        printf("utt %d %d\n", b, F[b]);
        for (int t = 0; t < F[b]; t++)
            for (int m = 0; m < c.n_mels; m++)
                printf("%.9g%c", x[((size_t)b * Fmax + t) * c.n_mels + m], m + 1 < c.n_mels ? ' ' : '\n');
    }
    free(a), free(fb), free(x);
    return rc;
}

__attribute__((constructor(200))) static void drive_mode(void) {
    const char *s = getenv("TK_MELFEAT_DRIVE");
    if (!s) return;
    tk_err e = {0};
    int rc = drive(s, &e);
    tk_drive_exit("test_melfeat", rc, &e);
}
