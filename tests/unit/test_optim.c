// The shared optimizer and the learning-rate schedules (kernels/optim_ref.c,
// kernels/lr_schedule_ref.c) on cases small enough to work out by hand: the inputs are small
// integers and the rates powers of two, so the expected values (in the comments) are exact.
#include <stdint.h>
#include <string.h>

#include "lr_schedule.h"
#include "optim.h"
#include "optim_math.h" // tk_f32_to_f16
#include "sgd.h"        // tk_f32_to_bf16
#include "tk_test.h"

// One update with the rate lr at update count *t (incremented first, as the schedule does).
static int step1(const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n, const tk_opt_seg *seg,
                 int nseg, float lr, int64_t *t, void *copy, tk_dtype ct, tk_err *e) {
    *t += 1;
    return tk_optim_step_ref(hp, w, g, state, n, seg, nseg, &lr, t, copy, ct, e);
}

TK_TEST(sgd_weight_decay_segments_gap_and_copy) {
    tk_opt_hp hp = {.kind = TK_OPT_SGD, .weight_decay = 0.25};
    // [0, 2) decays, [2, 4) does not, float 4 is in no segment (padding).
    tk_opt_seg seg[2] = {{0, 2, 0, 0}, {2, 2, TK_SEG_NO_DECAY, 0}};
    float w[5] = {1, 2, -4, 8, 3}, g[5] = {4, -8, 0.5f, 0, 100};
    uint16_t copy[5] = {0, 0, 0, 0, 0xdead};
    int64_t t = 0;
    tk_err e = {0};
    CHECK_EQ_INT(step1(&hp, w, g, NULL, 5, seg, 2, 0.5f, &t, copy, TK_BF16, &e), 0);
    // d = g + 0.25 w = 4.25, -7.5 then g alone: 0.5, 0; w -= 0.5 d.
    float want[5] = {-1.125f, 5.75f, -4.25f, 8, 3};
    for (int i = 0; i < 5; i++) CHECK(w[i] == want[i]);
    for (int i = 0; i < 4; i++) CHECK(tk_bf16_to_f32(copy[i]) == want[i]); // exact in bf16
    CHECK(copy[4] == 0xdead);
    CHECK_EQ_INT(t, 1);
}

TK_TEST(momentum_dampening_first_step_and_nesterov) {
    // torch.optim.SGD: the buffer starts as the first d, undamped.
    tk_opt_hp hp = {.kind = TK_OPT_MOMENTUM, .momentum = 0.5, .dampening = 0.5};
    tk_opt_seg seg = {0, 1, 0, 0};
    float w = 0, m = 12345, g[3] = {4, 8, -4};
    int64_t t = 0;
    tk_err e = {0};
    // b = 4 -> w = -4; b = 0.5*4 + 0.5*8 = 6 -> -10; b = 3 - 2 = 1 -> -11.
    float want[3] = {-4, -10, -11}, wantb[3] = {4, 6, 1};
    for (int s = 0; s < 3; s++) {
        CHECK_EQ_INT(step1(&hp, &w, &g[s], &m, 1, &seg, 1, 1.0f, &t, NULL, TK_BF16, &e), 0);
        CHECK(w == want[s] && m == wantb[s]);
    }
    hp.dampening = 0, hp.nesterov = 1, w = 0, t = 0;
    // b = 4, d = 4 + 2 = 6 -> w = -6; b = 2 + 8 = 10, d = 8 + 5 = 13 -> w = -19.
    CHECK_EQ_INT(step1(&hp, &w, &g[0], &m, 1, &seg, 1, 1.0f, &t, NULL, TK_BF16, &e), 0);
    CHECK(w == -6 && m == 4);
    CHECK_EQ_INT(step1(&hp, &w, &g[1], &m, 1, &seg, 1, 1.0f, &t, NULL, TK_BF16, &e), 0);
    CHECK(w == -19 && m == 10);
}

