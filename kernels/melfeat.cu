// CUDA side of kernels/melfeat.h. logmel: the batch's padded frames (b, t) in chunks of kChunk:
// window (dither, pre-emphasis, reflection and the analysis window per frame sample, from the
// packed audio), cuFFT's batched real-to-complex transform, then a block a frame for power, mel
// (fp64 sums) and log into an fp64 workspace; then a block an utterance (a warp a feature) for
// the mean and std in fp64 (two passes, as the reference) and the normalized fp32 output. The cuFFT
// plan (n_fft, kChunk transforms) is made once per device and n_fft and kept (cuFFT allocates its
// own work area then); calls on it are serialized by a mutex (cufftSetStream + exec).
// resample: a thread an output sample, the window's sine from one sin (it alternates in sign from
// one input sample to the next). specaug: a block an utterance, its masks drawn by the first
// threads into shared memory. splice: a thread an output value.
#include <cufft.h>
#include <pthread.h>

#include "cuda_util.cuh"
#include "melfeat.h"

namespace {

constexpr int kT = 256, kChunk = 4096, kMaxMasks = 64, kPlans = 16;

size_t frames_bytes(int nf) { return tk_cu_align((size_t)kChunk * nf * sizeof(float)); }
size_t spec_bytes(int nf) { return tk_cu_align((size_t)kChunk * (nf / 2 + 1) * sizeof(cufftComplex)); }

struct plan_slot {
    int used, device, nf;
    cufftHandle h;
};
plan_slot g_plans[kPlans];
pthread_mutex_t g_plan_mu = PTHREAD_MUTEX_INITIALIZER;

// The plan of (device, nf), made on first use; called with g_plan_mu held.
int plan_get(int device, int nf, cufftHandle *h, tk_err *e) {
    for (int i = 0; i < kPlans; i++)
        if (g_plans[i].used && g_plans[i].device == device && g_plans[i].nf == nf) return *h = g_plans[i].h, 0;
    for (int i = 0; i < kPlans; i++)
        if (!g_plans[i].used) {
            int n[1] = {nf};
            cufftResult r = cufftPlanMany(&g_plans[i].h, 1, n, NULL, 1, nf, NULL, 1, nf / 2 + 1, CUFFT_R2C, kChunk);
            if (r != CUFFT_SUCCESS) {
                tk_err_set(e, TK_EDEVICE, "melfeat: cufftPlanMany (n_fft %d, %d transforms) failed", nf, kChunk);
                return tk_err_lib(e, "cufft", (int)r);
            }
            g_plans[i].used = 1, g_plans[i].device = device, g_plans[i].nf = nf;
            return *h = g_plans[i].h, 0;
        }
    return tk_err_set(e, TK_EDEVICE, "melfeat: more than %d cuFFT plans", kPlans);
}

// Sample i of utterance b after dither (x + dither n) and pre-emphasis.
__device__ __forceinline__ double emph(const float *a, int64_t i, const tk_melfeat_cfg &c, uint32_t utt) {
    double d = a[i];
    if (c.dither > 0) d += (double)c.dither * tk_melfeat_noise(c.seed, c.epoch, utt, i);
    if (i == 0) return d;
    double p = a[i - 1];
    if (c.dither > 0) p += (double)c.dither * tk_melfeat_noise(c.seed, c.epoch, utt, i - 1);
    return d - (double)c.preemph * p;
}

__global__ void __launch_bounds__(kT) window_frames(tk_melfeat_cfg c, int Fmax, int64_t g0, int64_t G,
                                                    const int64_t *off, const uint32_t *utt, const uint32_t *epoch,
                                                    const float *audio, float *frames) {
    if (epoch) c.epoch = *epoch;
    const int64_t g = g0 + blockIdx.x;
    float *fr = frames + (size_t)blockIdx.x * c.n_fft;
    const int pad = (c.n_fft - c.win) / 2;
    int b = (int)(g / Fmax), t = (int)(g % Fmax);
    const int64_t L = g < G ? off[b + 1] - off[b] : 0;
    const bool live = g < G && t < tk_melfeat_frames(L, c.hop);
    const int64_t lead = c.n_fft / 2 - pad; // the reference's: frame t starts at t hop - lead
    for (int n = threadIdx.x; n < c.n_fft; n += kT) {
        float v = 0.0f;
        const int k = n - pad;
        if (live && k >= 0 && k < c.win) {
            const int64_t i = tk_melfeat_reflect((int64_t)t * c.hop - lead + k, L);
            v = (float)(emph(audio + off[b], i, c, utt[b]) * tk_melfeat_window(c.window, k, c.win));
        }
        fr[n] = v;
    }
}

__global__ void __launch_bounds__(kT) power_mel(int nf, int M, int64_t g0, int64_t G,
                                                const cufftComplex *spec, const float *fb, double *v) {
    extern __shared__ double P[];
    const int nb = nf / 2 + 1;
    const int64_t g = g0 + blockIdx.x;
    if (g >= G) return;
    const cufftComplex *s = spec + (size_t)blockIdx.x * nb;
    for (int k = threadIdx.x; k < nb; k += kT) P[k] = (double)s[k].x * s[k].x + (double)s[k].y * s[k].y;
    __syncthreads();
    for (int m = threadIdx.x; m < M; m += kT) {
        double acc = 0;
        for (int k = 0; k < nb; k++) acc += (double)fb[(size_t)m * nb + k] * P[k];
        v[(size_t)g * M + m] = log(acc > 1e-20 ? acc : 1e-20);
    }
}

__device__ __forceinline__ double warp_sum(double s) {
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

__global__ void __launch_bounds__(kT) normalize(tk_melfeat_cfg c, int Fmax, const int64_t *off, const double *v,
                                                float *x) {
    const int b = blockIdx.x, M = c.n_mels, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int F = (int)tk_melfeat_frames(off[b + 1] - off[b], c.hop);
    const double *vb = v + (size_t)b * Fmax * M;
    float *xb = x + (size_t)b * Fmax * M;
    for (int m = warp; m < M; m += kT / 32) {
        double s = 0;
        for (int t = lane; t < F; t += 32) s += vb[(size_t)t * M + m];
        const double mean = warp_sum(s) / F;
        double q = 0;
        for (int t = lane; t < F; t += 32) {
            const double d = vb[(size_t)t * M + m] - mean;
            q += d * d;
        }
        q = warp_sum(q);
        const double dof = (double)(F - c.norm_ddof), sd = dof > 0 ? sqrt(q / dof) : 0.0;
        double den = sd + (double)c.norm_eps;
        if (den == 0) den = 1;
        for (int t = lane; t < Fmax; t += 32)
            xb[(size_t)t * M + m] = t < F ? (float)((vb[(size_t)t * M + m] - mean) / den) : 0.0f;
    }
}

__global__ void __launch_bounds__(kT) resample(const int64_t *in_off, const int64_t *out_off, const double *rate,
                                               const float *in, float *out) {
    const int b = blockIdx.y;
    const int64_t n = in_off[b + 1] - in_off[b], m = out_off[b + 1] - out_off[b];
    const float *x = in + in_off[b];
    const double r = rate[b], pi = 3.141592653589793;
    for (int64_t j = (int64_t)blockIdx.x * kT + threadIdx.x; j < m; j += (int64_t)gridDim.x * kT) {
        const double pos = ((double)j + 0.5) / r - 0.5;
        int64_t i0 = (int64_t)ceil(pos) - TK_SPEED_LOBES, i1 = (int64_t)floor(pos) + TK_SPEED_LOBES;
        if (i0 < 0) i0 = 0;
        if (i1 > n - 1) i1 = n - 1;
        double sn = sin(pi * ((double)i0 - pos)), s = 0;
        for (int64_t i = i0; i <= i1; i++, sn = -sn) {
            const double d = (double)i - pos;
            if (fabs(d) >= TK_SPEED_LOBES) continue;
            const double sinc = d == 0 ? 1.0 : sn / (pi * d);
            s += x[i] * sinc * (0.5 + 0.5 * cos(pi * d / TK_SPEED_LOBES));
        }
        out[out_off[b] + j] = (float)s;
    }
}

__global__ void __launch_bounds__(kT) specaug(tk_specaug_cfg s, int Fmax, int M, const int *F, const uint32_t *utt,
                                              const int *Fmask, const uint32_t *epoch, float *x) {
    __shared__ int lo[kMaxMasks], hi[kMaxMasks];
    const int b = blockIdx.x, K = s.freq_masks + s.time_masks, Fm = Fmask ? *Fmask : Fmax;
    if (epoch) s.epoch = *epoch;
    for (int k = threadIdx.x; k < K; k += kT) tk_specaug_mask(&s, utt[b], k, F[b], Fm, M, &lo[k], &hi[k]);
    __syncthreads();
    float *xb = x + (size_t)b * Fmax * M;
    for (int64_t i = threadIdx.x; i < (int64_t)Fmax * M; i += kT) {
        const int t = (int)(i / M), f = (int)(i % M);
        bool z = false;
        for (int k = 0; k < K && !z; k++) {
            const int p = k < s.freq_masks ? f : t;
            z = p >= lo[k] && p < hi[k];
        }
        if (z) xb[i] = 0.0f;
    }
}

__global__ void __launch_bounds__(kT) splice(int B, int Fmax, int M, int stack, int sub, int Tout, const int *F,
                                             const float *x, float *y) {
    const int64_t W = (int64_t)stack * M, n = (int64_t)B * Tout * W;
    for (int64_t i = (int64_t)blockIdx.x * kT + threadIdx.x; i < n; i += (int64_t)gridDim.x * kT) {
        const int64_t w = i % W, r = i / W;
        const int j = (int)(r % Tout), b = (int)(r / Tout), s = (int)(w / M), m = (int)(w % M);
        const int64_t t = (int64_t)j * sub + s;
        y[i] = t < F[b] ? x[((size_t)b * Fmax + t) * M + m] : 0.0f;
    }
}

} // namespace

size_t tk_melfeat_ws_bytes_cuda(const tk_melfeat_cfg *cfg, int B, int Fmax) {
    return frames_bytes(cfg->n_fft) + spec_bytes(cfg->n_fft) +
           tk_cu_align((size_t)B * Fmax * cfg->n_mels * sizeof(double));
}

int tk_melfeat_logmel_cuda(tk_ctx *c, const tk_melfeat_cfg *cfg, const tk_melfeat_batch *bt, const float *audio,
                           const float *fb, float *x, void *ws, tk_err *e) {
    int rc = tk_melfeat_check(cfg, bt, e);
    if (rc) return rc;
    if (!ws) return tk_err_set(e, TK_EINTERNAL, "melfeat: no workspace");
    const int nf = cfg->n_fft, nb = nf / 2 + 1, M = cfg->n_mels;
    float *frames = (float *)ws;
    cufftComplex *spec = (cufftComplex *)((char *)ws + frames_bytes(nf));
    double *v = (double *)((char *)ws + frames_bytes(nf) + spec_bytes(nf));
    cudaStream_t st = tk_cu_stream(c);
    const int64_t G = (int64_t)bt->B * bt->Fmax;
    pthread_mutex_lock(&g_plan_mu);
    cufftHandle h;
    rc = plan_get(c->device, nf, &h, e);
    if (!rc && cufftSetStream(h, st) != CUFFT_SUCCESS) rc = tk_err_set(e, TK_EDEVICE, "melfeat: cufftSetStream failed");
    for (int64_t g0 = 0; g0 < G && !rc; g0 += kChunk) {
        window_frames<<<kChunk, kT, 0, st>>>(*cfg, bt->Fmax, g0, G, bt->off, bt->utt, bt->epoch, audio, frames);
        cufftResult r = cufftExecR2C(h, frames, spec);
        if (r != CUFFT_SUCCESS) {
            tk_err_set(e, TK_EDEVICE, "melfeat: cufftExecR2C failed");
            rc = tk_err_lib(e, "cufft", (int)r);
            break;
        }
        const int nblk = (int)(G - g0 < kChunk ? G - g0 : kChunk);
        power_mel<<<nblk, kT, nb * sizeof(double), st>>>(nf, M, g0, G, spec, fb, v);
        rc = tk_cu_check(e, "melfeat");
    }
    pthread_mutex_unlock(&g_plan_mu);
    if (rc) return rc;
    normalize<<<bt->B, kT, 0, st>>>(*cfg, bt->Fmax, bt->off, v, x);
    return tk_cu_check(e, "melfeat");
}

int tk_speed_resample_cuda(tk_ctx *c, int B, const int64_t *in_off, const int64_t *out_off, const double *rate,
                           const float *in, float *out, tk_err *e) {
    if (B < 1) return tk_err_set(e, TK_EINTERNAL, "melfeat: resample of %d utterances", B);
    resample<<<dim3(256, B), kT, 0, tk_cu_stream(c)>>>(in_off, out_off, rate, in, out);
    return tk_cu_check(e, "melfeat resample");
}

int tk_specaug_cuda(tk_ctx *c, const tk_specaug_cfg *s, const tk_melfeat_batch *bt, int n_mels, float *x,
                    tk_err *e) {
    if (!bt || bt->B < 1 || bt->Fmax < 1 || n_mels < 1 || s->freq_masks < 0 || s->time_masks < 0 ||
        s->freq_masks + s->time_masks > kMaxMasks)
        return tk_err_set(e, TK_EINTERNAL, "specaug: bad arguments (at most %d masks)", kMaxMasks);
    specaug<<<bt->B, kT, 0, tk_cu_stream(c)>>>(*s, bt->Fmax, n_mels, bt->F, bt->utt, bt->Fmask, bt->epoch, x);
    return tk_cu_check(e, "specaug");
}

int tk_melfeat_splice_cuda(tk_ctx *c, const tk_melfeat_batch *bt, int n_mels, int stack, int sub, int Tout,
                           const float *x, float *y, tk_err *e) {
    if (!bt || bt->B < 1 || n_mels < 1 || stack < 1 || sub < 1 || Tout < (bt->Fmax + sub - 1) / sub)
        return tk_err_set(e, TK_EINTERNAL, "melfeat: bad splice (stack %d sub %d Tout %d)", stack, sub, Tout);
    const int64_t n = (int64_t)bt->B * Tout * stack * n_mels;
    splice<<<tk_cu_blocks(n, kT), kT, 0, tk_cu_stream(c)>>>(bt->B, bt->Fmax, n_mels, stack, sub, Tout, bt->F, x, y);
    return tk_cu_check(e, "melfeat splice");
}
