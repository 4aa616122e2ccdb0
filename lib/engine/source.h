// The loader's batch source (loader.h) over a workload's reader (workload.h reader_open,
// read_batch, reader_close, reader_device): one reader per loader thread, each knowing the epoch
// length read_batch wants. And how many loader threads a rank runs by default.
#ifndef TK_ENGINE_SOURCE_H
#define TK_ENGINE_SOURCE_H

#include <stdint.h>

#include "engine/loader.h"
#include "engine/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_wl_source {
    const tk_workload *wl;
    const void *cfg;         // the workload's parsed configuration
    char *const *paths;      // the training data
    int npaths, rank, world;
    int64_t spe;             // steps per epoch
    int device;              // the CUDA device for device batches, or -1: host batches only
} tk_wl_source;

// The source reading through a (borrowed: it must outlive the loader).
tk_batch_source tk_wl_source_make(tk_wl_source *a);
// The cuda backend's loader threads without --loader-threads: this rank's share of the CPUs it
// may run on (the local_world ranks of its host split them), less 2 for the step's own thread
// and the copies; 2 to 16.
int tk_wl_source_default_threads(int local_world);

#ifdef __cplusplus
}
#endif

#endif
