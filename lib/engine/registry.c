// The registry of workloads: the one file that lists them. Adding a workload adds its files under
// lib/workloads/NAME/, an extern line and a table entry here (man/man7/trainkit-workload.7).
#include "engine/registry.h"

#include <stdio.h>
#include <string.h>

extern const tk_workload tk_workload_dlrm;
extern const tk_workload tk_workload_bert;
extern const tk_workload tk_workload_mlp;
extern const tk_workload tk_workload_resnet;

static const tk_workload *const all[] = {&tk_workload_dlrm, &tk_workload_bert, &tk_workload_resnet, &tk_workload_mlp,
                                         NULL};

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
