// A model's state in flat buffers (DESIGN.md section 3a): every tensor a workload declares is a
// named view into ONE parameter arena in the backend's memory, in declaration order, 256-byte
// aligned (or packed right after the tensor before it). The tensors the engine's optimizer
// updates ("dense") come first and are contiguous, so one optimizer launch, one gradient
// all-reduce and one optimizer-state buffer cover them; their gradients are views into ONE
// gradient arena at the same offsets. Then come the tensors a workload updates itself (DLRM's
// tables, with the fused sparse update) and buffers nobody trains (BatchNorm's running
// statistics). A tensor may live on one rank only (model parallel: owner >= 0). The names are
// the checkpoint's (lib/engine/ckpt.h) and the MLLOG's where the workload says so.
#ifndef TK_ENGINE_PARAMS_H
#define TK_ENGINE_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    TK_PARAM_DENSE = 1,     // trained by the engine's optimizer (f32 master weights), has a gradient
    TK_PARAM_NO_DECAY = 2,  // dense: no weight decay (biases, normalization parameters)
    TK_PARAM_NO_ADAPT = 4,  // dense: LAMB / LARS leave its trust ratio at 1
    TK_PARAM_PACKED = 8,    // placed right after the tensor before it, no alignment gap, so a run
                            // of packed tensors is one array (DLRM's tables, indexed by row offsets)
    TK_PARAM_EXTERN = 16,   // a view of memory the caller owns (tk_params_add_extern): saved and
                            // loaded with the others, not allocated here (the optimizer's state)
};

#define TK_PARAM_NAME 128
#define TK_PARAM_MAX_DIMS 5 // (the 3-D U-Net's convolution weights)

typedef struct tk_param {
    char name[TK_PARAM_NAME];
    tk_dtype dtype;
    int ndim;
    int64_t shape[TK_PARAM_MAX_DIMS];
    int flags;
    int owner;              // -1: every rank holds it; else the one rank that does
    size_t off;             // byte offset in the parameter arena (held, not extern)
    void *w;                // the values (NULL on the ranks that do not hold it)
    float *g;               // dense: its gradient
} tk_param;

typedef struct tk_params {
    tk_ctx *c;
    int rank;
    int n, cap;
    tk_param *p;
    tk_arena warena, garena;
    size_t wbytes, gbytes;  // the arenas' layouts (tk_params_alloc makes them)
    int ndense;             // the first ndense tensors are the dense ones
    float *dense_w, *dense_g; // the dense span in both arenas, alignment gaps included (kept 0)
    size_t dense_n;         // floats in it
    size_t dense_multiple;  // set before tk_params_alloc: dense_n is made a multiple of it (zero
                            // floats after the last dense tensor; 0 or 1: no padding), for the
                            // distributed optimizer's equal shares (engine/optimizer.h)
    // The low-precision compute copy of the dense span (bf16 GEMMs read it): set copy_type to
    // TK_BF16 before tk_params_alloc to get one; the optimizer's update writes it, and
    // tk_params_refresh_copy rewrites it after anything else changed the master weights.
    tk_dtype copy_type;     // TK_F32: none
    void *copy;             // (dense_n) copy_type, same element offsets as dense_w
    int allocated;
} tk_params;

void tk_params_init(tk_params *P, tk_ctx *c, int rank);
// Declares a tensor; *idx (may be NULL) gets its index. Dense tensors are f32 and come before all
// others (TK_EINTERNAL otherwise); names are unique. Before tk_params_alloc.
int tk_params_add(tk_params *P, const char *name, tk_dtype dtype, int ndim, const int64_t *shape, int flags,
                  int owner, int *idx, tk_err *e);
// A tensor whose memory the caller owns (p on this rank; NULL where another rank holds it): the
// optimizer's state views, added after tk_params_alloc.
int tk_params_add_extern(tk_params *P, const char *name, tk_dtype dtype, int ndim, const int64_t *shape,
                         int owner, void *p, tk_err *e);
// Allocates both arenas (zeroed) and sets every held tensor's w (and g).
int tk_params_alloc(tk_params *P, tk_err *e);
void tk_params_release(tk_params *P);
// The compute copy of a dense tensor's values (its place in copy), or w itself without a copy.
const void *tk_params_copy_of(const tk_params *P, const float *w);
// copy = the master weights rounded (after a load or an initialization).
int tk_params_refresh_copy(tk_params *P, tk_err *e);

int tk_param_held(const tk_params *P, const tk_param *t); // this rank has its values
int64_t tk_param_numel(const tk_param *t);
size_t tk_param_bytes(const tk_param *t);
int tk_params_find(const tk_params *P, const char *name); // index, or -1
// Elements of every tensor but extern ones, over all ranks (the model's size).
int64_t tk_params_numel(const tk_params *P);

#ifdef __cplusplus
}
#endif

#endif
