// Dispatch of kernels/interaction.h (kernels/dispatch.h): the cpu backend runs the reference
// (interaction_ref.c), the cuda backend the kernel (interaction.cu).
#include "dispatch.h"
#include "interaction.h"

int tk_interaction_fwd(tk_ctx *c, const float *bot, const float *emb, int B, int T, int D, int W,
                       float *out, tk_err *e) {
    return TK_DISPATCH(c, tk_interaction_fwd_ref(bot, emb, B, T, D, W, out, e),
                       tk_interaction_fwd_cuda(c, bot, emb, B, T, D, W, out, e));
}

int tk_interaction_bwd(tk_ctx *c, const float *bot, const float *emb, const float *dout, int B,
                       int T, int D, int W, int bot_relu, float *dbot, float *demb,
                       tk_err *e) {
    return TK_DISPATCH(
        c, tk_interaction_bwd_ref(bot, emb, dout, B, T, D, W, bot_relu, dbot, demb, e),
        tk_interaction_bwd_cuda(c, bot, emb, dout, B, T, D, W, bot_relu, dbot, demb, e));
}

int tk_interaction_fwd_act(tk_ctx *c, tk_dtype act, const void *bot, const void *emb, int B, int T, int G,
                           int D, int W, void *out, tk_err *e) {
    return TK_DISPATCH(c, tk_interaction_fwd_act_ref(act, bot, emb, B, T, G, D, W, out, e),
                       tk_interaction_fwd_act_cuda(c, act, bot, emb, B, T, G, D, W, out, e));
}

int tk_interaction_bwd_act(tk_ctx *c, tk_dtype act, const void *bot, const void *emb, const void *dout,
                           int B, int T, int G, int D, int W, int bot_relu, void *dbot, void *demb,
                           tk_err *e) {
    return TK_DISPATCH(
        c, tk_interaction_bwd_act_ref(act, bot, emb, dout, B, T, G, D, W, bot_relu, dbot, demb, e),
        tk_interaction_bwd_act_cuda(c, act, bot, emb, dout, B, T, G, D, W, bot_relu, dbot, demb, e));
}
