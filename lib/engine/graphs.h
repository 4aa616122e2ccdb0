// The training step's CUDA graphs, kept by key (workload.h graph_key): a step whose key has a
// graph is one launch; a new key is captured once (each capture costs tens of ms) in a free entry,
// else in place of the least recently used one. The cuda backend only (tk_graph_* run the body
// eagerly on cpu).
#ifndef TK_ENGINE_GRAPHS_H
#define TK_ENGINE_GRAPHS_H

#include <stdint.h>

#include "core/err.h"
#include "engine/instance.h"
#include "engine/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

// The graphs kept per staging slot (workload.h graph_per_slot: one set per slot). 64: BERT's
// unpadded step has one key a row bucket, about 50 at batch 32 with 128-row buckets.
enum { TK_GRAPH_CACHE = 64 };

typedef struct tk_graph_cache {
    tk_graph g[TK_STAGE_MAX_SLOTS][TK_GRAPH_CACHE];
    int64_t key[TK_STAGE_MAX_SLOTS][TK_GRAPH_CACHE];
    int64_t used[TK_STAGE_MAX_SLOTS][TK_GRAPH_CACHE]; // the tick of the last launch (0: never)
} tk_graph_cache;

// Launches I's step for key (>= 0) from slot's graphs (0 to TK_STAGE_MAX_SLOTS - 1), capturing it first when it
// has none; tick (the step count) grows with every call. An evicted graph is made again only once
// its last launch is done (tk_dist_sync).
int tk_graph_cache_launch(tk_graph_cache *gc, tk_instance *I, int slot, int64_t key, int64_t tick, tk_err *e);
void tk_graph_cache_free(tk_graph_cache *gc);

#ifdef __cplusplus
}
#endif

#endif
