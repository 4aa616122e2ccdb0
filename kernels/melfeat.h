// RNN-T's audio features (MLPerf rnn_speech_recognition/pytorch; issue 31 item 3): speed
// perturbation, dither, pre-emphasis, STFT power, mel filterbank, log, per-feature normalization,
// SpecAugment and frame splicing, on a batch of utterances of different lengths.
//
// Which reference behaviour is followed. MLPerf trains on the DALI pipeline of
// common/data/dali/pipeline.py (train.py: use_dali), then train_feat_proc (features.py
// SpecAugment, FrameSplicing, FillPadding) on the GPU; configs/baseline_v3-1023sp.yaml gives the
// parameters. Step by step, per utterance of L samples at 16 kHz:
//  1. speed perturbation (training only): DALI's AudioDecoder resamples to sample_rate r 16000
//     with r uniform in [0.85, 1.15) (ops.Uniform, one r per utterance), the result read as 16 kHz
//     audio: L' = ceil(L r) samples (DALI resampling.h resampled_length), sample j at input
//     position x_j = (j + 0.5) / r - 0.5, out_j = sum_i in_i w(i - x_j) over |i - x_j| <= 16 and
//     0 <= i < L, w(d) = sinc(d) (0.5 + 0.5 cos(pi d / 16)) (DALI Resampler: 16 lobes, Hann
//     envelope, the sinc at the input rate: no extra low-pass when r < 1). DALI reads w from a
//     2048-entry table with linear interpolation (about 1e-6 off); here w is computed exactly
//     (double on the cpu, fp32 sinf/cosf of the reduced argument on cuda). Not done here: the
//     config's trim_silence (DALI NonsilentRegion at -60 dB) belongs to the data preparation.
//  2. dither: x + 1e-5 n, n standard normal (Box-Muller), drawn per sample (below).
//  3. pre-emphasis: y_0 = x_0, y_i = x_i - 0.97 x_{i-1} (features.py; DALI's default border
//     clamps, y_0 = 0.03 x_0: one sample, no measurable difference), 0.97 as fp32 as in both
//     references (fp32 audio times 0.97; DALI's float coefficient), the rest in fp64.
//  4. STFT: F = 1 + floor(L / hop) frames (torch.stft center=True and DALI center_windows agree);
//     frame t covers samples t hop - win/2 .. t hop + win/2 - 1 (the win-sample window centered
//     in the n_fft frame, zeros around it: the power spectrum does not depend on where in the
//     frame the window sits), indices outside [0, L) reflected without repeating the edge
//     (torch's "reflect", DALI's reflect padding; folded again for utterances shorter than a
//     window). Window: TK_MELWIN_DALI, DALI's Hann 0.5 (1 - cos(2 pi (n + 0.5) / win)) (the
//     training pipeline's, the default), or TK_MELWIN_TORCH, torch.hann_window(win,
//     periodic=False) = 0.5 (1 - cos(2 pi n / (win - 1))) (features.py FilterbankFeatures).
//     Power |X_k|^2, k = 0 .. n_fft / 2.
//  5. mel: librosa.filters.mel(sr, n_fft, n_mels, fmin 0, fmax sr / 2) with its defaults htk
//     False (Slaney's scale: linear below 1 kHz at 200/3 Hz a mel, logarithmic above with step
//     ln(6.4) / 27) and norm "slaney" (each triangle times 2 / (f_{m+2} - f_m), equal areas); DALI
//     MelFilterBank(normalize=True, mel_formula "slaney" by default) describes the same filters
//     (unit integrals; not compared bit for bit). tk_mel_filterbank writes it (fp64, rounded to
//     fp32 as librosa returns it).
//  6. log: ln(max(e, 1e-20)) (DALI ToDecibels, multiplier ln 10, cutoff log(1e-20); features.py's
//     log(e + 1e-20) differs only for e near 1e-20).
//  7. normalization per feature over the utterance's F frames: (v - mean) / (std + norm_eps),
//     std = sqrt(sum (v - mean)^2 / (F - ddof)). DALI Normalize(axes=[1]) (the default: ddof 0,
//     eps 0; a zero std then divides by 1) or features.py normalize_batch (ddof 1, eps 1e-5; note
//     it averages over ceil(L / hop) frames, one fewer than F when hop divides L; here always F).
//  8. SpecAugment (features.py, training only), per utterance: 2 frequency masks, width w uniform
//     in 0..20, start uniform in 0 .. max(1, n_mels - w) - 1, bands [f0, f0 + w) zeroed; 10 time
//     masks, width uniform in 0 .. round(0.03 F) (Python's round: half to even), start uniform in
//     0 .. max(1, Tmax - w) - 1 with Tmax the batch's padded frame count (the reference's
//     x.shape[2], so a mask may fall in the padding), frames [t0, t0 + w) zeroed.
//  9. splicing (stack_subsample_frames with stacking 3, subsampling 3; then FillPadding): output
//     frame j of ceil(F / 3) holds input frames 3j, 3j + 1, 3j + 2 side by side (features
//     s M .. s M + M - 1 from frame 3j + s), frames at or past F read as zeros: 240 features.
//
// Randomness: Philox (lib/core/philox.h) keyed by the run's seed, counters (index, utterance,
// TK_RNG_AUGMENT | purpose << 8, epoch): purpose 1 the speed factor (index 0: r = lo + (hi - lo)
// u, u = tk_u32_to_unit of word 0), 2 the dither (index i / 2 for sample i: words 2 (i % 2) and
// 2 (i % 2) + 1 make the pair (u1, u2) of Box-Muller, n = sqrt(-2 ln(1 - u1)) cos(2 pi u2)), 3
// SpecAugment (index k for mask k, frequency masks first: w from word 0, the start from word 1,
// each an integer in [0, n) as (word n) >> 32). "utterance" is the caller's id of the utterance
// (its index in the data set), so the cpu reference and the cuda kernels draw the same numbers
// whatever the batch.
//
// Layout: the batch's audio is packed, utterance b's samples at off[b] .. off[b + 1] - 1 (fp32);
// features are padded, x (B, Fmax, n_mels) fp32, frame-major (the n_mels values of a frame
// adjacent), frames t >= F_b written 0. Spliced (B, Tout, stack n_mels), Tout >= ceil(Fmax / 3).
// Device memory on cuda for every array the op reads or writes; the host copies of the offsets
// and ids are the caller's (the lengths decide the shapes). The reference checks the lengths (>= 1
// sample, F_b <= Fmax: TK_EINTERNAL naming the utterance); the cuda kernels trust them. For the
// reference's time-mask distribution Fmax must be the batch's largest F (DALI pads to it); a
// larger Fmax (fixed shapes) spreads the time masks' starts over the extra padding.
// cuda: the frames are windowed into a workspace and transformed by cuFFT (real-to-complex,
// batched, fp32; one plan a device, made on first use and kept: make the first call outside a
// CUDA graph's capture) in chunks; power, mel and log a
// block a frame; the statistics in fp64 a warp a feature. The reference uses its own radix-2 FFT
// in fp64 (a complex FFT of n_fft / 2 on the even/odd samples, then the split into the real
// input's spectrum).
#ifndef TK_KERNELS_MELFEAT_H
#define TK_KERNELS_MELFEAT_H

