// A model's engine-side state without an engine (standalone.h).
#include "engine/standalone.h"

#include <stdlib.h>

int tk_wl_own_new(tk_ctx *c, tk_wl_own **out, tk_wl_env *env, tk_err *e) {
    *out = NULL;
    tk_wl_own *o = calloc(1, sizeof *o);
    if (!o) return tk_err_set(e, TK_EIO, "out of host memory");
    o->c = c;
    int rc = tk_dist_init(&o->dist, c, NULL, 0, e);
    if (!rc) rc = tk_malloc(c, &o->scalars, 64, e);
    if (!rc) rc = tk_memset0(c, o->scalars, 64, TK_STREAM_COMPUTE, e);
    if (rc) {
        tk_wl_own_free(o);
        return rc;
    }
    tk_params_init(&o->P, c, 0);
    *env = (tk_wl_env){.c = c, .dist = &o->dist, .params = &o->P, .lr = o->scalars,
                       .step = (int64_t *)((char *)o->scalars + 8), .loss_acc = (double *)((char *)o->scalars + 16), .acts = &o->acts};
    *out = o;
    return 0;
}

void tk_wl_own_free(tk_wl_own *o) {
    if (!o) return;
    if (o->P.c) tk_params_release(&o->P);
    if (o->dist.c) tk_dist_release(&o->dist);
    if (o->scalars) tk_free(o->c, o->scalars);
    if (o->acts.base) tk_arena_release(o->c, &o->acts);
    free(o);
}
