// Reading result files and benchmark sets (a directory of result_*.txt, as MLCommons' result
// summarizer and RCP checker see it): file contents, the set's scaling.json and the size of the
// system it ran on. See set.h.
#include "compliance/set.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int lc_read_file(const char *path, char **buf, size_t *len, tk_err *e) {
    int fd = strcmp(path, "-") ? open(path, O_RDONLY) : dup(0); // "-": standard input
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int err = errno;
        if (fd >= 0) close(fd);
        tk_err_errno(e, err, "cannot read");
        e->code = TK_EDATA; // unreadable input is exit 3 (man 1 log-check)
        return tk_err_where(e, "%s", path);
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        tk_err_set(e, TK_EDATA, "is a directory");
        return tk_err_where(e, "%s", path);
    }
    size_t cap = st.st_size > 0 && S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) {
            close(fd);
            return tk_err_set(e, TK_EIO, "out of memory reading %s", path);
        }
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
            continue;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int err = errno;
            free(b);
            close(fd);
            tk_err_errno(e, err, "cannot read");
            e->code = TK_EDATA;
            return tk_err_where(e, "%s", path);
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = n;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Accelerators of the system a set belongs to: <org>/systems/<system>.json beside <org>/results/<system>/<bench>.
static long system_accelerators(const char *dir) {
    char real[PATH_MAX], path[PATH_MAX + 64];
    if (!realpath(dir, real)) return 0;
    char *b = strrchr(real, '/');
    if (!b) return 0;
    *b = 0; // .../results/<system>
    char *sys = strrchr(real, '/');
    if (!sys) return 0;
    *sys++ = 0;
    char *res = strrchr(real, '/');
    if (!res) return 0;
    *res = 0;
    snprintf(path, sizeof path, "%s/systems/%s.json", real, sys);
    json_t *j = json_load_file(path, 0, NULL);
    if (!j) return 0;
    long v[2] = {0, 0};
    const char *f[2] = {"number_of_nodes", "accelerators_per_node"};
    for (int i = 0; i < 2; i++) {
        json_t *x = json_object_get(j, f[i]);
        if (json_is_integer(x)) v[i] = (long)json_integer_value(x);
        else if (json_is_string(x)) v[i] = strtol(json_string_value(x), NULL, 10);
    }
    json_decref(j);
    return v[0] > 0 ? v[0] * (v[1] > 1 ? v[1] : 1) : 0; // the summarizer's nodes * max(per_node, 1)
}

// scaling.json: {"scaling_factor": x}, which the summarizer multiplies the score by.
static int read_scaling(lc_set *s, tk_err *e) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/scaling.json", s->dir);
    struct stat st;
    s->scaling = 1.0;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    json_error_t je;
    json_t *j = json_load_file(path, JSON_DECODE_ANY, &je);
    if (!j) {
        tk_err_set(e, TK_EDATA, "scaling.json does not parse: %s", je.text);
        return tk_err_where(e, "%s: line %d", path, je.line);
    }
    json_t *f = json_object_get(j, "scaling_factor");
    if (!json_is_number(f)) {
        json_decref(j);
        tk_err_set(e, TK_EDATA, "scaling.json has no number \"scaling_factor\"");
        return tk_err_where(e, "%s", path);
    }
    s->has_scaling = 1;
    s->scaling = json_number_value(f);
    json_decref(j);
    return 0;
}

int lc_set_open(const char *dir, lc_set **out, tk_err *e) {
    lc_set *s = calloc(1, sizeof *s);
    if (!s || !(s->a = lc_arena_new())) {
        free(s);
        return tk_err_set(e, TK_EIO, "out of memory");
    }
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    DIR *dp = opendir(dir);
    if (!dp) {
        tk_err_errno(e, errno, "cannot open the directory");
        e->code = TK_EDATA;
        tk_err_where(e, "%s", dir);
        lc_set_free(s);
        return TK_EDATA;
    }
    struct dirent *de;
    size_t cap = 0;
    int rc = 0;
    while ((de = readdir(dp)))
        if (!fnmatch("result_*.txt", de->d_name, FNM_PERIOD)) {
            if ((size_t)s->n == cap) {
                cap = cap ? 2 * cap : 16;
                lc_set_file *nf = realloc(s->files, cap * sizeof *nf);
                if (!nf) {
                    rc = tk_err_set(e, TK_EIO, "out of memory");
                    break;
                }
                s->files = nf;
            }
            memset(&s->files[s->n], 0, sizeof *s->files);
            if (!(s->files[s->n++].name = strdup(de->d_name))) {
                rc = tk_err_set(e, TK_EIO, "out of memory");
                break;
            }
        }
    closedir(dp);
    if (!rc) qsort(s->files, (size_t)s->n, sizeof *s->files, cmp_str); // name first in the struct
    for (int i = 0; i < s->n && !rc; i++) {
        lc_set_file *f = &s->files[i];
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, f->name);
        int r = lc_read_file(path, &f->buf, &f->len, &f->err);
        if (r && r != TK_EDATA) {
            *e = f->err;
            rc = r;
        } else if (!r && lc_log_parse(s->a, f->buf, f->len, &f->log)) {
            rc = tk_err_set(e, TK_EIO, "out of memory");
        }
        f->readable = !r;
    }
    if (!rc) rc = read_scaling(s, e);
    if (rc) {
        lc_set_free(s);
        return rc;
    }
    s->accelerators = system_accelerators(dir);
    *out = s;
    return 0;
}

void lc_set_free(lc_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        free(s->files[i].name);
        free(s->files[i].buf);
    }
    free(s->files);
    lc_arena_free(s->a);
    free(s);
}
