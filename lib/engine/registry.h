// The workloads the engine knows (registry.c is the one place that names them).
#ifndef TK_ENGINE_REGISTRY_H
#define TK_ENGINE_REGISTRY_H

#include "engine/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

// All of them, NULL terminated, in the order --help lists them.
const tk_workload *const *tk_workloads(void);
// The one named name, or NULL.
const tk_workload *tk_workload_find(const char *name);
// "dlrm, bert, ..." for messages.
const char *tk_workload_names(void);

#ifdef __cplusplus
}
#endif

#endif
