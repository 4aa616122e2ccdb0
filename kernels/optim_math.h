// The arithmetic of kernels/optim.h, written once for kernels/optim_ref.c (host C) and
// kernels/optim.cu (device): per-call constants, per-step scalars (fp64, rounded once) and the
// per-element updates (fp32). The element code rounds every operation separately: on the device
// through __fmul_rn & co. (nvcc would otherwise fuse a*b+c into one FMA), on the host through
// plain operators (trainkit builds C with -std=c11, where GCC does not contract). Both sides
// therefore give the same bits for the same scalars; the scalars differ between them only
// through the order of the fp64 norm sums.
#ifndef TK_KERNELS_OPTIM_MATH_H
#define TK_KERNELS_OPTIM_MATH_H

#include <math.h>
#include <stdint.h>

#include "lr_schedule.h" // TK_HOSTDEV, TK_DMUL, TK_DADD
#include "optim.h"

#ifdef __CUDA_ARCH__
#define TK_FMUL(a, b) __fmul_rn(a, b)
#define TK_FADD(a, b) __fadd_rn(a, b)
#define TK_FSUB(a, b) __fsub_rn(a, b)
#define TK_FDIV(a, b) __fdiv_rn(a, b)
#define TK_FSQRT(a) __fsqrt_rn(a)
#else
#define TK_FMUL(a, b) ((float)(a) * (float)(b))
#define TK_FADD(a, b) ((float)(a) + (float)(b))
#define TK_FSUB(a, b) ((float)(a) - (float)(b))
#define TK_FDIV(a, b) ((float)(a) / (float)(b))
#define TK_FSQRT(a) sqrtf(a)
#endif

// Per-call constants in fp32, from the fp64 hyperparameters.
typedef struct tk_opt_k {
    int kind, nesterov, momentum_on;
    float mu, omd, b1, omb1, b2, omb2, eps, wd;
} tk_opt_k;

static inline TK_HOSTDEV tk_opt_k tk_opt_consts(const tk_opt_hp *hp) {
    tk_opt_k k;
    k.kind = (int)hp->kind;
    k.nesterov = hp->nesterov;
    k.momentum_on = hp->momentum != 0;
    k.mu = (float)hp->momentum;
    k.omd = (float)(1 - hp->dampening);
    k.b1 = (float)hp->beta1;
    k.omb1 = (float)(1 - hp->beta1);
    k.b2 = (float)hp->beta2;
    k.omb2 = (float)(1 - hp->beta2);
    k.eps = (float)hp->eps;
    k.wd = (float)hp->weight_decay;
    return k;
}

// Per-step scalars: from *lr, *step and the gradient's global sum of squares.
typedef struct tk_opt_scal {
    int64_t t;       // updates including this one
    float lr;        // the schedule's rate
    float clip;      // gradient multiplier (1: none)
    float step_size; // Adam/AdamW: lr / bc1
    float bc2s;      // Adam/AdamW: sqrt(bc2)
    float bc1, bc2;  // LAMB
    float decay;     // AdamW: 1 - lr * wd
    int skip;        // leave everything untouched
    int first;       // t == 1 (torch's momentum buffer starts as the first d)
    int pad;
} tk_opt_scal;

// b^t by squaring, in fp64 multiplications only, so host and device agree to the bit (libm's and
// CUDA's pow may differ in the last place).
static inline TK_HOSTDEV double tk_opt_powi(double b, int64_t t) {
    double r = 1;
    for (; t > 0; t >>= 1) {
        if (t & 1) r = r * b;
        b = b * b;
    }
    return r;
}

// Whether the gradient norm is needed before the update (a pass over g).
static inline TK_HOSTDEV int tk_opt_needs_gnorm(const tk_opt_hp *hp) {
    return hp->max_grad_norm > 0 || hp->skip_nonfinite || hp->kind == TK_OPT_LARS;
}

// gsq: the fp64 sum of squares of the whole gradient (ignored when unused).
static inline TK_HOSTDEV tk_opt_scal tk_opt_scalars(const tk_opt_hp *hp, float lr, int64_t t, double gsq) {
    tk_opt_scal s;
    s.t = t;
    s.lr = lr;
    s.first = t == 1;
    s.pad = 0;
    double n = sqrt(gsq);
    int finite = n - n == 0; // false for NaN and Inf
    s.skip = hp->skip_nonfinite && !finite;
    s.clip = 1;
    if (hp->max_grad_norm > 0 && finite) {
        double c = hp->max_grad_norm / (n + 1e-6);
        if (c < 1) s.clip = (float)c;
    }
    double bc1 = 1, bc2 = 1;
    if (hp->bias_correction) bc1 = 1 - tk_opt_powi(hp->beta1, t), bc2 = 1 - tk_opt_powi(hp->beta2, t);
    s.step_size = (float)((double)lr / bc1);
    s.bc2s = (float)sqrt(bc2);
    s.bc1 = (float)bc1;
    s.bc2 = (float)bc2;
    s.decay = (float)TK_DADD(1.0, -TK_DMUL(lr, hp->weight_decay));
    return s;
}

// The segment's weight decay (0 under TK_SEG_NO_DECAY).
static inline TK_HOSTDEV float tk_opt_seg_wd(const tk_opt_k *k, int32_t flags) {
    return (flags & TK_SEG_NO_DECAY) ? 0.0f : k->wd;
}

