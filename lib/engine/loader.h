// The engine's input path, the same for every workload: loader threads decode batches ahead of
// the loop into pinned host buffers, and a stager copies each batch on the copy stream into one
// of the device staging slots (two, or three: workload.h stage_depth) while the device trains on
// the batches before; the step then takes
// the slot's batch into the model's input buffers (device to device), so a captured CUDA graph
// keeps reading stable addresses. A batch is a few fields of fixed byte sizes (tk_batch_layout);
// what the records are and in which order is the workload's reader (workload.h).
// Device batches: a reader that writes some fields in device memory itself (a GPU image decoder's
// images) gets device buffers for them instead of pinned host ones, one set per loader thread, and
// the stager moves those fields into the slot device to device: no trip through host memory, the
// same slots and events.
#ifndef TK_ENGINE_LOADER_H
#define TK_ENGINE_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_BATCH_MAX_FIELDS 16

typedef struct tk_batch_layout {
    int nfields;
    size_t bytes[TK_BATCH_MAX_FIELDS]; // bytes of each field for one whole batch
} tk_batch_layout;

// A reader of the training data, one per loader thread: open, read batch `step` (every epoch the
// same order or another, as the workload decides) into the field buffers, close.
typedef struct tk_batch_source {
    int (*open)(void *arg, void **rd, tk_err *e);
    int (*read)(void *rd, int64_t step, void *const *bufs, tk_err *e);
    void (*close)(void *rd);
    // Which fields reader rd writes in device memory (asked once, right after open): bit f set,
    // field f's buffer of that loader thread is device memory (tk_malloc), and read returns only
    // once the batch is complete in it. 0 or NULL: every field in pinned host memory.
    unsigned (*on_device)(void *rd);
    void *arg;
} tk_batch_source;

// Worker w of nworkers decodes batches first + w, first + w + nworkers, ... < last, each into its
// own pinned slot; the loop takes them in order with _get (blocks until decoded; a worker's error
// comes back here) and hands each slot back with _put once its contents are on the device
// (device buffers too: once the copy out of them is done). *dev_mask (may be NULL): the fields
// whose buffers are device memory (bit f; what that thread's reader said), 0: all host.
typedef struct tk_loader tk_loader;
int tk_loader_start(tk_loader **l, tk_ctx *c, const tk_batch_source *src, const tk_batch_layout *L, int64_t first,
                    int64_t last, int nworkers, tk_err *e);
int tk_loader_get(tk_loader *l, int64_t step, void *const **bufs, unsigned *dev_mask, tk_err *e);
void tk_loader_put(tk_loader *l, int64_t step);
int tk_loader_device_workers(const tk_loader *l); // workers with some fields in device memory
void tk_loader_stop(tk_loader *l); // mid-run is fine; l may be NULL

// Device staging slots of the layout: two, or up to TK_STAGE_MAX_SLOTS for a workload that stages
// further ahead (workload.h stage_depth).
#define TK_STAGE_MAX_SLOTS 3
typedef struct tk_stager {
    tk_ctx *c;
    tk_batch_layout L;
    int n; // slots
    void *dev[TK_STAGE_MAX_SLOTS][TK_BATCH_MAX_FIELDS];
    void *mem[TK_STAGE_MAX_SLOTS];
    // copy done (copy stream; the host waits for it); the slot's work done, copy and hook (copy
    // stream; the compute stream waits for it); contents taken (compute stream)
    tk_event copy_done[TK_STAGE_MAX_SLOTS], copied[TK_STAGE_MAX_SLOTS], taken[TK_STAGE_MAX_SLOTS];
} tk_stager;
// nslots: 2 to TK_STAGE_MAX_SLOTS.
int tk_stager_init(tk_stager *s, tk_ctx *c, const tk_batch_layout *L, int nslots, tk_err *e);
void tk_stager_release(tk_stager *s);
// Enqueues on the copy stream, after the compute stream has taken what slot held before, the copy
// of the fields src (pinned host memory, or device memory for the fields of dev_mask); then hook(arg,
// slot, the slot's device fields, TK_STREAM_COPY) may queue more work on that stream for the
// batch (NULL: none); returns once the copy is done, so the src buffers may be reused (the
// compute stream is never waited for, nor the hook's work: the hook waits for what it needs).
typedef int (*tk_stage_hook)(void *arg, int slot, void *const *dev, int stream, tk_err *e);
int tk_stager_stage(tk_stager *s, int slot, void *const *src, unsigned dev_mask, tk_stage_hook hook, void *arg,
                    tk_err *e);
// The compute stream waits for the slot's copy and hook and moves the fields into inputs (device
// buffers of the layout's sizes).
int tk_stager_use(tk_stager *s, int slot, void *const *inputs, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
