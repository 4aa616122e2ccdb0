// The kinds of collective (lib/gpu/comm.h), shared by the communicator and its cpu transport.
#ifndef TK_GPU_COLL_H
#define TK_GPU_COLL_H

typedef enum {
    TK_COLL_ALL_REDUCE,
    TK_COLL_REDUCE_SCATTER,
    TK_COLL_ALL_GATHER,
    TK_COLL_ALL_TO_ALL,
    TK_COLL_ALL_TO_ALLV
} tk_coll;

#endif
