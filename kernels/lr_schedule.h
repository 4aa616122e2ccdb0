// Learning-rate schedules computed ON THE DEVICE from a device step counter, so the whole
// iteration can be captured in one CUDA graph: the op reads s = *step (the number of updates
// already applied; the 0-based index of the coming update), writes that update's rate to ONE f32
// device scalar and sets *step = s + 1 (the optimizer then reads the count including its update).
// The rate is computed in double and rounded to f32 once. tk_lr_at is the host specification;
// the device evaluates the same inline function (tk_lr_formula), so both agree to the last bit
// apart from the libm functions pow and cos (CUDA's are within 2 ulp in double) and the rounding
// of those to f32 (almost always the same).
//
// Kinds (kind = 0 is today's DLRM schedule, so a zero-initialised struct keeps its meaning):
//
// TK_LR_POLY (MLPerf DLRM: the reference's LRPolicyScheduler with HugeCTR's
//   warmup/decay_start/decay_steps/decay_power):
//   s < warmup_steps (linear warm-up):         lr = base_lr * (s + 1) / warmup_steps
//   decay_start <= s < decay_start + decay_steps (polynomial decay):
//       lr = max(min_lr, base_lr * ((decay_steps - (s - decay_start)) / decay_steps)^power)
//   s >= decay_start + decay_steps:            lr = the last decay value (frozen, as the reference)
//   otherwise (between warm-up and decay):     lr = base_lr
//   warmup_steps = 0 disables warm-up; decay_steps = 0 disables decay.
//   (The reference's _LRScheduler quirk of holding base_lr*(W-1)/W between warm-up and decay is
//   not copied: HugeCTR, whose hyperparameters the config takes, holds base_lr.)
//
// TK_LR_WARMUP_POLY (MLPerf BERT: NVIDIA's LinearWarmupPolyDecayScheduler, schedulers.py of
//   training_results_v1.1/NVIDIA/benchmarks/bert/implementations/pytorch, which the MLPerf BERT
//   logs' start_warmup_step, opt_learning_rate_warmup_steps and opt_learning_rate_training_steps
//   describe). With t = s + 1 (NVIDIA computes it as optimizer._step + 1 before the step),
//   o = 1 if start_warmup == 0 else 0 (their offset_step), m = t - o - start_warmup:
//   m < warmup_steps:  lr = base_lr * m / (warmup_steps + 1e-6)
//   otherwise:         p = min((t - o) / total_steps, 1)
//                      lr = (base_lr - end_lr) * (1 - p)^power + end_lr
//   So with start_warmup = 0 the first update runs at rate 0 (as the TF reference, whose
//   global_step is 0 there), and a negative start_warmup (e.g. -76) starts the warm-up that many
//   updates early. start_warmup must be <= 0 (a positive one would give negative rates, in
//   NVIDIA's code as in the TF reference); the config parser refuses it.
//
// TK_LR_LARS_POLY (MLPerf ResNet-50 with LARS: NVIDIA MXNet's PolySchedule in
//   training_results_v1.1/NVIDIA/benchmarks/resnet/implementations/mxnet/common/fit.py, run on
//   MXNet's 1-based update count u = s + 1; warmup_steps = warmup epochs x steps per epoch,
//   total_steps = epochs x steps per epoch):
//   u <= warmup_steps:  lr = base_lr * u / warmup_steps
//   otherwise:          p = min((u - warmup_steps) / (total_steps - warmup_steps), 1)
//                       lr = end_lr + (base_lr - end_lr) * (1 - p)^power      (power 2, end 1e-4)
//   (The clamp of p at 1 is ours: MXNet's would rise again past total_steps. The TF reference,
//   lars_util.py, is the same curve one update later, on the 0-based s, with decay over
//   total_steps - warmup_steps + 1.)
//
// TK_LR_STEP (multi-step decay, torch.optim.lr_scheduler.MultiStepLR stepped once per update,
//   after a linear warm-up like TK_LR_POLY's):
//   s < warmup_steps:  lr = base_lr * (s + 1) / warmup_steps
//   otherwise:         lr = base_lr * gamma^k, k = number of milestones m with m <= s
//
// TK_LR_COSINE (cosine annealing, torch's CosineAnnealingLR closed form with T_max =
//   total_steps - warmup_steps and eta_min = end_lr, after a linear warm-up like TK_LR_POLY's):
//   s < warmup_steps:  lr = base_lr * (s + 1) / warmup_steps
//   otherwise:         p = min((s - warmup_steps) / (total_steps - warmup_steps), 1)
//                      lr = end_lr + (base_lr - end_lr) * (1 + cos(pi * p)) / 2
//
// TK_LR_WARMUP_HOLD_EXP (MLPerf RNN-T: lr_policy(policy='exponential') in the reference's
//   rnn_speech_recognition/pytorch/common/optimizers.py, as train.py calls it before each update
//   with its 1-based update count r = s + 1 and its 1-based epoch e = floor(s / epoch_steps) + 1;
//   warmup_steps = warmup epochs x epoch_steps, hold_steps = hold epochs x epoch_steps, both
//   whole epochs as the reference's integer arguments):
//   r < warmup_steps:                 a = (r + 1) / (warmup_steps + 1)
//   r < warmup_steps + hold_steps:    a = 1
//   otherwise:                        a = gamma^(e - (warmup_steps + hold_steps) / epoch_steps)
//   lr = max(base_lr * a, min_lr)
//   So the first update runs at 2 / (W + 1) of the peak, the last update of the hold's last epoch
//   already decays (a = gamma^0 = 1), and each later epoch multiplies the rate by gamma once.
//
// The linear warm-up of POLY, STEP and COSINE in general (tk_lr_linear_warmup), from a rate
// i = warmup_init_lr in periods of q = warmup_period updates (both 0 above: i = 0, q = 1):
//   k = min((floor(s / q) + 1) * q, warmup_steps)      (the updates at the end of s's period)
//   lr = i + (base_lr - i) * (k / warmup_steps)
// MLPerf 3D U-Net's reference warms up per epoch from init_learning_rate (runtime/training.py
// lr_warmup: init + (lr - init) * epoch / warmup_epochs, epoch 1-based, set before the epoch):
// q = the steps per epoch, warmup_steps = warmup epochs x q.
//
// Fields each kind reads: POLY: base_lr, warmup_steps, decay_start, decay_steps, power, min_lr.
// WARMUP_POLY: base_lr, warmup_steps, start_warmup, total_steps, end_lr, power.
// LARS_POLY: base_lr, warmup_steps, total_steps, end_lr, power. STEP: base_lr, warmup_steps,
// milestones, nmilestones, gamma. COSINE: base_lr, warmup_steps, total_steps, end_lr. POLY, STEP
// and COSINE also warmup_init_lr and warmup_period. WARMUP_HOLD_EXP: base_lr, warmup_steps,
// hold_steps, epoch_steps, gamma, min_lr.
// lib/engine/optim_config.c builds this struct from a config and checks the ranges
// (man/man5/trainkit-optimizer.5); the ops assume a checked struct.
#ifndef TK_KERNELS_LR_SCHEDULE_H
#define TK_KERNELS_LR_SCHEDULE_H

