// The registry of workloads: the one file that lists them. Adding a workload adds its files under
// lib/workloads/NAME/ and one line WL(NAME) below (its table is tk_workload_NAME), in the place
// --help lists it (man/man7/trainkit-workload.7).
#include "engine/registry.h"

#include <stdio.h>
#include <string.h>

#define WORKLOADS \
    WL(dlrm)      \
    WL(bert)      \
    WL(resnet)    \
    WL(unet3d)    \
    WL(ssd)       \
    WL(rnnt)      \
    WL(mlp)

#define WL(name) extern const tk_workload tk_workload_##name;
WORKLOADS
#undef WL
#define WL(name) &tk_workload_##name,
static const tk_workload *const all[] = {WORKLOADS NULL};
#undef WL

const tk_workload *const *tk_workloads(void) { return all; }

const tk_workload *tk_workload_find(const char *name) {
    for (int i = 0; all[i]; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    return NULL;
}

const char *tk_workload_names(void) {
    static char buf[512];
    if (!buf[0]) {
        size_t o = 0;
        for (int i = 0; all[i] && o < sizeof buf; i++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? ", " : "", all[i]->name);
    }
    return buf;
}
