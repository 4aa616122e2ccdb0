// CPU reference of kernels/stem_conv.h: conv.h's forward pass of the stem's 4x4 shape (conv_ref.c),
// and the shape test both backends share.
#include "conv.h"
#include "stem_conv.h"
#include "stem_s2d.h"

int tk_stem_conv_ok(tk_dtype t, int S, int K) { return t == TK_BF16 && (S == 224 || S == 300) && K == 64; }

int tk_stem_conv_fwd_ref(const void *xs, int N, int S, const void *ws, int K, tk_dtype t, void *y, tk_err *e) {
    tk_conv_shape s;
    const int hs = tk_s2d_side(S);
    TRY(tk_conv_shape_init(&s, N, hs, hs, TK_S2D_C, K, 4, 4, 1, 0, e));
    return tk_conv_ref(TK_CONV_FWD, &s, t, xs, ws, y, e);
}
