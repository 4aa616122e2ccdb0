// Dispatch of kernels/hybrid_plan.h (kernels/dispatch.h): the cpu backend runs the reference
// (hybrid_plan_ref.c), the cuda backend the kernel (hybrid_plan.cu).
#include "dispatch.h"
#include "hybrid_plan.h"

size_t tk_hybrid_plan_ws_bytes(tk_backend be, int B, int T, int W, int64_t nf) {
    // the reference's: fidx (B, T), the unsorted frequent uses (2, b T), the counting sort's counts (nf + 1)
    size_t ref = ((size_t)B * T + 2 * (size_t)(B / W) * T + (size_t)nf + 1) * 4;
    return TK_DISPATCH_SIZE(be, ref, tk_hybrid_plan_ws_bytes_cuda(B, T, W, nf));
}

int tk_hybrid_plan(tk_ctx *c, const tk_hybrid_plan_args *a, tk_err *e) {
    return TK_DISPATCH(c, tk_hybrid_plan_ref(a, e), tk_hybrid_plan_cuda(c, a, e));
}

int tk_hybrid_exchange_counts(tk_ctx *c, const tk_hybrid_plan_args *a, int64_t *mat, tk_err *e) {
    return TK_DISPATCH(c, tk_hybrid_exchange_counts_ref(a, mat, e), tk_hybrid_exchange_counts_cuda(c, a, mat, e));
}

int tk_hybrid_plan_fixed(tk_ctx *c, const tk_hybrid_plan_args *a, int64_t cap, int32_t pad_row, int32_t *send_pad,
                         int32_t *recv_src, tk_err *e) {
    return TK_DISPATCH(c, tk_hybrid_plan_fixed_ref(a, cap, pad_row, send_pad, recv_src, e),
                       tk_hybrid_plan_fixed_cuda(c, a, cap, pad_row, send_pad, recv_src, e));
}
