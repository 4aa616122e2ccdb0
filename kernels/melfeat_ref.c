// CPU reference of kernels/melfeat.h: the specification of RNN-T's features (fp64 inside, fp32 in
// and out) and the oracle of the cuda kernels.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "melfeat.h"

void tk_melfeat_default(tk_melfeat_cfg *c) {
    *c = (tk_melfeat_cfg){.sample_rate = 16000, .n_fft = 512, .win = 320, .hop = 160, .n_mels = 80,
                          .window = TK_MELWIN_DALI, .preemph = 0.97f, .dither = 1e-5f};
}

void tk_specaug_default(tk_specaug_cfg *s) {
    *s = (tk_specaug_cfg){.freq_masks = 2, .max_freq = 20, .time_masks = 10, .max_time = 0.03};
}

// Slaney's mel scale (librosa hz_to_mel / mel_to_hz with htk False).
#define MEL_F_SP (200.0 / 3.0)
#define MEL_MIN_LOG_HZ 1000.0
#define MEL_MIN_LOG_MEL (MEL_MIN_LOG_HZ / MEL_F_SP)
static double hz_to_mel(double f) {
    const double step = log(6.4) / 27.0;
    return f < MEL_MIN_LOG_HZ ? f / MEL_F_SP : MEL_MIN_LOG_MEL + log(f / MEL_MIN_LOG_HZ) / step;
}
static double mel_to_hz(double m) {
    const double step = log(6.4) / 27.0;
    return m < MEL_MIN_LOG_MEL ? m * MEL_F_SP : MEL_MIN_LOG_HZ * exp(step * (m - MEL_MIN_LOG_MEL));
}

int tk_mel_filterbank(int sample_rate, int n_fft, int n_mels, float *fb, tk_err *e) {
    if (sample_rate < 1 || n_fft < 2 || n_mels < 1 || n_mels > 1024)
        return tk_err_set(e, TK_EINTERNAL, "melfeat: bad filterbank (rate %d n_fft %d n_mels %d)", sample_rate, n_fft,
                          n_mels);
    const int nb = n_fft / 2 + 1;
    double *f = malloc((size_t)(n_mels + 2) * sizeof *f);
    if (!f) return tk_err_errno(e, ENOMEM, "out of memory");
    // n_mels + 2 points equally spaced in mel from 0 to sr / 2 (np.linspace: lo + i step).
    const double m0 = hz_to_mel(0.0), m1 = hz_to_mel(sample_rate / 2.0);
    for (int i = 0; i < n_mels + 2; i++) f[i] = mel_to_hz(m0 + (m1 - m0) * i / (n_mels + 1));
    for (int m = 0; m < n_mels; m++) {
        const double enorm = 2.0 / (f[m + 2] - f[m]);
        for (int k = 0; k < nb; k++) {
            const double fk = (double)k * sample_rate / n_fft; // np.linspace(0, sr / 2, nb)
            const double lower = (fk - f[m]) / (f[m + 1] - f[m]), upper = (f[m + 2] - fk) / (f[m + 2] - f[m + 1]);
            const double w = lower < upper ? lower : upper;
            fb[(size_t)m * nb + k] = (float)(w > 0 ? w * enorm : 0.0);
        }
    }
    free(f);
    return 0;
}

// ---- the FFT ----

// In-place radix-2 decimation-in-time complex FFT of n points (re im interleaved), forward sign.
static void cfft(int n, double *z) {
    for (int i = 1, j = 0; i < n; i++) { // bit reversal
        int bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j |= bit;
        if (i < j) {
            double t0 = z[2 * i], t1 = z[2 * i + 1];
            z[2 * i] = z[2 * j], z[2 * i + 1] = z[2 * j + 1];
            z[2 * j] = t0, z[2 * j + 1] = t1;
        }
    }
    for (int len = 2; len <= n; len <<= 1) {
        const double ang = -6.283185307179586 / len;
        for (int i = 0; i < n; i += len)
            for (int k = 0; k < len / 2; k++) {
                const double wr = cos(ang * k), wi = sin(ang * k);
                double *a = z + 2 * (i + k), *b = z + 2 * (i + k + len / 2);
                const double br = b[0] * wr - b[1] * wi, bi = b[0] * wi + b[1] * wr;
                b[0] = a[0] - br, b[1] = a[1] - bi;
                a[0] += br, a[1] += bi;
            }
    }
}