// The segment's rate: LAMB lr * ||w|| / ||u|| (xsq = ||u||^2), LARS lr * trust (xsq = ||g||^2 of
// the raw gradient), lr for the others. wsq = ||w||^2. fp64, rounded once.
static inline TK_HOSTDEV float tk_opt_seg_rate(const tk_opt_hp *hp, const tk_opt_scal *s, int32_t flags, double wsq,
                                          double xsq) {
    if ((hp->kind != TK_OPT_LAMB && hp->kind != TK_OPT_LARS) || (flags & TK_SEG_NO_ADAPT)) return s->lr;
    double wn = sqrt(wsq), xn = sqrt(xsq), r = 1;
    if (hp->kind == TK_OPT_LAMB) {
        if (wn > 0 && xn > 0) r = wn / xn;
    } else {
        double wd = (flags & TK_SEG_NO_DECAY) ? 0.0 : hp->weight_decay;
        xn = xn * (double)s->clip;
        if (wn > 0 && xn > 0) r = hp->trust_coef * wn / TK_DADD(TK_DADD(xn, TK_DMUL(wd, wn)), hp->eps);
    }
    return (float)((double)s->lr * r);
}

// One element of SGD / momentum / Adam / AdamW / LARS (everything but LAMB): w, m, v updated in
// place (m, v unused where the kind has no state). rate: tk_opt_seg_rate; wd: tk_opt_seg_wd.
static inline TK_HOSTDEV void tk_opt_elem(const tk_opt_k *k, const tk_opt_scal *s, float rate, float wd, float *w,
                                     float graw, float *m, float *v) {
    float g = TK_FMUL(graw, s->clip), x = *w;
    switch (k->kind) {
    case TK_OPT_ADAM:
    case TK_OPT_ADAMW: {
        if (k->kind == TK_OPT_ADAM && wd != 0) g = TK_FADD(g, TK_FMUL(wd, x));
        if (k->kind == TK_OPT_ADAMW && wd != 0) x = TK_FMUL(x, s->decay);
        float mm = TK_FADD(TK_FMUL(k->b1, *m), TK_FMUL(k->omb1, g));
        float vv = TK_FADD(TK_FMUL(k->b2, *v), TK_FMUL(TK_FMUL(k->omb2, g), g));
        float den = TK_FADD(TK_FDIV(TK_FSQRT(vv), s->bc2s), k->eps);
        *m = mm, *v = vv;
        *w = TK_FSUB(x, TK_FMUL(s->step_size, TK_FDIV(mm, den)));
        return;
    }
    case TK_OPT_LARS: {
        if (wd != 0) g = TK_FADD(g, TK_FMUL(wd, x));
        float step = TK_FMUL(rate, g), b = TK_FADD(TK_FMUL(k->mu, *m), step);
        *m = b;
        *w = TK_FSUB(x, k->nesterov ? TK_FADD(TK_FMUL(k->mu, b), step) : b);
        return;
    }
    default: { // TK_OPT_SGD, TK_OPT_MOMENTUM
        if (wd != 0) g = TK_FADD(g, TK_FMUL(wd, x));
        if (k->momentum_on) {
            float b = s->first ? g : TK_FADD(TK_FMUL(k->mu, *m), TK_FMUL(k->omd, g));
            *m = b;
            g = k->nesterov ? TK_FADD(g, TK_FMUL(k->mu, b)) : b;
        }
        *w = TK_FSUB(x, TK_FMUL(rate, g));
        return;
    }
    }
}

// LAMB, first stage: the moments, and the update direction u (returned) that the second stage
// applies once the segment's norms are known. The second stage recomputes u from the updated
// m, v and the unchanged w with this same function's last line (tk_opt_lamb_u).
static inline TK_HOSTDEV float tk_opt_lamb_u(const tk_opt_k *k, const tk_opt_scal *s, float wd, float w, float m,
                                        float v) {
    float den = TK_FADD(TK_FSQRT(TK_FDIV(v, s->bc2)), k->eps);
    float u = TK_FDIV(TK_FDIV(m, s->bc1), den);
    return wd != 0 ? TK_FADD(u, TK_FMUL(wd, w)) : u;
}
static inline TK_HOSTDEV float tk_opt_lamb_moments(const tk_opt_k *k, const tk_opt_scal *s, float wd, float w,
                                              float graw, float *m, float *v) {
    float g = TK_FMUL(graw, s->clip);
    *m = TK_FADD(TK_FMUL(k->b1, *m), TK_FMUL(k->omb1, g));
    *v = TK_FADD(TK_FMUL(k->b2, *v), TK_FMUL(TK_FMUL(k->omb2, g), g));
    return tk_opt_lamb_u(k, s, wd, w, *m, *v);
}

// fp32 -> fp16 bits, round to nearest even (overflow to Inf, NaN stays NaN, subnormals kept).
static inline uint16_t tk_f32_to_f16(float f) {
    union { float f; uint32_t u; } x = {f};
    uint32_t sign = (x.u >> 16) & 0x8000u, a = x.u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); // >= 65520 rounds to Inf
    if (a < 0x38800000u) {                                   // below 2^-14: fp16 subnormal or 0
        float q = fabsf(f) * 16777216.0f;                    // in units of 2^-24, exact
        return (uint16_t)(sign | (uint32_t)nearbyintf(q));   // the default mode: ties to even
    }
    uint32_t r = a - 0x38000000u, q = r >> 13, rem = r & 0x1fffu; // rebias 127 -> 15
    q += rem > 0x1000u || (rem == 0x1000u && (q & 1));
    return (uint16_t)(sign | q);
}

#endif
