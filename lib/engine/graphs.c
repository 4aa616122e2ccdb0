// The step's CUDA graphs by key (graphs.h).
#include "engine/graphs.h"

int tk_graph_cache_launch(tk_graph_cache *gc, tk_instance *I, int slot, int64_t key, int64_t tick, tk_err *e) {
    if (slot < 0 || slot >= TK_STAGE_MAX_SLOTS) return tk_err_set(e, TK_EINTERNAL, "graphs: slot %d", slot);
    const int k = slot;
    int j = 0;
    for (int i = 0; i < TK_GRAPH_CACHE; i++) { // the key's graph, else a free one, else the least recently used
        if (gc->g[k][i].valid && gc->key[k][i] == key) {
            j = i;
            break;
        }
        if (gc->g[k][j].valid && (!gc->g[k][i].valid || gc->used[k][i] < gc->used[k][j])) j = i;
    }
    tk_graph *g = &gc->g[k][j];
    gc->used[k][j] = tick;
    if (g->valid && gc->key[k][j] != key) { // made again, once its last launch is done
        TRY(tk_dist_sync(&I->dist, e));
        tk_graph_destroy(g);
    }
    int rc = 0;
    if (!g->valid) {
        gc->key[k][j] = key;
        rc = tk_graph_begin(I->c, e);
        if (!rc) rc = tk_instance_step(I, e);
        if (!rc) rc = tk_graph_end(I->c, g, e);
    }
    return rc ? rc : tk_graph_launch(I->c, g, e);
}

void tk_graph_cache_free(tk_graph_cache *gc) {
    for (int k = 0; k < TK_STAGE_MAX_SLOTS; k++)
        for (int j = 0; j < TK_GRAPH_CACHE; j++)
            if (gc->g[k][j].valid) tk_graph_destroy(&gc->g[k][j]);
}