// The real input's spectrum from the complex FFT of h = n / 2 points z_j = x_{2j} + i x_{2j+1}:
// with Z = FFT(z), E_k = (Z_k + conj Z_{h-k}) / 2 (the even samples' spectrum), O_k = (Z_k -
// conj Z_{h-k}) / 2i (the odd samples'), X_k = E_k + exp(-2 pi i k / n) O_k for k = 0 .. h.
void tk_rfft_ref(int n, const double *x, double *X) {
    const int h = n / 2;
    double z[TK_MELFEAT_MAX_FFT];
    memcpy(z, x, (size_t)n * sizeof *z);
    cfft(h, z);
    for (int k = 0; k <= h; k++) {
        const int a = k % h, b = (h - k) % h;
        const double zr = z[2 * a], zi = z[2 * a + 1], cr = z[2 * b], ci = -z[2 * b + 1];
        const double er = 0.5 * (zr + cr), ei = 0.5 * (zi + ci);
        const double dr = 0.5 * (zr - cr), di = 0.5 * (zi - ci); // (Z - conj Z') / 2; O = that / i
        const double or_ = di, oi = -dr;
        const double ang = -6.283185307179586 * k / n, wr = cos(ang), wi = sin(ang);
        X[2 * k] = er + wr * or_ - wi * oi;
        X[2 * k + 1] = ei + wr * oi + wi * or_;
    }
}

// ---- the ops ----

int tk_speed_resample_ref(int B, const int64_t *in_off, const int64_t *out_off, const double *rate, const float *in,
                          float *out, tk_err *e) {
    for (int b = 0; b < B; b++) {
        const int64_t n = in_off[b + 1] - in_off[b], m = out_off[b + 1] - out_off[b];
        if (n < 1 || m < 0 || !(rate[b] > 0))
            return tk_err_set(e, TK_EINTERNAL, "melfeat: utterance %d: %lld samples, %lld out, rate %g", b,
                              (long long)n, (long long)m, rate[b]);
        const float *x = in + in_off[b];
        for (int64_t j = 0; j < m; j++) {
            const double pos = ((double)j + 0.5) / rate[b] - 0.5;
            int64_t i0 = (int64_t)ceil(pos) - TK_SPEED_LOBES, i1 = (int64_t)floor(pos) + TK_SPEED_LOBES;
            if (i0 < 0) i0 = 0;
            if (i1 > n - 1) i1 = n - 1;
            double s = 0;
            for (int64_t i = i0; i <= i1; i++) s += x[i] * tk_speed_window((double)i - pos);
            out[out_off[b] + j] = (float)s;
        }
    }
    return 0;
}

int tk_melfeat_logmel_ref(const tk_melfeat_cfg *cfg, const tk_melfeat_batch *bt, const float *audio, const float *fb,
                          float *x, tk_err *e) {
    int rc = tk_melfeat_check(cfg, bt, e);
    if (rc) return rc;
    const int nf = cfg->n_fft, nb = nf / 2 + 1, M = cfg->n_mels, lead = nf / 2 - (nf - cfg->win) / 2;
    double frame[TK_MELFEAT_MAX_FFT], spec[TK_MELFEAT_MAX_FFT + 2], *win = malloc((size_t)cfg->win * sizeof *win);
    if (!win) return tk_err_errno(e, ENOMEM, "out of memory");
    for (int n = 0; n < cfg->win; n++) win[n] = tk_melfeat_window(cfg->window, n, cfg->win);
    memset(x, 0, (size_t)bt->B * bt->Fmax * M * sizeof *x);
    const uint32_t epoch = bt->epoch ? *bt->epoch : cfg->epoch;
    double *y = NULL, *v = NULL;
    for (int b = 0; b < bt->B && !rc; b++) {
        const int64_t L = bt->off[b + 1] - bt->off[b], F = L > 0 ? tk_melfeat_frames(L, cfg->hop) : 0;
        if (L < 1 || F > bt->Fmax) {
            rc = tk_err_set(e, TK_EINTERNAL, "melfeat: utterance %d: %lld samples, %lld frames (Fmax %d)", b,
                            (long long)L, (long long)F, bt->Fmax);
            break;
        }
        free(y), free(v);
        y = malloc((size_t)L * sizeof *y), v = malloc((size_t)F * M * sizeof *v);
        if (!y || !v) {
            rc = tk_err_errno(e, ENOMEM, "out of memory");
            break;
        }
        const float *a = audio + bt->off[b];
        // Dither then pre-emphasis (y_i from the dithered x_i and x_{i-1}).
        double prev = 0;
        for (int64_t i = 0; i < L; i++) {
            double d = a[i];
            if (cfg->dither > 0) d += (double)cfg->dither * tk_melfeat_noise(cfg->seed, epoch, bt->utt[b], i);
            y[i] = i == 0 ? d : d - (double)cfg->preemph * prev;
            prev = d;
        }
        for (int64_t t = 0; t < F; t++) {
            memset(frame, 0, (size_t)nf * sizeof *frame);
            const int64_t s0 = t * cfg->hop - lead; // the window's first sample
            for (int n = 0; n < cfg->win; n++)
                frame[(nf - cfg->win) / 2 + n] = y[tk_melfeat_reflect(s0 + n, L)] * win[n];
            tk_rfft_ref(nf, frame, spec);
            for (int k = 0; k < nb; k++) spec[k] = spec[2 * k] * spec[2 * k] + spec[2 * k + 1] * spec[2 * k + 1];
            for (int m = 0; m < M; m++) {
                double s = 0;
                for (int k = 0; k < nb; k++) s += (double)fb[(size_t)m * nb + k] * spec[k];
                v[t * M + m] = log(s > 1e-20 ? s : 1e-20);
            }
        }
        for (int m = 0; m < M; m++) {
            double mean = 0, var = 0;
            for (int64_t t = 0; t < F; t++) mean += v[t * M + m];
            mean /= (double)F;
            for (int64_t t = 0; t < F; t++) var += (v[t * M + m] - mean) * (v[t * M + m] - mean);
            const double dof = (double)(F - cfg->norm_ddof);
            double sd = dof > 0 ? sqrt(var / dof) : 0.0;
            double den = sd + (double)cfg->norm_eps;
            if (den == 0) den = 1;
            for (int64_t t = 0; t < F; t++)
                x[((size_t)b * bt->Fmax + t) * M + m] = (float)((v[t * M + m] - mean) / den);
        }
    }
    free(y), free(v), free(win);
    return rc;
}