TK_TEST(adam_two_steps_exact) {
    tk_opt_hp hp = {.kind = TK_OPT_ADAM, .beta1 = 0.5, .beta2 = 0.75, .eps = 0, .bias_correction = 1};
    tk_opt_seg seg = {0, 2, 0, 0};
    float w[2] = {1, 1}, g[2] = {4, -2}, st[4] = {0, 0, 0, 0};
    int64_t t = 0;
    tk_err e = {0};
    // t=1: m = (2, -1), v = (4, 1), lr/bc1 = 0.25/0.5, sqrt(v)/sqrt(bc2) = (4, 2): w -= 0.5 * (0.5, -0.5).
    CHECK_EQ_INT(step1(&hp, w, g, st, 2, &seg, 1, 0.25f, &t, NULL, TK_BF16, &e), 0);
    CHECK(w[0] == 0.75f && w[1] == 1.25f);
    CHECK(st[0] == 2 && st[1] == -1 && st[2] == 4 && st[3] == 1);
    // t=2: m = (3, -1.5), v = (7, 1.75), bc1 = 0.75, bc2 = 7/16: sqrt(v)/sqrt(bc2) = (4, 2),
    // m / that = (0.75, -0.75), times lr/bc1 = 1/3: w -= (0.25, -0.25).
    CHECK_EQ_INT(step1(&hp, w, g, st, 2, &seg, 1, 0.25f, &t, NULL, TK_BF16, &e), 0);
    CHECK(w[0] == 0.5f && w[1] == 1.5f);
    CHECK(st[0] == 3 && st[1] == -1.5f && st[2] == 7 && st[3] == 1.75f);
    // Without bias correction, t=1: sqrt(v) = (2, 1): w -= 0.25 * (1, -1).
    hp.bias_correction = 0, t = 0;
    float w2[2] = {1, 1}, st2[4] = {0, 0, 0, 0};
    CHECK_EQ_INT(step1(&hp, w2, g, st2, 2, &seg, 1, 0.25f, &t, NULL, TK_BF16, &e), 0);
    CHECK(w2[0] == 0.75f && w2[1] == 1.25f);
}

TK_TEST(adam_l2_decay_and_adamw_decoupled_decay) {
    tk_opt_seg seg = {0, 1, 0, 0};
    tk_err e = {0};
    // Adam: d = 3 + 0.5 * 2 = 4, then as above: w = 2 - 0.25.
    tk_opt_hp hp = {.kind = TK_OPT_ADAM, .beta1 = 0.5, .beta2 = 0.75, .weight_decay = 0.5, .bias_correction = 1};
    float w = 2, g = 3, st[2] = {0, 0};
    int64_t t = 0;
    CHECK_EQ_INT(step1(&hp, &w, &g, st, 1, &seg, 1, 0.25f, &t, NULL, TK_BF16, &e), 0);
    CHECK(w == 1.75f && st[0] == 2);
    // AdamW: w *= 1 - 0.25 * 0.5, then the Adam step with g = 4: 1.75 - 0.25.
    hp.kind = TK_OPT_ADAMW, w = 2, g = 4, st[0] = st[1] = 0, t = 0;
    CHECK_EQ_INT(step1(&hp, &w, &g, st, 1, &seg, 1, 0.25f, &t, NULL, TK_BF16, &e), 0);
    CHECK(w == 1.5f && st[0] == 2 && st[1] == 4);
    // TK_SEG_NO_DECAY: no shrink.
    seg.flags = TK_SEG_NO_DECAY, w = 2, st[0] = st[1] = 0, t = 0;
    CHECK_EQ_INT(step1(&hp, &w, &g, st, 1, &seg, 1, 0.25f, &t, NULL, TK_BF16, &e), 0);
    CHECK(w == 1.75f);
}

// LAMB at t=1 with beta1 = 0.5, beta2 = 0.75, eps = 0: m / bc1 = g and sqrt(v / bc2) = |g|, so
// u = sign(g) + wd * w whatever the scale of g.
static const tk_opt_seg lamb_seg[3] = {{0, 2, 0, 0}, {2, 2, TK_SEG_NO_ADAPT | TK_SEG_NO_DECAY, 0}, {4, 2, 0, 0}};
static const float lamb_g[6] = {-2, 2, 2, -6, 1, 1};

