// MLLOG lines exactly as MLCommons' mlperf_logging writes them:
//   :::MLLOG {"namespace": "", "time_ms": 1634246972617, "event_type": "POINT_IN_TIME",
//             "key": "cache_clear", "value": true, "metadata": {"file": "x.c", "lineno": 4}}
// (one line). Separators and float formatting follow Python's json.dumps (", ", ": ", shortest
// repr of doubles), metadata starts with the C source's __FILE__ and __LINE__, and each line is
// one write(2) on an O_APPEND descriptor, so lines from several processes never interleave.
#ifndef TK_MLLOG_H
#define TK_MLLOG_H

#include <jansson.h>

#include "core/json_text.h"

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_mllog {
    int fd;          // -1 = disabled
    int owns_fd;
    int rank;        // lines are written by rank 0 only, unless tk_mllog_event_rank is used
    long long fixed_time_ms; // >0: use this instead of the clock (tests)
} tk_mllog;

// path NULL: disabled. "-": standard error. Otherwise appended to (created 0644).
int tk_mllog_open(tk_mllog *log, const char *path, int rank, tk_err *e);
void tk_mllog_close(tk_mllog *log);

// Low level: value and meta are stolen (NULL value = JSON null; meta = extra metadata members,
// an object or NULL). all_ranks: write from every rank (per-rank keys), else rank 0 only.
int tk_mllog_write(tk_mllog *log, const char *file, int line, const char *event_type,
                   const char *key, json_t *value, json_t *meta, int all_ranks, tk_err *e);

#define TK_MLLOG_EVENT(log, key, value, meta, e)                                                  \
    tk_mllog_write((log), __FILE__, __LINE__, "POINT_IN_TIME", (key), (value), (meta), 0, (e))
#define TK_MLLOG_START(log, key, value, meta, e)                                                  \
    tk_mllog_write((log), __FILE__, __LINE__, "INTERVAL_START", (key), (value), (meta), 0, (e))
#define TK_MLLOG_END(log, key, value, meta, e)                                                    \
    tk_mllog_write((log), __FILE__, __LINE__, "INTERVAL_END", (key), (value), (meta), 0, (e))


// Current wall-clock time in milliseconds since the epoch (what time_ms holds).
long long tk_time_ms(void);

#ifdef __cplusplus
}
#endif

#endif
