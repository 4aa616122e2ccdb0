// Line input over plain, gzip (zlib) or zstd data, the format detected from the first bytes, for
// every reader of text files (Criteo's TSV days, BERT's text parts).
#ifndef TK_CORE_LINES_H
#define TK_CORE_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct tk_lines tk_lines;
// path "-" reads stdin.
int tk_lines_open(tk_lines **l, const char *path, tk_err *e);
// The next line without its '\n' (*line = NULL at the end). *newline = 0 when the data ended
// without one. The pointer is valid until the next call.
int tk_lines_next(tk_lines *l, const char **line, size_t *len, int *newline, tk_err *e);
uint64_t tk_lines_lineno(const tk_lines *l); // 1-based number of the line last returned
const char *tk_lines_name(const tk_lines *l);
uint64_t tk_lines_bytes_in(const tk_lines *l); // bytes of (compressed) input consumed so far
void tk_lines_close(tk_lines *l);

#endif