static int frames_check(const tk_melfeat_batch *bt, int b, tk_err *e) {
    if (bt->F[b] < 1 || bt->F[b] > bt->Fmax)
        return tk_err_set(e, TK_EINTERNAL, "melfeat: utterance %d: %d frames (Fmax %d)", b, bt->F[b], bt->Fmax);
    return 0;
}

int tk_specaug_ref(const tk_specaug_cfg *s, const tk_melfeat_batch *bt, int n_mels, float *x, tk_err *e) {
    if (!bt || bt->B < 1 || bt->Fmax < 1 || n_mels < 1 || s->freq_masks < 0 || s->time_masks < 0 ||
        s->max_freq < 0 || s->max_time < 0)
        return tk_err_set(e, TK_EINTERNAL, "specaug: bad arguments");
    const int Fmask = bt->Fmask ? *bt->Fmask : bt->Fmax;
    if (Fmask < 1 || Fmask > bt->Fmax)
        return tk_err_set(e, TK_EINTERNAL, "specaug: masks over %d frames (1 .. Fmax %d)", Fmask, bt->Fmax);
    tk_specaug_cfg sc = *s;
    if (bt->epoch) sc.epoch = *bt->epoch;
    for (int b = 0; b < bt->B; b++) {
        int rc = frames_check(bt, b, e);
        if (rc) return rc;
        float *xb = x + (size_t)b * bt->Fmax * n_mels;
        for (int k = 0; k < s->freq_masks + s->time_masks; k++) {
            int lo, hi;
            tk_specaug_mask(&sc, bt->utt[b], k, bt->F[b], Fmask, n_mels, &lo, &hi);
            if (k < s->freq_masks) {
                for (int t = 0; t < bt->Fmax; t++)
                    for (int m = lo; m < hi && m < n_mels; m++) xb[(size_t)t * n_mels + m] = 0;
            } else {
                for (int t = lo; t < hi && t < bt->Fmax; t++) memset(xb + (size_t)t * n_mels, 0, n_mels * sizeof *xb);
            }
        }
    }
    return 0;
}

int tk_melfeat_splice_ref(const tk_melfeat_batch *bt, int n_mels, int stack, int sub, int Tout, const float *x,
                          float *y, tk_err *e) {
    if (!bt || bt->B < 1 || n_mels < 1 || stack < 1 || sub < 1 || Tout < (bt->Fmax + sub - 1) / sub)
        return tk_err_set(e, TK_EINTERNAL, "melfeat: bad splice (stack %d sub %d Tout %d Fmax %d)", stack, sub, Tout,
                          bt ? bt->Fmax : 0);
    const size_t W = (size_t)stack * n_mels;
    for (int b = 0; b < bt->B; b++) {
        int rc = frames_check(bt, b, e);
        if (rc) return rc;
        for (int j = 0; j < Tout; j++)
            for (int s = 0; s < stack; s++) {
                const int64_t t = (int64_t)j * sub + s;
                float *o = y + ((size_t)b * Tout + j) * W + (size_t)s * n_mels;
                if (t < bt->F[b])
                    memcpy(o, x + ((size_t)b * bt->Fmax + t) * n_mels, n_mels * sizeof *o);
                else
                    memset(o, 0, n_mels * sizeof *o);
            }
    }
    return 0;
}
