// Atomic output files: write to "PATH.tmp.PID.N" in the same directory, then fsync, rename over
// PATH and fsync the directory. A crash or a full disk never leaves a half-written PATH behind, and
// never damages the file PATH held before.
#ifndef TK_AFILE_H
#define TK_AFILE_H

#include <stdio.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_afile {
    FILE *fp;            // write through this (buffered)
    char path[4096];     // final name
    char tmp[4096];      // temporary name, "" once committed or aborted
} tk_afile;

int tk_afile_open(tk_afile *f, const char *path, tk_err *e);
// Flush, fsync, close, rename onto the final path, fsync the directory.
int tk_afile_commit(tk_afile *f, tk_err *e);
// Close and remove the temporary file. Safe to call after commit (does nothing).
void tk_afile_abort(tk_afile *f);

// Write n bytes or fail with TK_EIO naming the file.
int tk_write_all(FILE *fp, const void *buf, size_t n, const char *name, tk_err *e);
// pread exactly n bytes at off, or fail (TK_EIO on a system error, TK_EDATA on a short file).
int tk_pread_all(int fd, void *buf, size_t n, long long off, const char *name, tk_err *e);
// Removes the temporaries that writers of this process's kind left in dir when they were killed
// (kill -9, a crash): files "NAME.tmp.PID.N" with NAME ending in suffix whose process PID no longer
// exists (a live process's temporaries are never touched). *removed (may be NULL) gets the count.
int tk_afile_remove_stale(const char *dir, const char *suffix, int *removed, tk_err *e);
// The same for the temporaries of one output path ("PATH.tmp.PID.N"); tk_afile_open calls it, so
// every atomic writer removes what a killed writer of the same file left.
int tk_afile_remove_stale_of(const char *path, int *removed, tk_err *e);
// fsync the directory that holds path.
int tk_fsync_dir_of(const char *path, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
