// The SSD workload's layout on cuda (lib/workloads/ssd/workload.c): its network gathers the
// heads' outputs box-major, (N, D, 4) and (N, D, C), the loss's and the NMS's layout
// (ssd_config.box_major, kernels/ssd_head.h), and scatters the loss's gradients from it, where
// the step used to transpose with strided copies. The box-major network against the same network
// in the reference's layout (N, 4, D), (N, C, D), from the same weights and batch on the device
// (deterministic algorithms): its outputs the other's transposed and its dense gradients, from
// the transposed loss weights, the same bits (the gather and the scatter are copies), fp32 and
// bf16 (a width-8 network on 257x257, 5 classes, batch 2; and the reference's 81 classes).
// (tests/unit/test_ssd_model.c checks the same on the cpu and the layouts' element formulas;
// tests/gpu/test_ssd_model.c the CUDA gather and scatter against the cpu's, both layouts.)
#include "gpu_test.h"
#include "../unit/ssd_case.h"

static void layouts_case(int *tk_failed_, int bf16, int classes) {
    ssd_config cfg = ssd_config_default(2);
    cfg.width = 8, cfg.size = 257, cfg.classes = classes, cfg.bf16 = bf16;
    tk_err e = {0};
    size_t nout = 1, ngrad = 1;
    CHECK_EQ_INT(ssd_case_layouts(gt_ctx_, cfg, 11, 0x3c, &nout, &ngrad, &e), 0);
    if (e.code) printf("#   %s\n", e.what);
    printf("# ssd box-major vs the reference's layout, %s, %d classes: %zu outputs, %zu gradients differ\n",
           bf16 ? "bf16" : "fp32", classes, nout, ngrad);
    CHECK(nout == 0);
    CHECK(ngrad == 0);
}

TK_TEST(ssd_box_major_is_the_same_network) {
    const int saved = gt_ctx_->deterministic;
    gt_ctx_->deterministic = 1;
    layouts_case(tk_failed_, 0, 5);
    layouts_case(tk_failed_, 1, 5);
    layouts_case(tk_failed_, 1, 81);
    gt_ctx_->deterministic = saved;
}
