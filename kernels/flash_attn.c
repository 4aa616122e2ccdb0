// Dispatch of kernels/flash_attn.h (kernels/dispatch.h): the cpu backend runs the reference
// (flash_attn_ref.c), the cuda backend the kernels (flash_attn.cu).
#include "dispatch.h"
#include "flash_attn.h"

int tk_flash_attn_fwd(tk_ctx *c, tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start,
                      const int32_t *len, const void *qkv, const tk_dropout *drop, void *ctx, float *lse, tk_err *e) {
    return TK_DISPATCH(c, tk_flash_attn_fwd_ref(act, nseq, NH, D, Lstride, start, len, qkv, drop, ctx, lse, e),
                       tk_flash_attn_fwd_cuda(c, act, nseq, NH, D, Lstride, start, len, qkv, drop, ctx, lse, e));
}

int tk_flash_attn_bwd(tk_ctx *c, tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start,
                      const int32_t *len, const void *qkv, const void *ctx, const float *lse, const void *dctx,
                      const tk_dropout *drop, void *ws, void *dqkv, tk_err *e) {
    return TK_DISPATCH(
        c, tk_flash_attn_bwd_ref(act, nseq, NH, D, Lstride, start, len, qkv, ctx, lse, dctx, drop, ws, dqkv, e),
        tk_flash_attn_bwd_cuda(c, act, nseq, NH, D, Lstride, start, len, qkv, ctx, lse, dctx, drop, ws, dqkv, e));
}