#include <math.h>

#include "gpu/gpu.h"

#ifdef __CUDACC__
#define TK_HOSTDEV __host__ __device__
#else
#define TK_HOSTDEV
#endif
// fp64 multiply and add rounded separately on the device too (nvcc would fuse a*b+c into one
// FMA, and the device's rate or scalar would then differ in the last bit from the host's).
#ifdef __CUDA_ARCH__
#define TK_DMUL(a, b) __dmul_rn(a, b)
#define TK_DADD(a, b) __dadd_rn(a, b)
#else
#define TK_DMUL(a, b) ((double)(a) * (double)(b))
#define TK_DADD(a, b) ((double)(a) + (double)(b))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TK_LR_POLY = 0,        // MLPerf DLRM (warm-up, hold, polynomial decay, frozen tail)
    TK_LR_WARMUP_POLY = 1, // MLPerf BERT (NVIDIA LinearWarmupPolyDecayScheduler)
    TK_LR_LARS_POLY = 2,   // MLPerf ResNet-50 LARS (poly power 2 after warm-up epochs)
    TK_LR_STEP = 3,        // multi-step decay by gamma at milestones
    TK_LR_COSINE = 4,      // cosine annealing to end_lr
    TK_LR_WARMUP_HOLD_EXP = 5, // MLPerf RNN-T (warm-up, hold, exponential decay per epoch)
} tk_lr_kind;

#define TK_LR_MAX_MILESTONES 16

typedef struct tk_lr_sched {
    double base_lr;
    int64_t warmup_steps;
    int64_t decay_start;   // POLY: 0-based update index where the decay starts
    int64_t decay_steps;   // POLY
    double power;          // POLY, WARMUP_POLY, LARS_POLY (2 for MLPerf DLRM and ResNet, 1 for BERT)
    double min_lr;         // POLY, WARMUP_HOLD_EXP: floor (0 = none)
    // The fields below were added for the other kinds; zero keeps TK_LR_POLY.
    tk_lr_kind kind;
    int64_t start_warmup;  // WARMUP_POLY: NVIDIA's start_warmup_step (<= 0)
    int64_t total_steps;   // WARMUP_POLY, LARS_POLY, COSINE
    double end_lr;         // WARMUP_POLY, LARS_POLY, COSINE
    double gamma;          // STEP, WARMUP_HOLD_EXP
    int nmilestones;       // STEP: milestones[0 .. nmilestones), 0-based update indices
    int64_t milestones[TK_LR_MAX_MILESTONES];
    // Added for the warm-up from a rate (zero: the warm-up from 0 at every update, as before).
    double warmup_init_lr;  // POLY, STEP, COSINE: the rate the linear warm-up starts from
    int64_t warmup_period;  // POLY, STEP, COSINE: updates that share a warm-up rate (0, 1: none)
    // Added for WARMUP_HOLD_EXP.
    int64_t hold_steps;     // updates at base_lr after the warm-up (whole epochs)
    int64_t epoch_steps;    // updates per epoch (> 0): the decay's exponent counts epochs
} tk_lr_sched;

