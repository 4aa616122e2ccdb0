// Datasets on disk as the engine and every workload see them: .tks files, given as files or
// directories (a directory means its *.tks files in name order), read in the order given.
#ifndef TK_ENGINE_DATA_H
#define TK_ENGINE_DATA_H

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// *out (n_out strings, free with tk_data_paths_free) = the files of paths, directories expanded.
// TK_EIO for a path that cannot be opened, TK_EDATA for a directory without .tks files, TK_EUSAGE
// for no files at all.
int tk_data_paths(char *const *paths, int npaths, char ***out, int *nout, tk_err *e);
void tk_data_paths_free(char **list, int n);
// The schema meta JSON text of the first file (malloc'ed, "{}" when it has none).
int tk_data_meta(char *const *paths, int npaths, char **meta, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