#ifdef __cplusplus
extern "C" {
#endif
#include <math.h>

#include "core/philox.h"
#include "gpu/gpu.h"

enum { TK_MELWIN_DALI = 0, TK_MELWIN_TORCH = 1 };
enum { TK_MELFEAT_RNG_SPEED = 1, TK_MELFEAT_RNG_DITHER = 2, TK_MELFEAT_RNG_SPECAUG = 3 };
#define TK_MELFEAT_MAX_FFT 4096
#define TK_SPEED_LOBES 16

// The feature extraction's parameters; tk_melfeat_default: the MLPerf configuration (DALI's).
typedef struct tk_melfeat_cfg {
    int sample_rate, n_fft, win, hop, n_mels; // 16000, 512, 320, 160, 80
    int window;                               // TK_MELWIN_*
    float preemph, dither;                    // 0.97, 1e-5 (0: none)
    int norm_ddof;                            // 0 (DALI) or 1 (features.py)
    float norm_eps;                           // 0 (DALI) or 1e-5 (features.py)
    uint64_t seed;                            // the run's seed (dither)
    uint32_t epoch;
} tk_melfeat_cfg;

// SpecAugment's parameters (yaml spec_augment; min_freq and min_time 0).
typedef struct tk_specaug_cfg {
    int freq_masks, max_freq;   // 2, 20
    int time_masks;             // 10
    double max_time;            // 0.03: a fraction of the frames (>= 1: a count of frames)
    uint64_t seed;
    uint32_t epoch;
} tk_specaug_cfg;

// The batch: B utterances; off (B + 1) sample offsets (read by tk_melfeat_logmel), F (B) frame
// counts (tk_melfeat_frames of the lengths; read by tk_specaug and tk_melfeat_splice) and utt (B)
// ids in the backend's memory; Fmax the padded frame count of x (>= every utterance's F; the
// reference's Tmax for the time masks). For a call whose shapes are fixed ahead of the batch (a
// CUDA graph's step, Fmax a bound), two values may be read when the op runs instead, each one
// entry in the backend's memory (NULL: the host value): Fmask, the frame count the time masks'
// starts spread over (the batch's largest F, the reference's Tmax; Fmax when NULL), and epoch, the
// Philox key's epoch of the dither (tk_melfeat_logmel) and of the masks (tk_specaug), in place of
// the cfg's epoch.
typedef struct tk_melfeat_batch {
    int B, Fmax;
    const int64_t *off;
    const int *F;
    const uint32_t *utt;
    const int *Fmask;       // NULL: Fmax
    const uint32_t *epoch;  // NULL: the cfg's
} tk_melfeat_batch;

void tk_melfeat_default(tk_melfeat_cfg *c);
void tk_specaug_default(tk_specaug_cfg *s);
// The mel filterbank (n_mels, n_fft / 2 + 1) fp32 (host memory), computed in fp64 (step 5 above).
int tk_mel_filterbank(int sample_rate, int n_fft, int n_mels, float *fb, tk_err *e);

// Step 1: out (packed at out_off) from in (packed at in_off); rate (B) fp64 in the backend's memory.
int tk_speed_resample(tk_ctx *c, int B, const int64_t *in_off, const int64_t *out_off, const double *rate,
                      const float *in, float *out, tk_err *e);
// Steps 2 to 7: x (B, Fmax, n_mels) from the audio; fb (n_mels, n_fft / 2 + 1) in the backend's
// memory; ws: tk_melfeat_ws_bytes (the cuda side's frames and spectra; 0 on the cpu).
size_t tk_melfeat_ws_bytes(tk_backend b, const tk_melfeat_cfg *cfg, int B, int Fmax);
int tk_melfeat_logmel(tk_ctx *c, const tk_melfeat_cfg *cfg, const tk_melfeat_batch *bt, const float *audio,
                      const float *fb, float *x, void *ws, tk_err *e);
// Step 8 in place on x (B, Fmax, n_mels).
int tk_specaug(tk_ctx *c, const tk_specaug_cfg *s, const tk_melfeat_batch *bt, int n_mels, float *x, tk_err *e);
// Step 9: y (B, Tout, stack n_mels) from x (B, Fmax, n_mels); stack and sub >= 1.
int tk_melfeat_splice(tk_ctx *c, const tk_melfeat_batch *bt, int n_mels, int stack, int sub, int Tout,
                      const float *x, float *y, tk_err *e);

int tk_speed_resample_ref(int B, const int64_t *in_off, const int64_t *out_off, const double *rate, const float *in,
                          float *out, tk_err *e);
int tk_melfeat_logmel_ref(const tk_melfeat_cfg *cfg, const tk_melfeat_batch *bt, const float *audio, const float *fb,
                          float *x, tk_err *e);
int tk_specaug_ref(const tk_specaug_cfg *s, const tk_melfeat_batch *bt, int n_mels, float *x, tk_err *e);
int tk_melfeat_splice_ref(const tk_melfeat_batch *bt, int n_mels, int stack, int sub, int Tout, const float *x,
                          float *y, tk_err *e);
// The reference's FFT (exposed for the tests): the spectrum X (n / 2 + 1 complex, re im
// interleaved) of the real x (n, a power of 2 from 4 to TK_MELFEAT_MAX_FFT).
void tk_rfft_ref(int n, const double *x, double *X);
#ifdef TK_HAVE_CUDA
size_t tk_melfeat_ws_bytes_cuda(const tk_melfeat_cfg *cfg, int B, int Fmax);
int tk_speed_resample_cuda(tk_ctx *c, int B, const int64_t *in_off, const int64_t *out_off, const double *rate,
                           const float *in, float *out, tk_err *e);
int tk_melfeat_logmel_cuda(tk_ctx *c, const tk_melfeat_cfg *cfg, const tk_melfeat_batch *bt, const float *audio,
                           const float *fb, float *x, void *ws, tk_err *e);
int tk_specaug_cuda(tk_ctx *c, const tk_specaug_cfg *s, const tk_melfeat_batch *bt, int n_mels, float *x,
                    tk_err *e);
int tk_melfeat_splice_cuda(tk_ctx *c, const tk_melfeat_batch *bt, int n_mels, int stack, int sub, int Tout,
                           const float *x, float *y, tk_err *e);
#endif

#ifdef __CUDACC__
#define TK_MEL_HD __host__ __device__ __forceinline__
#else
#define TK_MEL_HD static inline
#endif

// Frames of an utterance of n samples.
TK_MEL_HD int64_t tk_melfeat_frames(int64_t n, int hop) { return n / hop + 1; }

// The Philox words of (purpose, index) for utterance utt.
TK_MEL_HD tk_philox_ctr tk_melfeat_draw(uint64_t seed, uint32_t epoch, uint32_t utt, uint32_t purpose,
                                        uint32_t index) {
    tk_philox_ctr c = {{index, utt, (uint32_t)TK_RNG_AUGMENT | purpose << 8, epoch}};
    tk_philox_key k = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    return tk_philox4x32(c, k);
}

// The speed factor r of utterance utt, uniform in [lo, hi).
TK_MEL_HD double tk_speed_rate(uint64_t seed, uint32_t epoch, uint32_t utt, double lo, double hi) {
    return lo + (hi - lo) * tk_u32_to_unit(tk_melfeat_draw(seed, epoch, utt, TK_MELFEAT_RNG_SPEED, 0).v[0]);
}

// Samples after resampling n samples by r: ceil(n r).
TK_MEL_HD int64_t tk_speed_len(int64_t n, double r) { return (int64_t)ceil((double)n * r); }

// Host helper for step 1: the rates (B) of the utterances utt (B) in [lo, hi) and the output's
// offsets out_off (B + 1) from the input's in_off (B + 1) (host arrays; copy them to the device
// for the cuda side).
static inline void tk_speed_plan(int B, const int64_t *in_off, const uint32_t *utt, uint64_t seed, uint32_t epoch,
                                 double lo, double hi, double *rate, int64_t *out_off) {
    out_off[0] = 0;
    for (int b = 0; b < B; b++) {
        rate[b] = tk_speed_rate(seed, epoch, utt[b], lo, hi);
        out_off[b + 1] = out_off[b] + tk_speed_len(in_off[b + 1] - in_off[b], rate[b]);
    }
}

// The dither's standard normal of sample i of utterance utt.
TK_MEL_HD double tk_melfeat_noise(uint64_t seed, uint32_t epoch, uint32_t utt, int64_t i) {
    tk_philox_ctr r = tk_melfeat_draw(seed, epoch, utt, TK_MELFEAT_RNG_DITHER, (uint32_t)(i >> 1));
    int h = (int)(i & 1) * 2;
    double u1 = 1.0 - tk_u32_to_unit(r.v[h]), u2 = tk_u32_to_unit(r.v[h + 1]);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// Mask k of SpecAugment for an utterance of F frames in a batch padded to Tmax frames, n_mels
// features: [*lo, *hi) along the features (k < freq_masks) or the frames. Python's round is
// half-to-even: rint in the default rounding mode.
TK_MEL_HD void tk_specaug_mask(const tk_specaug_cfg *s, uint32_t utt, int k, int F, int Tmax, int n_mels, int *lo,
                               int *hi) {
    tk_philox_ctr r = tk_melfeat_draw(s->seed, s->epoch, utt, TK_MELFEAT_RNG_SPECAUG, (uint32_t)k);
    int maxw = s->max_freq, extent = n_mels;
    if (k >= s->freq_masks) {
        maxw = s->max_time > 0 && s->max_time < 1.0 ? (int)rint((double)F * s->max_time) : (int)s->max_time;
        extent = Tmax;
    }
    int w = (int)(((uint64_t)r.v[0] * (uint64_t)(maxw + 1)) >> 32);
    int span = extent - w > 1 ? extent - w : 1;
    int start = (int)(((uint64_t)r.v[1] * (uint64_t)span) >> 32);
    *lo = start, *hi = start + w;
}

// The resampling window w(d) (step 1), fp64.
TK_MEL_HD double tk_speed_window(double d) {
    if (fabs(d) >= TK_SPEED_LOBES) return 0.0;
    double s = d == 0 ? 1.0 : sin(3.141592653589793 * d) / (3.141592653589793 * d);
    return s * (0.5 + 0.5 * cos(3.141592653589793 * d / TK_SPEED_LOBES));
}

// The analysis window's value n of win (step 4).
TK_MEL_HD double tk_melfeat_window(int kind, int n, int win) {
    const double tau = 6.283185307179586;
    if (kind == TK_MELWIN_TORCH) return win > 1 ? 0.5 * (1.0 - cos(tau * n / (win - 1))) : 1.0;
    return 0.5 * (1.0 - cos(tau * (n + 0.5) / win));
}

// Sample index i (possibly outside [0, n)) reflected into [0, n) without repeating the edges.
TK_MEL_HD int64_t tk_melfeat_reflect(int64_t i, int64_t n) {
    if (n == 1) return 0;
    int64_t p = 2 * (n - 1);
    i %= p;
    if (i < 0) i += p;
    return i < n ? i : p - i;
}
#undef TK_MEL_HD

// The checks both sides make.
static inline int tk_melfeat_check(const tk_melfeat_cfg *c, const tk_melfeat_batch *bt, tk_err *e) {
    int pow2 = c->n_fft >= 4 && c->n_fft <= TK_MELFEAT_MAX_FFT && (c->n_fft & (c->n_fft - 1)) == 0;
    if (!pow2 || c->win < 1 || c->win > c->n_fft || c->hop < 1 || c->n_mels < 1 || c->n_mels > 1024 ||
        c->sample_rate < 1 || (c->norm_ddof != 0 && c->norm_ddof != 1) ||
        (c->window != TK_MELWIN_DALI && c->window != TK_MELWIN_TORCH))
        return tk_err_set(e, TK_EINTERNAL, "melfeat: bad configuration (n_fft %d win %d hop %d n_mels %d)", c->n_fft,
                          c->win, c->hop, c->n_mels);
    if (!bt || bt->B < 1 || bt->Fmax < 1) return tk_err_set(e, TK_EINTERNAL, "melfeat: bad batch");
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
