// Dispatch of kernels/bert_embed.h (kernels/dispatch.h): the cpu backend runs the reference
// (bert_embed_ref.c), the cuda backend the kernel (bert_embed.cu).
#include "bert_embed.h"
#include "dispatch.h"

size_t tk_bert_embed_bwd_ws_bytes(tk_backend b, int B, int L, int H, int T) {
    (void)B, (void)L, (void)H, (void)T; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_bert_embed_bwd_ws_bytes_cuda(B, L, H, T));
}

int tk_bert_embed_fwd(tk_ctx *c, tk_dtype wt, tk_dtype act, int B, int L, int H, const int32_t *ids,
                      const uint8_t *seg, const void *word, const void *pos, const void *type, void *e_out, tk_err *e) {
    return TK_DISPATCH(c, tk_bert_embed_fwd_ref(wt, act, B, L, H, ids, seg, word, pos, type, e_out, e),
                       tk_bert_embed_fwd_cuda(c, wt, act, B, L, H, ids, seg, word, pos, type, e_out, e));
}

int tk_bert_embed_bwd(tk_ctx *c, tk_dtype act, int B, int L, int H, int T, int npos, const int32_t *ids,
                      const uint8_t *seg, const int32_t *len, const void *de, float *dword, float *dpos, float *dtype,
                      void *ws, tk_err *e) {
    return TK_DISPATCH(c, tk_bert_embed_bwd_ref(act, B, L, H, T, npos, ids, seg, len, de, dword, dpos, dtype, ws, e),
                       tk_bert_embed_bwd_cuda(c, act, B, L, H, T, npos, ids, seg, len, de, dword, dpos, dtype, ws, e));
}
