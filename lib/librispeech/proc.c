// Child processes for the speech tools (librispeech.h): sentencepiece's CLIs, espeak-ng, sox.
// One process is fed through a pipe while its output is read (poll), so neither side blocks on a
// full pipe however much text goes through.
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "librispeech/librispeech.h"

int ls_need_tool(const char *tool, const char *pkg, tk_err *e) {
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/bin:/bin";
    char buf[4096];
    for (const char *p = path; *p;) {
        const char *c = strchr(p, ':');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if ((size_t)snprintf(buf, sizeof buf, "%.*s/%s", (int)len, len ? p : ".", tool) < sizeof buf &&
            access(buf, X_OK) == 0)
            return 0;
        p += len + (c != NULL);
    }
    tk_err_set(e, TK_EUSAGE, "%s is not installed (Debian package %s)", tool, pkg);
    return tk_err_hint(e, "apt-get install %s, or run contrib/setup-deps.sh", pkg);
}

typedef struct { char *p; size_t n, cap; } growbuf;

static int grow_read(int fd, growbuf *b) {
    if (b->cap - b->n < 65536) {
        size_t cap = b->cap ? b->cap * 2 : 131072;
        char *q = realloc(b->p, cap);
        if (!q) return -ENOMEM;
        b->p = q;
        b->cap = cap;
    }
    ssize_t r = read(fd, b->p + b->n, b->cap - b->n - 1);
    if (r > 0) b->n += (size_t)r;
    b->p[b->n] = 0;
    return r < 0 ? (errno == EINTR || errno == EAGAIN ? 1 : -errno) : (int)(r > 0);
}

// The last non-empty line of a tool's stderr, for the error message (sentencepiece's last line,
// "Program terminated with an unrecoverable error.", says less than the one before it).
static void last_line(const growbuf *b, char *out, size_t cap) {
    out[0] = 0;
    size_t end = b->n;
    for (;;) {
        while (end && (b->p[end - 1] == '\n' || b->p[end - 1] == '\r')) end--;
        size_t start = end;
        while (start && b->p[start - 1] != '\n') start--;
        if (start == end) return;
        snprintf(out, cap, "%.*s", (int)(end - start), b->p + start);
        if (strncmp(out, "Program terminated", 18) || !start) return;
        end = start;
    }
}

int ls_run(char *const argv[], const char *cwd, const void *in, size_t inlen, char **out, size_t *outlen, tk_err *e) {
    if (out) *out = NULL;
    if (outlen) *outlen = 0;
    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
    if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC)) {
        int er = errno;
        for (int i = 0; i < 2; i++) {
            if (pin[i] >= 0) close(pin[i]);
            if (pout[i] >= 0) close(pout[i]);
            if (perr[i] >= 0) close(perr[i]);
        }
        return tk_err_errno(e, er, "%s: cannot make pipes", argv[0]);
    }
    pid_t pid = fork();
    if (pid < 0) {
        int er = errno;
        for (int i = 0; i < 2; i++) close(pin[i]), close(pout[i]), close(perr[i]);
        return tk_err_errno(e, er, "%s: cannot start", argv[0]);
    }
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        if (cwd && chdir(cwd)) {
            dprintf(2, "cannot enter %s: %s\n", cwd, strerror(errno));
            _exit(127);
        }
        execvp(argv[0], argv);
        dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    // a child that exits before reading all its input must not kill us with SIGPIPE
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGPIPE, &ign, &old);
    growbuf ob = {0}, eb = {0};
    size_t sent = 0;
    int wfd = pin[1], ofd = pout[0], efd = perr[0], err = 0;
    if (!inlen) {
        close(wfd);
        wfd = -1;
    } else {
        fcntl(wfd, F_SETFL, O_NONBLOCK);
    }
    while ((wfd >= 0 || ofd >= 0 || efd >= 0) && !err) {
        struct pollfd pf[3] = {{wfd, POLLOUT, 0}, {ofd, POLLIN, 0}, {efd, POLLIN, 0}};
        if (poll(pf, 3, -1) < 0) {
            if (errno == EINTR) continue;
            err = errno;
            break;
        }
        if (wfd >= 0 && pf[0].revents) {
            ssize_t w = write(wfd, (const char *)in + sent, inlen - sent);
            if (w > 0) sent += (size_t)w;
            if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == inlen) { // EPIPE: the child's exit says why
                close(wfd);
                wfd = -1;
            }
        }
        int *fds[2] = {&ofd, &efd};
        growbuf *bufs[2] = {&ob, &eb};
        for (int k = 0; k < 2; k++)
            if (*fds[k] >= 0 && pf[k + 1].revents) {
                int r = grow_read(*fds[k], bufs[k]);
                if (r < 0) err = -r;
                if (r == 0) {
                    close(*fds[k]);
                    *fds[k] = -1;
                }
            }
    }
    if (wfd >= 0) close(wfd);
    if (ofd >= 0) close(ofd);
    if (efd >= 0) close(efd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    sigaction(SIGPIPE, &old, NULL);
    int rc = 0;
    char line[300];
    last_line(&eb, line, sizeof line);
    if (err) rc = tk_err_errno(e, err, "%s", argv[0]);
    else if (WIFSIGNALED(status))
        rc = tk_err_set(e, TK_EIO, "%s was killed by signal %d%s%s", argv[0], WTERMSIG(status), line[0] ? ": " : "", line);
    else if (WEXITSTATUS(status))
        rc = tk_err_set(e, TK_EIO, "%s exited with status %d%s%s", argv[0], WEXITSTATUS(status), line[0] ? ": " : "",
                        line);
    free(eb.p);
    if (rc || !out) {
        free(ob.p);
        return rc;
    }
    if (!ob.p && !(ob.p = calloc(1, 1))) return tk_err_errno(e, ENOMEM, "%s", argv[0]);
    *out = ob.p;
    if (outlen) *outlen = ob.n;
    return 0;
}

int ls_path(char *buf, size_t cap, tk_err *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) return tk_err_set(e, TK_EUSAGE, "a path over %zu bytes: %.60s...", cap - 1, buf);
    return 0;
}

int ls_mkdirs(const char *path, tk_err *e) {
    char p[4096];
    TRY(ls_path(p, sizeof p, e, "%s", path));
    for (char *q = p + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            if (mkdir(p, 0755) && errno != EEXIST) return tk_err_errno(e, errno, "%s: cannot create", p);
            *q = '/';
        }
    if (mkdir(p, 0755) && errno != EEXIST) return tk_err_errno(e, errno, "%s: cannot create", p);
    return 0;
}

void ls_rm_tree(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[4096];
        if (!ls_path(p, sizeof p, NULL, "%s/%s", path, de->d_name)) ls_rm_tree(p);
    }
    closedir(d);
    rmdir(path);
}
