// The MLLOG held until the run starts (runlog.h).
#include "engine/runlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/afile.h"

// Whether path could be appended to, without creating or changing it.
static int check_writable(const char *path, tk_err *e) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (errno != ENOENT) return tk_err_errno(e, errno, "%s: cannot open the MLLOG file", path);
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (access(dir, W_OK | X_OK) != 0) return tk_err_errno(e, errno, "%s: cannot create the MLLOG file", path);
    return 0;
}

int tk_runlog_hold(tk_runlog *h, tk_mllog *log, const char *path, int rank, tk_err *e) {
    memset(h, 0, sizeof *h);
    TRY(tk_mllog_open(log, NULL, rank, e)); // disabled until there is somewhere to write
    if (!path) return 0;
    if (strcmp(path, "-") != 0) TRY(check_writable(path, e));
    if (!(h->held = tmpfile())) return tk_err_errno(e, errno, "cannot make a temporary file for the MLLOG");
    h->path = path;
    log->fd = fileno(h->held);
    return 0;
}

int tk_runlog_release(tk_runlog *h, tk_mllog *log, tk_err *e) {
    if (!h->held) return 0;
    int fd = fileno(h->held);
    off_t n = lseek(fd, 0, SEEK_END);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    int rc = n < 0 ? tk_err_errno(e, errno, "the held MLLOG lines: cannot seek")
             : !buf ? tk_err_set(e, TK_EIO, "out of host memory") : 0;
    if (!rc) rc = tk_pread_all(fd, buf, (size_t)n, 0, "the held MLLOG lines", e);
    tk_mllog to;
    if (!rc) rc = tk_mllog_open(&to, h->path, log->rank, e);
    if (!rc) {
        to.fixed_time_ms = log->fixed_time_ms;
        // one write(2) on the O_APPEND descriptor, as every line: no other writer's line lands inside
        ssize_t w = n > 0 ? write(to.fd, buf, (size_t)n) : 0;
        if (w != (ssize_t)n) rc = tk_err_errno(e, w < 0 ? errno : ENOSPC, "%s: cannot write the MLLOG", h->path);
        if (rc) tk_mllog_close(&to);
    }
    free(buf);
    fclose(h->held);
    h->held = NULL;
    if (rc) {
        log->fd = -1;
        return rc;
    }
    *log = to;
    return 0;
}

void tk_runlog_discard(tk_runlog *h, tk_mllog *log) {
    if (!h->held) return;
    fclose(h->held);
    h->held = NULL;
    log->fd = -1;
}
