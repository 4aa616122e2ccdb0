// Rank, world size and local rank from the launcher's environment (see dist.h for the order).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cli.h"
#include "dist/dist.h"

// -1: unset. Otherwise parse the variable as an integer in [0, 1<<24).
static int env_int(const char *name, int *out, tk_err *e) {
    const char *s = getenv(name);
    *out = -1;
    if (!s) return 0;
    int64_t v;
    if (tk_parse_i64(s, 0, 1 << 24, name, &v, e)) {
        tk_err_set(e, TK_EUSAGE, "environment variable %s='%s' is not a non-negative integer", name, s);
        return TK_EUSAGE;
    }
    *out = (int)v;
    return 0;
}

typedef struct {
    const char *source, *rank, *world, *local_rank, *local_world, *alt_local_rank;
} launcher_vars;

static const launcher_vars LAUNCHERS[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", NULL},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", NULL},
    {"pmi", "PMI_RANK", "PMI_SIZE", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE", "MPI_LOCALRANKID"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", NULL},
};

int tk_rank_from_env(tk_rank_info *r, tk_err *e) {
    memset(r, 0, sizeof *r);
    r->world = 1;
    snprintf(r->source, sizeof r->source, "default");
    for (size_t i = 0; i < sizeof LAUNCHERS / sizeof LAUNCHERS[0]; i++) {
        const launcher_vars *L = &LAUNCHERS[i];
        int rank, world, lr, lw;
        TRY(env_int(L->rank, &rank, e));
        TRY(env_int(L->world, &world, e));
        if (rank < 0 && world < 0) continue;
        if (rank < 0 || world < 1 || rank >= world) {
            tk_err_set(e, TK_EUSAGE, "inconsistent %s environment: %s=%s, %s=%s", L->source, L->rank,
                       getenv(L->rank) ? getenv(L->rank) : "(unset)", L->world,
                       getenv(L->world) ? getenv(L->world) : "(unset)");
            return tk_err_hint(e, "the rank must be in [0, world size)");
        }
        TRY(env_int(L->local_rank, &lr, e));
        if (lr < 0 && L->alt_local_rank) TRY(env_int(L->alt_local_rank, &lr, e));
        // SLURM_NTASKS_PER_NODE can be "4(x2)" on heterogeneous allocations: then unknown.
        if (env_int(L->local_world, &lw, NULL) != 0) lw = -1;
        r->rank = rank;
        r->world = world;
        r->local_rank = lr >= 0 ? lr : (world == 1 ? 0 : rank);
        r->local_world = lw > 0 ? lw : 0;
        snprintf(r->source, sizeof r->source, "%s", L->source);
        return 0;
    }
    return 0;
}
