#include "core/mllog.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

long long tk_time_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

int tk_mllog_open(tk_mllog *log, const char *path, int rank, tk_err *e) {
    memset(log, 0, sizeof *log);
    log->fd = -1;
    log->rank = rank;
    if (!path) return 0;
    if (strcmp(path, "-") == 0) {
        log->fd = STDERR_FILENO;
        return 0;
    }
    log->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log->fd < 0) return tk_err_errno(e, errno, "%s: cannot open the MLLOG file", path);
    log->owns_fd = 1;
    return 0;
}

void tk_mllog_close(tk_mllog *log) {
    if (log->owns_fd && log->fd >= 0) close(log->fd);
    log->fd = -1;
}

int tk_mllog_write(tk_mllog *log, const char *file, int line, const char *event_type,
                   const char *key, json_t *value, json_t *meta, int all_ranks, tk_err *e) {
    int rc = 0;
    if (log->fd < 0 || (!all_ranks && log->rank != 0)) goto out;
    json_t *m = json_object();
    json_object_set_new(m, "file", json_string(file));
    json_object_set_new(m, "lineno", json_integer(line));
    if (meta) json_object_update(m, meta);
    json_t *rec = json_object();
    json_object_set_new(rec, "namespace", json_string(""));
    json_object_set_new(rec, "time_ms",
                        json_integer(log->fixed_time_ms > 0 ? log->fixed_time_ms : tk_time_ms()));
    json_object_set_new(rec, "event_type", json_string(event_type));
    json_object_set_new(rec, "key", json_string(key));
    json_object_set(rec, "value", value ? value : json_null());
    json_object_set_new(rec, "metadata", m);
    char *body = tk_json_dumps_py(rec);
    json_decref(rec);
    if (!body) {
        rc = tk_err_set(e, TK_EINTERNAL, "out of memory formatting an MLLOG line");
        goto out;
    }
    size_t n = strlen(body);
    char *line_buf = malloc(n + 10);
    if (!line_buf) {
        free(body);
        rc = tk_err_set(e, TK_EINTERNAL, "out of memory formatting an MLLOG line");
        goto out;
    }
    memcpy(line_buf, ":::MLLOG ", 9);
    memcpy(line_buf + 9, body, n);
    line_buf[9 + n] = '\n';
    free(body);
    ssize_t w = write(log->fd, line_buf, n + 10);
    if (w != (ssize_t)(n + 10)) rc = tk_err_errno(e, w < 0 ? errno : ENOSPC, "cannot write an MLLOG line");
    free(line_buf);
out:
    if (value) json_decref(value);
    if (meta) json_decref(meta);
    return rc;
}
