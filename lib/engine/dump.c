// --dump-step (run.h).
#include <stdlib.h>

#include "engine/run.h"

// --dump-step: one step's weights, batch, loss and gradients for the workload's PyTorch peer.
int tk_run_dump_step(tk_run *r, tk_err *e) {
    if (!r->wl->dump_step) return tk_err_set(e, TK_EUSAGE, "--dump-step: workload %s has no step dump", r->wl->name);
    void *bufs[TK_BATCH_MAX_FIELDS] = {0}, *rd = NULL;
    int rc = 0;
    for (int f = 0; !rc && f < r->L.nfields; f++)
        if (!(bufs[f] = malloc(r->L.bytes[f] + 1))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = r->wl->reader_open(r->I.cfg, r->o->ri.rank, r->o->ri.world, r->o->train, r->o->ntrain, &rd, e);
    if (!rc) rc = r->wl->read_batch(rd, r->step, r->steps_per_epoch, bufs, e);
    for (int f = 0; !rc && f < r->L.nfields; f++)
        rc = tk_memcpy_h2d(r->c, r->inputs[f], bufs[f], r->L.bytes[f], TK_STREAM_COMPUTE, e);
    if (!rc) rc = r->wl->dump_step(r->I.model, r->o->dump, e);
    if (rd) r->wl->reader_close(rd);
    for (int f = 0; f < r->L.nfields; f++) free(bufs[f]);
    if (!rc)
        rc = tk_run_emit(r, json_pack("{s:s, s:s, s:I}", "type", "dump", "path", r->o->dump, "step", (json_int_t)r->step), e);
    return rc;
}
