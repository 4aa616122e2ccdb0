// Checkpoints of a model's tensors (man/man5/trainkit-checkpoint.5): safetensors files written
// atomically (temp file, fsync, rename) with a CRC-32C of every tensor in the metadata, verified
// on every load. Several ranks: the file is the one-rank file whatever the world size; rank 0
// writes it, tensors held by other ranks reach it in bounded chunks, and a file loads under any
// world size (each rank reads the tensors it holds).
#ifndef TK_ENGINE_CKPT_H
#define TK_ENGINE_CKPT_H

#include <jansson.h>
#include <stdint.h>

#include "ckpt/safetensors.h"
#include "core/err.h"
#include "engine/dist.h"
#include "engine/params.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_CKPT_FORMAT "trainkit-checkpoint-1"

// The __metadata__ of a train-step checkpoint (man/man5/trainkit-checkpoint.5), where every
// value is a string. Parsed, the strings are borrowed from the metadata object; a key the file
// lacks is NULL (a string) or -1 (a count).
typedef struct tk_ckpt_meta {
    const char *format;      // TK_CKPT_FORMAT
    const char *workload;    // the workload's name
    int64_t step;            // optimizer updates applied
    int64_t samples_seen;    // training samples consumed
    int64_t epoch;           // 0-based epoch of the next batch
    int64_t world_size;      // the ranks that trained it (evaluate's model takes one rank's batch)
    const char *config_hash; // 16 lower-case hexadecimal digits (tk_config_hash)
    const char *rng;         // "philox4x32-10:SEED"
    uint64_t seed;           // its SEED (0 without rng)
    const char *config;      // the effective configuration, compact JSON
} tk_ckpt_meta;

// The one reader of that metadata (resume, --init-checkpoint, evaluate, --follow): a key that is
// there must be well formed (step, samples_seen, epoch and world_size decimal counts below 2^63 without sign
// or blanks; config_hash 16 lower-case hexadecimal digits; rng "philox4x32-10:" and a decimal
// seed), else TK_EDATA naming path and the key. Keys that are absent stay absent: each reader
// says which it needs.
int tk_ckpt_meta_parse(const json_t *meta, const char *path, tk_ckpt_meta *m, tk_err *e);
// The metadata object a run writes for m (every key of it, world_size when > 0; a new reference;
// NULL: out of memory).
json_t *tk_ckpt_meta_json(const tk_ckpt_meta *m);

// Writes every tensor of P (in declaration order, whichever rank holds each) and meta (an object
// of strings, borrowed) to path. Collective: every rank calls it and gets the same status.
int tk_ckpt_save(tk_dist *d, const tk_params *P, const char *path, const json_t *meta, tk_err *e);

enum {
    TK_CKPT_MODEL_ONLY = 1, // load: leave the extern tensors (optimizer state) alone
    TK_CKPT_EMA = 2,        // load: each dense tensor NAME from the file's ema.NAME (the weights'
                            // moving average, optimizer.h), the others as they are: the model the
                            // in-process evaluation of optimizer.ema runs on (evaluate's default)
};
// The file's tensor that loads p under flags (its own name, or ema.NAME under TK_CKPT_EMA).
const tk_st_tensor *tk_ckpt_source(const tk_st_file *f, const tk_param *p, int flags);
// Loads every tensor this rank holds (TK_EDATA naming the file and tensor when one is missing,
// has another dtype or shape, or fails its checksum). The file's other tensors, those no rank
// loads (the optimizer's state under TK_CKPT_MODEL_ONLY, tensors the model does not have), are
// read and checked by rank 0 first: nothing is loaded from a file whose header is bad or one of
// whose unloaded tensors fails its checksum. *meta (may be NULL) gets a new reference to the
// metadata; *verified (may be NULL) is 1 when every tensor of the file that this rank read had a
// checksum, 0 for a file of another writer (a Hugging Face or torchvision export), which loads
// all the same.
int tk_ckpt_load(const tk_params *P, const char *path, int flags, json_t **meta, int *verified, tk_err *e);
// Reads every tensor of f but those marked in done (indices into f->t; NULL: none marked) and
// checks its checksum (TK_EDATA naming the file, offset and tensor, as a load does); *unchecked
// (may be NULL) gets the number of those tensors that have none.
int tk_ckpt_verify(const tk_st_file *f, const unsigned char *done, int *unchecked, tk_err *e);

// A one-rank list of tensors from host or device memory (a step dump, an export).
typedef struct tk_ckpt_entry {
    tk_st_tensor t;
    const void *src;
    int dev;       // src is in the backend's memory (staged through the host)
} tk_ckpt_entry;
int tk_ckpt_write(tk_ctx *c, const char *path, const tk_ckpt_entry *ent, int n, const json_t *meta, tk_err *e);
// The entries of P's tensors this rank holds (as tk_ckpt_write takes them); *n gets the count.
int tk_ckpt_entries(const tk_params *P, tk_ckpt_entry **ent, int *n, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
