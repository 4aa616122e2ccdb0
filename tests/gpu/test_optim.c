// kernels/sgd.cu and kernels/lr_schedule.cu against their references: the fused SGD update with
// the bf16 compute copy bit for bit, and the device learning-rate schedule step by step through
// warm-up, hold, polynomial decay and the frozen tail.
#include "gpu_test.h"
#include "lr_schedule.h"
#include "sgd.h"

TK_TEST(sgd_update_exact) {
    const size_t n = 100003;
    float *w = gt_host(4 * n), *g = gt_host(4 * n), *wg = gt_host(4 * n), lr = 0.0371f;
    uint16_t *cr = gt_host(2 * n), *cg = gt_host(2 * n);
    gt_fill(w, n, -1, 1, 0), gt_fill(g, n, -10, 10, 0);
    float *dw = gt_dev(4 * n), *dg = gt_dev(4 * n), *dlr = gt_dev(4);
    void *dc = gt_dev(2 * n);
    gt_up(dw, w, 4 * n), gt_up(dg, g, 4 * n), gt_up(dlr, &lr, 4);
    gt_poison(dc, 2 * n, 0xff);
    tk_err e = {0};
    for (int r = 0; r < 3; r++) {
        if (tk_sgd_update_ref(w, g, n, &lr, cr, TK_BF16, &e)) gt_die_("sgd ref", &e);
        CHECK_EQ_INT(tk_sgd_update(gt_ctx_, dw, dg, n, dlr, dc, TK_BF16, &e), 0);
    }
    CHECK_EQ_INT(tk_sgd_update(gt_ctx_, dw, dg, 0, dlr, NULL, TK_BF16, &e), 0); // n = 0, no copy
    gt_down(wg, dw, 4 * n), gt_down(cg, dc, 2 * n);
    size_t dwn = gt_ndiff(wg, w, n), dcn = 0;
    for (size_t i = 0; i < n; i++) dcn += cg[i] != cr[i];
    printf("# table sgd n %zu x3 steps: master weights differing %zu, bf16 copy differing %zu\n", n, dwn, dcn);
    CHECK(dwn == 0 && dcn == 0);
    CHECK_EQ_INT(tk_sgd_update(gt_ctx_, dw, dg, n, dlr, dc, TK_F16, &e), TK_EINTERNAL);
    void *dev[] = {dw, dg, dlr, dc};
    for (int i = 0; i < 4; i++) tk_free(gt_ctx_, dev[i]);
    free(w), free(g), free(wg), free(cr), free(cg);
}

// n updates of schedule s on the device and by the reference: the most ulps between them (the
// device's counter must end at n).
static int64_t lr_compare(int *tk_failed_, const char *name, const tk_lr_sched *s, int n) {
    int64_t *dstep = gt_dev(8), hstep = 0, step0 = 0;
    float *dlr = gt_dev(4);
    gt_up(dstep, &step0, 8);
    tk_err e = {0};
    int64_t worst = 0;
    int exact = 0;
    for (int i = 0; i < n; i++) {
        float lr_ref, lr_dev;
        if (tk_lr_schedule_ref(s, &hstep, &lr_ref, &e)) gt_die_("lr ref", &e);
        CHECK_EQ_INT(tk_lr_schedule(gt_ctx_, s, dstep, dlr, &e), 0);
        gt_down(&lr_dev, dlr, 4);
        int64_t u = gt_ulps(lr_dev, lr_ref);
        worst = u > worst ? u : worst;
        exact += u == 0;
    }
    int64_t dev_step;
    gt_down(&dev_step, dstep, 8);
    printf("# table %s %d steps: exact %d, max ulps %lld\n", name, n, exact, (long long)worst);
    CHECK_EQ_INT(dev_step, n);
    tk_free(gt_ctx_, dstep), tk_free(gt_ctx_, dlr);
    return worst;
}

TK_TEST(lr_schedule_matches_reference) {
    tk_lr_sched s = {.base_lr = 24, .warmup_steps = 8, .decay_start = 20, .decay_steps = 16, .power = 2,
                     .min_lr = 0.05};
    CHECK(lr_compare(tk_failed_, "lr_schedule", &s, 48) <= 1);
}

// The 3D U-Net's warm-up: per epoch of 3 updates from 1e-4 over 4 epochs, then a step decay.
TK_TEST(lr_schedule_warmup_from_a_rate_per_epoch) {
    tk_lr_sched s = {.kind = TK_LR_STEP, .base_lr = 2, .warmup_steps = 12, .warmup_init_lr = 1e-4,
                     .warmup_period = 3, .gamma = 0.5, .nmilestones = 1, .milestones = {15}};
    CHECK(lr_compare(tk_failed_, "lr_schedule_warmup_per_epoch", &s, 24) == 0);
}

// MLPerf RNN-T's warm-up, hold and exponential decay per epoch (7 updates an epoch), down to the floor.
TK_TEST(lr_schedule_warmup_hold_exp) {
    tk_lr_sched s = {.kind = TK_LR_WARMUP_HOLD_EXP, .base_lr = 0.007, .warmup_steps = 14, .hold_steps = 21,
                     .epoch_steps = 7, .gamma = 0.939, .min_lr = 0.0049};
    CHECK(lr_compare(tk_failed_, "lr_schedule_warmup_hold_exp", &s, 100) <= 1);
}
