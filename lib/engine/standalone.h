// What a model needs from the engine when it runs without one (unit and GPU tests, tools): one
// rank, its own flat parameter buffers and the device scalars of tk_wl_env (lr, step, loss_acc),
// in one heap block whose address the model may keep (its create stores pointers into it).
#ifndef TK_ENGINE_STANDALONE_H
#define TK_ENGINE_STANDALONE_H

#include "engine/workload.h"

typedef struct tk_wl_own {
    tk_ctx *c;
    tk_params P;
    tk_dist dist;
    void *scalars; // lr (f32), step (i64), loss_acc (f64[2]), zeroed
    tk_arena acts; // the activations (tk_wl_env.acts)
} tk_wl_own;

// *own (malloc'ed) and *env pointing into it, on c.
int tk_wl_own_new(tk_ctx *c, tk_wl_own **own, tk_wl_env *env, tk_err *e);
void tk_wl_own_free(tk_wl_own *own); // NULL: nothing
#endif