// The linear warm-up of POLY, STEP and COSINE (above). From a rate or in periods, in the 3D U-Net
// reference's order of operations: scale = k / W first (= epoch / warmup epochs exactly: the same
// rational, rounded once), then i + (base_lr - i) scale.
static inline TK_HOSTDEV double tk_lr_linear_warmup(const tk_lr_sched *s, int64_t step) {
    if (s->warmup_init_lr == 0 && s->warmup_period <= 1)
        return s->base_lr * (double)(step + 1) / (double)s->warmup_steps;
    const int64_t q = s->warmup_period > 1 ? s->warmup_period : 1;
    int64_t k = (step / q + 1) * q;
    if (k > s->warmup_steps) k = s->warmup_steps;
    const double scale = (double)k / (double)s->warmup_steps;
    return TK_DADD(s->warmup_init_lr, TK_DMUL(s->base_lr - s->warmup_init_lr, scale));
}

// The rate of the update with 0-based index step, for every kind (see above).
static inline TK_HOSTDEV double tk_lr_formula(const tk_lr_sched *s, int64_t step) {
    switch (s->kind) {
    case TK_LR_WARMUP_POLY: {
        int64_t t = step + 1, o = s->start_warmup == 0, m = t - o - s->start_warmup;
        if (m < s->warmup_steps) return s->base_lr * ((double)m / ((double)s->warmup_steps + 1e-6));
        double p = (double)(t - o) / (double)s->total_steps;
        p = p < 1 ? p : 1;
        return TK_DADD(TK_DMUL(s->base_lr - s->end_lr, pow(1 - p, s->power)), s->end_lr);
    }
    case TK_LR_LARS_POLY: {
        int64_t u = step + 1;
        if (u <= s->warmup_steps) return s->base_lr * ((double)u / (double)s->warmup_steps);
        double p = (double)(u - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps);
        p = p < 1 ? p : 1;
        return TK_DADD(s->end_lr, TK_DMUL(s->base_lr - s->end_lr, pow(1 - p, s->power)));
    }
    case TK_LR_STEP: {
        if (step < s->warmup_steps) return tk_lr_linear_warmup(s, step);
        double lr = s->base_lr;
        for (int i = 0; i < s->nmilestones && i < TK_LR_MAX_MILESTONES; i++)
            if (s->milestones[i] <= step) lr *= s->gamma;
        return lr;
    }
    case TK_LR_COSINE: {
        if (step < s->warmup_steps) return tk_lr_linear_warmup(s, step);
        double p = (double)(step - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps);
        p = p < 1 ? p : 1;
        return TK_DADD(s->end_lr, TK_DMUL(s->base_lr - s->end_lr, 1 + cos(3.141592653589793 * p)) / 2);
    }
    case TK_LR_WARMUP_HOLD_EXP: {
        const int64_t r = step + 1, w = s->warmup_steps, h = s->hold_steps;
        double a = 1;
        if (r < w) a = (double)(r + 1) / (double)(w + 1);
        else if (r >= w + h) a = pow(s->gamma, (double)(step / s->epoch_steps + 1 - (w + h) / s->epoch_steps));
        const double lr = s->base_lr * a;
        return lr > s->min_lr ? lr : s->min_lr;
    }
    default: // TK_LR_POLY
        if (s->warmup_steps > 0 && step < s->warmup_steps) return tk_lr_linear_warmup(s, step);
        if (s->decay_steps > 0 && step >= s->decay_start) {
            int64_t k = step - s->decay_start;
            if (k >= s->decay_steps) k = s->decay_steps - 1; // frozen at the last decay value
            double lr = s->base_lr * pow((double)(s->decay_steps - k) / (double)s->decay_steps, s->power);
            return lr > s->min_lr ? lr : s->min_lr;
        }
        return s->base_lr;
    }
}

// The value for 0-based update index step (host function; the specification the ops follow).
double tk_lr_at(const tk_lr_sched *s, int64_t step);

// step (1) i64 device counter, read and incremented; lr (1) f32 device output.
int tk_lr_schedule(tk_ctx *c, const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e);
int tk_lr_schedule_ref(const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_lr_schedule_cuda(tk_ctx *c, const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
