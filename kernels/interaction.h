// CHANGED 05:43 UTC: tk_interaction_bwd* take int bot_relu instead of const uint8_t *bot_mask.
// CHANGED: tk_interaction_{fwd,bwd}_act* take int G (tables a group of emb/demb) after T; G = T
// is the old (B, T, D) layout.
// DLRM dot interaction (MLPerf reference interact_features, arch_interaction_op="dot",
// arch_interaction_itself=False). The F = T+1 vectors v_0 = bottom-MLP output, v_1..v_T = the
// embeddings are dotted pairwise; the strictly lower triangle, in the reference's order
// (for i in 0..F-1: for j in 0..i-1: v_i . v_j), is appended to v_0:
//   out[b] = [ v_0 (D) | dots (F(F-1)/2) | zeros (W - D - F(F-1)/2) ]
// With D=128, T=26 that is 128 + 351 = 479 features (the MLPerf reference; W = 479). W may be
// larger so the top MLP input is padded for alignment (NVIDIA's HugeCTR pads to 480); the pad
// columns are written as zeros and their gradients are ignored.
#ifndef TK_KERNELS_INTERACTION_H
#define TK_KERNELS_INTERACTION_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

// Number of output features before padding: D + (T+1)T/2.
static inline int tk_interaction_width(int T, int D) { return D + (T + 1) * T / 2; }

// bot (B, D) f32; emb (B, T, D) f32; out (B, W) f32, W >= tk_interaction_width(T, D).
int tk_interaction_fwd(tk_ctx *c, const float *bot, const float *emb, int B, int T, int D, int W,
                       float *out, tk_err *e);
int tk_interaction_fwd_ref(const float *bot, const float *emb, int B, int T, int D, int W,
                           float *out, tk_err *e);

// dout (B, W) f32; bot, emb as in the forward; bot_relu: nonzero when bot is the output of a ReLU
// (the bottom MLP's last layer): dbot is then zeroed where bot <= 0, so dbot is the gradient of
// that layer's pre-activation (bot > 0 exactly where the RELU_BIAS mask is set; this avoids
// depending on the backend's aux layout). dbot (B, D) f32 and demb (B, T, D) f32 are overwritten.
int tk_interaction_bwd(tk_ctx *c, const float *bot, const float *emb, const float *dout, int B,
                       int T, int D, int W, int bot_relu, float *dbot, float *demb,
                       tk_err *e);
int tk_interaction_bwd_ref(const float *bot, const float *emb, const float *dout, int B, int T,
                           int D, int W, int bot_relu, float *dbot, float *demb,
                           tk_err *e);

// The same ops with the activations in act (TK_F32 or TK_BF16, the cuda backend's bf16 compute
// path): bot, emb, out, dout, dbot and demb are all in act (the bf16 path keeps the looked-up
// vectors and their gradient in bf16 too, halving their memory and all-to-all traffic); the math
// inside is the f32 ops' (fp64 sums of fp32 products, every bf16 input widened exactly), the
// result rounded to f32 and then to act on output. The references convert bf16 to f32, run the
// f32 reference and round the outputs (the specification of the bf16 variants).
//
// emb and demb are in the grouped layout with G tables a group (1 <= G <= T): the vector of
// (sample b, table t) starts at element ((t / G) * B + b) * G * D + (t % G) * D, i.e. the
// groups [g][B][G][D] one after the other. G = T is the plain (B, T, D). Several ranks
// (lib/workloads/dlrm.c) pass G = tm and the all-to-all buffer [source rank][b][tm][D] as it is;
// when T % G != 0 the last group has G slots a sample but only T % G tables: the slots of
// t >= T are never read (emb) nor written (demb). The vector loads need D % 4 == 0 and emb
// aligned to 4 elements (else a slower path with scalar loads is taken; results are the same).
int tk_interaction_fwd_act(tk_ctx *c, tk_dtype act, const void *bot, const void *emb, int B, int T, int G,
                           int D, int W, void *out, tk_err *e);
int tk_interaction_fwd_act_ref(tk_dtype act, const void *bot, const void *emb, int B, int T, int G, int D,
                               int W, void *out, tk_err *e);
int tk_interaction_bwd_act(tk_ctx *c, tk_dtype act, const void *bot, const void *emb, const void *dout,
                           int B, int T, int G, int D, int W, int bot_relu, void *dbot, void *demb,
                           tk_err *e);
int tk_interaction_bwd_act_ref(tk_dtype act, const void *bot, const void *emb, const void *dout, int B,
                               int T, int G, int D, int W, int bot_relu, void *dbot, void *demb,
                               tk_err *e);

// Elements of an emb / demb of B samples in the grouped layout (the unused slots included).
static inline size_t tk_interaction_emb_elems(int B, int T, int G, int D) {
    return (size_t)((T + G - 1) / G) * (size_t)B * (size_t)G * (size_t)D;
}

#ifdef TK_HAVE_CUDA
int tk_interaction_fwd_act_cuda(tk_ctx *c, tk_dtype act, const void *bot, const void *emb, int B, int T,
                                int G, int D, int W, void *out, tk_err *e);
int tk_interaction_bwd_act_cuda(tk_ctx *c, tk_dtype act, const void *bot, const void *emb,
                                const void *dout, int B, int T, int G, int D, int W, int bot_relu,
                                void *dbot, void *demb, tk_err *e);
int tk_interaction_fwd_cuda(tk_ctx *c, const float *bot, const float *emb, int B, int T, int D,
                            int W, float *out, tk_err *e);
int tk_interaction_bwd_cuda(tk_ctx *c, const float *bot, const float *emb, const float *dout,
                            int B, int T, int D, int W, int bot_relu, float *dbot,
                            float *demb, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
