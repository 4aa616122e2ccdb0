// Process model for several GPUs: one process per GPU. Each process learns its rank from the
// environment its launcher set, and the ranks exchange a small blob (the NCCL unique id) from
// rank 0 through a rendezvous on a shared file system or over TCP.
#ifndef TK_DIST_H
#define TK_DIST_H

#include <stddef.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_rank_info {
    int rank, world;             // global rank and world size
    int local_rank, local_world; // on this host (local_world 0 = unknown)
    char source[24];             // which launcher's variables were used: "torchrun", "mpirun",
                                 // "pmi", "slurm" or "default"
} tk_rank_info;

// Reads, in this order of precedence: RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun and
// share/launch), OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE (Open MPI's mpirun),
// PMI_RANK/PMI_SIZE (MPICH, Intel MPI; PMI_LOCAL_RANK or MPI_LOCALRANKID when present),
// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun). With none set: rank 0 of 1.
// Inconsistent values (rank >= world, not an integer) are a usage error naming the variable.
int tk_rank_from_env(tk_rank_info *r, tk_err *e);

#define TK_RDV_MAX_BLOB 4096

// Rendezvous spec: "file:PATH" (a shared file system; rank 0 writes PATH atomically, the others
// wait for it) or "tcp:HOST:PORT" (rank 0 listens on PORT, the others connect to HOST:PORT).
// Rank 0 passes blob (n bytes) and every rank gets it back in blob/n. The run id (the variable
// TK_RUN_ID, set by share/launch; SLURM_JOB_ID otherwise) is part of the exchange, so a file
// left by an earlier run, or a rank of another job, is never taken for this one. Waits at most
// timeout_s seconds, then fails with TK_EIO saying which ranks did not arrive.
int tk_rendezvous(const char *spec, const tk_rank_info *r, void *blob, size_t *n, double timeout_s,
                  tk_err *e);

// The variable a local launcher sets so that its ranks meet without an option: share/launch puts
// "file:DIR/rendezvous" there, DIR a private temporary directory it removes at the end.
#define TK_RENDEZVOUS_ENV "TK_RENDEZVOUS"

// The spec a run uses: `given` (a --rendezvous option) when not NULL, else the variable
// TK_RENDEZVOUS when set and not empty, else NULL (*spec). A malformed spec from the variable is
// a usage error naming the variable (tk_rendezvous checks a given one when it runs).
int tk_rendezvous_spec(const char *given, const char **spec, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