TK_TEST(lamb_trust_ratio_exact) {
    tk_opt_hp hp = {.kind = TK_OPT_LAMB, .beta1 = 0.5, .beta2 = 0.75, .weight_decay = 0.25, .bias_correction = 1};
    float w[6] = {4, 0, 1, 1, 0, 0}, st[12] = {0};
    int64_t t = 0;
    tk_err e = {0};
    CHECK_EQ_INT(step1(&hp, w, lamb_g, st, 6, lamb_seg, 3, 0.5f, &t, NULL, TK_BF16, &e), 0);
    // [0,2): u = (-1, 1) + 0.25 (4, 0) = (0, 1), ||w|| = 4, ||u|| = 1: rate 0.5 * 4 -> (4, -2).
    // [2,4): no decay, no adaptation: u = (1, -1), rate 0.5 -> (0.5, 1.5).
    // [4,6): ||w|| = 0, so ratio 1: u = (1, 1) -> (-0.5, -0.5).
    float want[6] = {4, -2, 0.5f, 1.5f, -0.5f, -0.5f};
    for (int i = 0; i < 6; i++) CHECK(w[i] == want[i]);
    for (int i = 0; i < 6; i++) CHECK(st[i] == 0.5f * lamb_g[i] && st[6 + i] == 0.25f * lamb_g[i] * lamb_g[i]);
}

TK_TEST(lamb_clips_to_global_norm_before_the_moments) {
    tk_opt_hp hp = {.kind = TK_OPT_LAMB, .beta1 = 0.5, .beta2 = 0.75, .weight_decay = 0.25, .bias_correction = 1,
                    .max_grad_norm = 1};
    float w[6] = {4, 0, 1, 1, 0, 0}, st[12] = {0};
    int64_t t = 0;
    tk_err e = {0};
    CHECK_EQ_INT(step1(&hp, w, lamb_g, st, 6, lamb_seg, 3, 0.5f, &t, NULL, TK_BF16, &e), 0);
    // ||g|| = sqrt(4+4+4+36+1+1) = sqrt(50); the moments see g * 1 / (sqrt(50) + 1e-6); u, and
    // so the weights, do not depend on the scale of g at t=1.
    double c = 1 / (sqrt(50.0) + 1e-6);
    float want[6] = {4, -2, 0.5f, 1.5f, -0.5f, -0.5f};
    for (int i = 0; i < 6; i++) {
        CHECK(w[i] == want[i]);
        CHECK_NEAR(st[i], 0.5 * lamb_g[i] * c, 1e-7);
        CHECK_NEAR(st[6 + i], 0.25 * lamb_g[i] * lamb_g[i] * c * c, 1e-7);
    }
    // A bound above the norm leaves the gradient alone.
    hp.max_grad_norm = 7.5;
    memset(st, 0, sizeof st), t = 0;
    CHECK_EQ_INT(step1(&hp, w, lamb_g, st, 6, lamb_seg, 3, 0.5f, &t, NULL, TK_BF16, &e), 0);
    for (int i = 0; i < 6; i++) CHECK(st[i] == 0.5f * lamb_g[i]);
}

TK_TEST(lars_trust_ratio_exact) {
    tk_opt_hp hp = {.kind = TK_OPT_LARS, .momentum = 0.5, .weight_decay = 0.25, .trust_coef = 0.5};
    // [0,2) adapt + decay; [2,3) neither; [3,5) adapt, no decay; [5,6) adapt + decay with g = 0.
    tk_opt_seg seg[4] = {{0, 2, 0, 0}, {2, 1, TK_SEG_NO_ADAPT | TK_SEG_NO_DECAY, 0}, {3, 2, TK_SEG_NO_DECAY, 0},
                         {5, 1, 0, 0}};
    float w[6] = {3, 4, 1, 6, 8, 2}, g[6] = {0.75f, 1, 2, 1.5f, 2, 0}, m[6] = {0};
    int64_t t = 0;
    tk_err e = {0};
    CHECK_EQ_INT(step1(&hp, w, g, m, 6, seg, 4, 0.5f, &t, NULL, TK_BF16, &e), 0);
    // [0,2): trust = 0.5 * 5 / (1.25 + 0.25 * 5) = 1; d = g + w/4 = (1.5, 2); b = 0.5 d.
    // [2,3): rate 0.5, b = 1.   [3,5): trust = 0.5 * 10 / 2.5 = 2, rate 1, b = g.
    // [5,6): ||g|| = 0, trust 1: d = 0.5, b = 0.25.
    float wantb[6] = {0.75f, 1, 1, 1.5f, 2, 0.25f}, want[6] = {2.25f, 3, 0, 4.5f, 6, 1.75f};
    for (int i = 0; i < 6; i++) CHECK(m[i] == wantb[i] && w[i] == want[i]);
    // Nesterov, one segment: w -= 0.5 b + rate d with b = 0.5 * 0 + rate d.
    hp.nesterov = 1, t = 0;
    float w2[2] = {3, 4}, m2[2] = {0, 0};
    CHECK_EQ_INT(step1(&hp, w2, g, m2, 2, seg, 1, 0.5f, &t, NULL, TK_BF16, &e), 0);
    CHECK(w2[0] == 3 - 1.125f && w2[1] == 4 - 1.5f);
}

