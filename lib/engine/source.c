// The loader's batch source over a workload's reader (source.h).
#include "engine/source.h"

#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    void *rd;
    tk_wl_source *a;
} src_rd;

// The loader threads' readers carry the epoch length (the workload's read_batch wants it).
static int src_open(void *arg, void **out, tk_err *e) {
    tk_wl_source *a = arg;
    src_rd *r = calloc(1, sizeof *r);
    if (!r) return tk_err_set(e, TK_EIO, "out of host memory");
    r->a = a;
    int rc = a->wl->reader_open(a->cfg, a->rank, a->world, a->paths, a->npaths, &r->rd, e);
    if (rc) {
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

static int src_read(void *rd, int64_t step, void *const *bufs, tk_err *e) {
    src_rd *r = rd;
    return r->a->wl->read_batch(r->rd, step, r->a->spe, bufs, e);
}

static void src_close(void *rd) {
    src_rd *r = rd;
    r->a->wl->reader_close(r->rd);
    free(r);
}

// Device batches where the workload's reader can write them (workload.h reader_device).
static unsigned src_on_device(void *rd) {
    src_rd *r = rd;
    const tk_workload *wl = r->a->wl;
    if (r->a->device < 0 || wl->version < TK_WORKLOAD_V2 || !wl->reader_device) return 0;
    return wl->reader_device(r->rd, r->a->device);
}

tk_batch_source tk_wl_source_make(tk_wl_source *a) {
    return (tk_batch_source){.open = src_open, .read = src_read, .close = src_close, .on_device = src_on_device,
                             .arg = a};
}

// (On an H100 box of 16 CPUs the 8 of before starved DLRM's hybrid step: 14 kept up.)
int tk_wl_source_default_threads(int local_world) {
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    long per = n / (local_world > 1 ? local_world : 1) - 2;
    return per < 2 ? 2 : per > 16 ? 16 : (int)per;
}