TK_TEST(clip_factor_any_kind) {
    tk_opt_hp hp = {.kind = TK_OPT_SGD, .max_grad_norm = 2.5};
    tk_opt_seg seg[2] = {{0, 1, 0, 0}, {1, 1, 0, 0}};
    float w[2] = {0, 0}, g[2] = {3, 4};
    int64_t t = 0;
    tk_err e = {0};
    CHECK_EQ_INT(step1(&hp, w, g, NULL, 2, seg, 2, 1.0f, &t, NULL, TK_BF16, &e), 0);
    double c = 2.5 / (5 + 1e-6); // the norm is over both segments
    CHECK_NEAR(w[0], -3 * c, 1e-7);
    CHECK_NEAR(w[1], -4 * c, 1e-7);
    hp.max_grad_norm = 5.5, w[0] = w[1] = 0;
    CHECK_EQ_INT(step1(&hp, w, g, NULL, 2, seg, 2, 1.0f, &t, NULL, TK_BF16, &e), 0);
    CHECK(w[0] == -3 && w[1] == -4);
}

TK_TEST(skip_nonfinite_leaves_everything_and_rewinds_the_count) {
    tk_opt_hp hp = {.kind = TK_OPT_ADAM, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .bias_correction = 1,
                    .skip_nonfinite = 1};
    tk_opt_seg seg = {0, 3, 0, 0};
    float bad[2] = {NAN, INFINITY};
    for (int k = 0; k < 2; k++) {
        float w[3] = {1, 2, 3}, g[3] = {1, bad[k], 1}, st[6] = {5, 5, 5, 5, 5, 5};
        uint16_t copy[3] = {7, 7, 7};
        int64_t t = 41;
        tk_err e = {0};
        CHECK_EQ_INT(step1(&hp, w, g, st, 3, &seg, 1, 0.5f, &t, copy, TK_BF16, &e), 0);
        CHECK(w[0] == 1 && w[1] == 2 && w[2] == 3 && copy[0] == 7 && copy[2] == 7);
        for (int i = 0; i < 6; i++) CHECK(st[i] == 5);
        CHECK_EQ_INT(t, 41); // incremented by the schedule, given back by the skip
    }
    // Without the flag a NaN flows into the weight it touches.
    hp.skip_nonfinite = 0;
    float w[3] = {1, 2, 3}, g[3] = {1, NAN, 1}, st[6] = {0};
    int64_t t = 0;
    tk_err e = {0};
    CHECK_EQ_INT(step1(&hp, w, g, st, 3, &seg, 1, 0.5f, &t, NULL, TK_BF16, &e), 0);
    CHECK(isnan(w[1]) && !isnan(w[0]) && t == 1);
}

TK_TEST(f16_and_bf16_copy_rounding) {
    CHECK(tk_f32_to_f16(1.0f) == 0x3c00 && tk_f32_to_f16(-2.0f) == 0xc000 && tk_f32_to_f16(-0.0f) == 0x8000);
    CHECK(tk_f32_to_f16(65504.0f) == 0x7bff);                       // largest finite
    CHECK(tk_f32_to_f16(65519.0f) == 0x7bff && tk_f32_to_f16(65520.0f) == 0x7c00); // halfway -> Inf
    CHECK(tk_f32_to_f16(1 + 1.0f / 2048) == 0x3c00);                // tie, even stays
    CHECK(tk_f32_to_f16(1 + 3.0f / 2048) == 0x3c02);                // tie, odd rounds up
    CHECK(tk_f32_to_f16(ldexpf(1, -14)) == 0x0400);                 // smallest normal
    CHECK(tk_f32_to_f16(ldexpf(1, -24)) == 0x0001);                 // smallest subnormal
    CHECK(tk_f32_to_f16(ldexpf(1, -25)) == 0x0000);                 // tie to even: 0
    CHECK(tk_f32_to_f16(ldexpf(3, -25)) == 0x0002);                 // 1.5 units: tie to 2
    CHECK(tk_f32_to_f16(ldexpf(1, -14) - ldexpf(1, -26)) == 0x0400); // rounds up into the normals
    uint16_t h = tk_f32_to_f16(NAN);
    CHECK((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0);
    CHECK(tk_f32_to_f16(INFINITY) == 0x7c00 && tk_f32_to_f16(1e10f) == 0x7c00);
    // Through the optimizer: SGD to 1 + 2^-11 and 1 + 3 * 2^-11 (f16 ties) and 1 + 2^-8 (bf16 tie).
    tk_opt_hp hp = {.kind = TK_OPT_SGD};
    tk_opt_seg seg = {0, 3, 0, 0};
    float w[3] = {1, 1, 1}, g[3] = {-1.0f / 2048, -3.0f / 2048, -1.0f / 256};
    uint16_t c16[3], cb[3];
    int64_t t = 0;
    tk_err e = {0};
    CHECK_EQ_INT(step1(&hp, w, g, NULL, 3, &seg, 1, 1.0f, &t, c16, TK_F16, &e), 0);
    CHECK(c16[0] == 0x3c00 && c16[1] == 0x3c02);
    float w2[3] = {1, 1, 1};
    CHECK_EQ_INT(step1(&hp, w2, g, NULL, 3, &seg, 1, 1.0f, &t, cb, TK_BF16, &e), 0);
    CHECK(cb[2] == 0x3f80 && cb[0] == 0x3f80);
    CHECK_EQ_INT(step1(&hp, w2, g, NULL, 3, &seg, 1, 1.0f, &t, cb, TK_F32, &e), TK_EINTERNAL);
}

TK_TEST(bad_arguments_are_internal_errors) {
    tk_opt_hp hp = {.kind = TK_OPT_SGD};
    float w[4] = {0}, g[4] = {0}, st[8] = {0};
    int64_t t = 0;
    tk_err e = {0};
    tk_opt_seg overlap[2] = {{0, 3, 0, 0}, {2, 2, 0, 0}};
    CHECK_EQ_INT(step1(&hp, w, g, NULL, 4, overlap, 2, 1, &t, NULL, TK_BF16, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "optim: segment 1 [2, +2) overlaps the previous one or leaves [0, 4)");
    tk_opt_seg out[1] = {{2, 3, 0, 0}};
    CHECK_EQ_INT(step1(&hp, w, g, NULL, 4, out, 1, 1, &t, NULL, TK_BF16, &e), TK_EINTERNAL);
    tk_opt_seg ok[1] = {{0, 4, 0, 0}};
    hp.momentum = 0.9; // momentum on TK_OPT_SGD: the kind says no state
    CHECK_EQ_INT(step1(&hp, w, g, NULL, 4, ok, 1, 1, &t, NULL, TK_BF16, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "optim: momentum 0.9 out of range");
    hp.kind = TK_OPT_MOMENTUM;
    CHECK_EQ_INT(step1(&hp, w, g, NULL, 4, ok, 1, 1, &t, NULL, TK_BF16, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "optim: momentum needs a state buffer");
    hp.dampening = 0.5, hp.nesterov = 1;
    CHECK_EQ_INT(step1(&hp, w, g, st, 4, ok, 1, 1, &t, NULL, TK_BF16, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "optim: nesterov needs momentum > 0 and dampening 0 (momentum)");
    tk_opt_hp adam = {.kind = TK_OPT_ADAM, .beta1 = 1};
    CHECK_EQ_INT(step1(&adam, w, g, st, 4, ok, 1, 1, &t, NULL, TK_BF16, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "optim: beta1 1 out of range");
    CHECK_EQ_INT(tk_optim_state_floats(TK_OPT_SGD), 0);
    CHECK_EQ_INT(tk_optim_state_floats(TK_OPT_LARS), 1);
    CHECK_EQ_INT(tk_optim_state_floats(TK_OPT_LAMB), 2);
    CHECK_STR(tk_opt_kind_name(TK_OPT_ADAMW), "adamw");
    CHECK_EQ_INT(tk_optim_ws_bytes(TK_BACKEND_CPU, 10, 1000), 0);
}

TK_TEST(schedule_warmup_poly_nvidia_bert) {
    tk_lr_sched s = {.kind = TK_LR_WARMUP_POLY, .base_lr = 1, .warmup_steps = 4, .total_steps = 10, .power = 1};
    // start 0: m = s, so the first update runs at 0; decay from t - 1 = s.
    CHECK(tk_lr_at(&s, 0) == 0);
    CHECK_NEAR(tk_lr_at(&s, 1), 1 / 4.000001, 1e-15);
    CHECK_NEAR(tk_lr_at(&s, 3), 3 / 4.000001, 1e-15);
    CHECK_NEAR(tk_lr_at(&s, 4), 0.6, 1e-15); // p = 4/10
    CHECK_NEAR(tk_lr_at(&s, 9), 0.1, 1e-15);
    CHECK(tk_lr_at(&s, 10) == 0 && tk_lr_at(&s, 50) == 0);
    // start -2: no offset, m = s + 1 + 2; decay at p = (s + 1) / 10.
    s.start_warmup = -2;
    CHECK_NEAR(tk_lr_at(&s, 0), 3 / 4.000001, 1e-15);
    CHECK_NEAR(tk_lr_at(&s, 1), 0.8, 1e-15);
    // power 2 with an end rate: (1.1 - 0.1) * 0.6^2 + 0.1.
    s.start_warmup = 0, s.power = 2, s.base_lr = 1.1, s.end_lr = 0.1;
    CHECK_NEAR(tk_lr_at(&s, 4), 0.46, 1e-15);
    // no warm-up: decay from the first update (p = 0).
    s.warmup_steps = 0;
    CHECK(tk_lr_at(&s, 0) == 1.1);
}

TK_TEST(schedule_lars_poly_mlperf_resnet) {
    tk_lr_sched s = {.kind = TK_LR_LARS_POLY, .base_lr = 2, .warmup_steps = 2, .total_steps = 6, .end_lr = 0.5,
                     .power = 2};
    // u = s + 1: warm-up u/2 * 2 while u <= 2, then 0.5 + 1.5 (1 - (u-2)/4)^2, flat past u = 6.
    CHECK(tk_lr_at(&s, 0) == 1 && tk_lr_at(&s, 1) == 2);
    CHECK(tk_lr_at(&s, 2) == 0.5 + 1.5 * 0.5625);
    CHECK(tk_lr_at(&s, 4) == 0.5 + 1.5 * 0.0625);
    CHECK(tk_lr_at(&s, 5) == 0.5 && tk_lr_at(&s, 99) == 0.5);
}

TK_TEST(schedule_step_and_cosine) {
    tk_lr_sched s = {.kind = TK_LR_STEP, .base_lr = 1, .warmup_steps = 2, .gamma = 0.5, .nmilestones = 2,
                     .milestones = {5, 8}};
    CHECK(tk_lr_at(&s, 0) == 0.5 && tk_lr_at(&s, 1) == 1 && tk_lr_at(&s, 4) == 1);
    CHECK(tk_lr_at(&s, 5) == 0.5 && tk_lr_at(&s, 7) == 0.5 && tk_lr_at(&s, 8) == 0.25 && tk_lr_at(&s, 1e6) == 0.25);
    tk_lr_sched c = {.kind = TK_LR_COSINE, .base_lr = 2, .total_steps = 4};
    CHECK(tk_lr_at(&c, 0) == 2);
    CHECK_NEAR(tk_lr_at(&c, 1), 1 + sqrt(0.5), 1e-15); // 1 + cos(pi/4)
    CHECK_NEAR(tk_lr_at(&c, 2), 1, 1e-15);
    CHECK(tk_lr_at(&c, 4) == 0 && tk_lr_at(&c, 9) == 0);
    c.warmup_steps = 2, c.total_steps = 6, c.end_lr = 0.5;
    CHECK(tk_lr_at(&c, 0) == 1 && tk_lr_at(&c, 1) == 2 && tk_lr_at(&c, 2) == 2);
    CHECK_NEAR(tk_lr_at(&c, 4), 1.25, 1e-15); // 0.5 + 1.5 * (1 + cos(pi/2)) / 2
    // The op rounds to f32 and advances the counter for every kind.
    int64_t step = 1;
    float lr;
    tk_err e = {0};
    CHECK_EQ_INT(tk_lr_schedule_ref(&c, &step, &lr, &e), 0);
    CHECK(step == 2 && lr == 2.0f);
}

// The warm-up from a rate in periods of updates (MLPerf 3D U-Net: per epoch from
// init_learning_rate): i + (base - i) k / W, k the updates at the end of the step's period, at most W.
// MLPerf RNN-T's lr_policy(policy='exponential'), worked by hand for 2 warm-up epochs and 1 hold
// epoch of 3 updates: the reference's update count r = s + 1 warms up to (r + 1) / 7 while r < 6,
// holds while r < 9, then gamma^(epoch - 3) with the 1-based epoch s / 3 + 1, floored at min_lr.
TK_TEST(schedule_warmup_hold_exp_mlperf_rnnt) {
    tk_lr_sched s = {.kind = TK_LR_WARMUP_HOLD_EXP, .base_lr = 1, .warmup_steps = 6, .hold_steps = 3,
                     .epoch_steps = 3, .gamma = 0.5, .min_lr = 0.1};
    CHECK(tk_lr_at(&s, 0) == 2.0 / 7 && tk_lr_at(&s, 4) == 6.0 / 7);
    CHECK(tk_lr_at(&s, 5) == 1 && tk_lr_at(&s, 7) == 1);
    CHECK(tk_lr_at(&s, 8) == 1); // r = 9 decays, in epoch 3: 0.5^0
    CHECK(tk_lr_at(&s, 9) == 0.5 && tk_lr_at(&s, 11) == 0.5 && tk_lr_at(&s, 12) == 0.25);
    CHECK(tk_lr_at(&s, 15) == 0.125 && tk_lr_at(&s, 18) == 0.1 && tk_lr_at(&s, 999) == 0.1);
    // no warm-up, no hold: the reference's gamma^epoch, so the first epoch already runs at gamma
    s.base_lr = 3, s.warmup_steps = 0, s.hold_steps = 0;
    CHECK(tk_lr_at(&s, 0) == 1.5 && tk_lr_at(&s, 2) == 1.5 && tk_lr_at(&s, 3) == 0.75);
}

TK_TEST(schedule_warmup_from_a_rate_per_period) {
    tk_lr_sched s = {.kind = TK_LR_STEP, .base_lr = 2, .warmup_steps = 6, .warmup_init_lr = 0.5, .warmup_period = 3,
                     .gamma = 0.5, .nmilestones = 1, .milestones = {9}};
    // epoch 1 (updates 0-2): 0.5 + 1.5 * 3/6; epoch 2: 0.5 + 1.5 * 6/6; then base_lr, halved at 9
    for (int st = 0; st < 3; st++) CHECK(tk_lr_at(&s, st) == 1.25);
    for (int st = 3; st < 6; st++) CHECK(tk_lr_at(&s, st) == 2);
    CHECK(tk_lr_at(&s, 6) == 2 && tk_lr_at(&s, 8) == 2 && tk_lr_at(&s, 9) == 1);
    // a warm-up that is not whole periods: its last period ends at the base rate, not above it
    s.warmup_steps = 5;
    CHECK(tk_lr_at(&s, 2) == 0.5 + 1.5 * 3 / 5.0 && tk_lr_at(&s, 3) == 2 && tk_lr_at(&s, 4) == 2);
    // period 1: the rate moves every update, from the initial rate
    s.warmup_period = 1, s.warmup_steps = 4;
    CHECK(tk_lr_at(&s, 0) == 0.875 && tk_lr_at(&s, 1) == 1.25 && tk_lr_at(&s, 3) == 2);
    // neither set: base_lr (s + 1) / W exactly, as before, for POLY and COSINE too
    tk_lr_sched p = {.kind = TK_LR_POLY, .base_lr = 0.3, .warmup_steps = 7};
    tk_lr_sched c = {.kind = TK_LR_COSINE, .base_lr = 0.7, .warmup_steps = 11, .total_steps = 20};
    for (int st = 0; st < 7; st++) CHECK(tk_lr_at(&p, st) == 0.3 * (double)(st + 1) / 7.0);
    for (int st = 0; st < 11; st++) CHECK(tk_lr_at(&c, st) == 0.7 * (double)(st + 1) / 11.0);
}
