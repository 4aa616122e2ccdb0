// Line input over plain, gzip or zstd files: the format is detected from the first bytes
// (1f 8b = gzip, 28 b5 2f fd = zstd), not from the name, so renamed files still read.
// Concatenated gzip members and zstd frames are read through, as gzip -d and zstd -d do.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "core/lines.h"

#define IN_CAP (1 << 16)
#define MAX_LINE (1 << 20)

enum { PLAIN, GZIP, ZSTD };

struct tk_lines {
    char name[4096];
    int fd, own_fd, kind, eof_in, eof_out;
    uint8_t in[IN_CAP];
    size_t in_pos, in_len;
    uint64_t consumed;       // compressed bytes consumed
    z_stream z;
    int z_live, z_ended;     // z_ended: the last gzip member ended cleanly
    ZSTD_DStream *zs;
    size_t zs_ret;           // last ZSTD_decompressStream return (0 = frame complete)
    char *buf;               // decompressed text, [start, end)
    size_t cap, start, end;
    uint64_t lineno;
};

static int fill_in(tk_lines *l, tk_err *e) {
    if (l->in_pos < l->in_len || l->eof_in) return 0;
    ssize_t k;
    while ((k = read(l->fd, l->in, IN_CAP)) < 0 && errno == EINTR) {}
    if (k < 0) return tk_err_errno(e, errno, "%s: read failed", l->name);
    l->in_pos = 0;
    l->in_len = (size_t)k;
    if (k == 0) l->eof_in = 1;
    return 0;
}

static int corrupt(tk_lines *l, const char *what, tk_err *e) {
    tk_err_set(e, TK_EDATA, "%s", what);
    return tk_err_where(e, "%s: offset %llu", l->name, (unsigned long long)l->consumed);
}

// Appends decompressed bytes after buf[end]; sets eof_out at the end of the input.
static int produce(tk_lines *l, tk_err *e) {
    TRY(fill_in(l, e));
    size_t room = l->cap - l->end;
    if (l->kind == PLAIN) {
        size_t k = l->in_len - l->in_pos < room ? l->in_len - l->in_pos : room;
        memcpy(l->buf + l->end, l->in + l->in_pos, k);
        l->in_pos += k;
        l->consumed += k;
        l->end += k;
        if (l->eof_in) l->eof_out = 1;
        return 0;
    }
    if (l->kind == GZIP) {
        if (l->eof_in) {
            if (!l->z_ended) return corrupt(l, "truncated gzip data", e);
            l->eof_out = 1;
            return 0;
        }
        if (l->z_ended) { // another member follows
            inflateReset(&l->z);
            l->z_ended = 0;
        }
        l->z.next_in = l->in + l->in_pos;
        l->z.avail_in = (uInt)(l->in_len - l->in_pos);
        l->z.next_out = (Bytef *)l->buf + l->end;
        l->z.avail_out = (uInt)room;
        int rc = inflate(&l->z, Z_NO_FLUSH);
        size_t used = (l->in_len - l->in_pos) - l->z.avail_in;
        l->in_pos += used;
        l->consumed += used;
        l->end += room - l->z.avail_out;
        if (rc == Z_STREAM_END) l->z_ended = 1;
        else if (rc != Z_OK && rc != Z_BUF_ERROR)
            return corrupt(l, l->z.msg ? l->z.msg : "corrupt gzip data", e);
        return 0;
    }
    if (l->eof_in) {
        if (l->zs_ret != 0) return corrupt(l, "truncated zstd data", e);
        l->eof_out = 1;
        return 0;
    }
    ZSTD_inBuffer in = {l->in + l->in_pos, l->in_len - l->in_pos, 0};
    ZSTD_outBuffer out = {l->buf + l->end, room, 0};
    size_t rc = ZSTD_decompressStream(l->zs, &out, &in);
    l->in_pos += in.pos;
    l->consumed += in.pos;
    l->end += out.pos;
    if (ZSTD_isError(rc)) {
        char what[160];
        snprintf(what, sizeof what, "corrupt zstd data: %s", ZSTD_getErrorName(rc));
        return corrupt(l, what, e);
    }
    l->zs_ret = rc;
    return 0;
}

int tk_lines_open(tk_lines **lp, const char *path, tk_err *e) {
    *lp = NULL;
    tk_lines *l = calloc(1, sizeof *l);
    if (!l) return tk_err_errno(e, ENOMEM, "out of memory");
    if (strcmp(path, "-") == 0) {
        snprintf(l->name, sizeof l->name, "<stdin>");
    } else {
        l->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (l->fd < 0) {
            int err = errno;
            free(l);
            return tk_err_errno(e, err, "%s: cannot open", path);
        }
        l->own_fd = 1;
        snprintf(l->name, sizeof l->name, "%s", path);
    }
    l->cap = 1 << 18;
    l->buf = malloc(l->cap);
    int rc = l->buf ? 0 : tk_err_errno(e, ENOMEM, "out of memory");
    // Read until 4 bytes are there (or the input ends) to see the magic.
    while (!rc && l->in_len < 4 && !l->eof_in) {
        ssize_t k;
        while ((k = read(l->fd, l->in + l->in_len, IN_CAP - l->in_len)) < 0 && errno == EINTR) {}
        if (k < 0) rc = tk_err_errno(e, errno, "%s: read failed", l->name);
        else if (k == 0) l->eof_in = 1;
        else l->in_len += (size_t)k;
    }
    if (!rc && l->in_len >= 2 && l->in[0] == 0x1f && l->in[1] == 0x8b) {
        l->kind = GZIP;
        if (inflateInit2(&l->z, 16 + MAX_WBITS) != Z_OK) rc = tk_err_errno(e, ENOMEM, "out of memory");
        l->z_live = !rc;
    } else if (!rc && l->in_len >= 4 && l->in[0] == 0x28 && l->in[1] == 0xb5 && l->in[2] == 0x2f &&
               l->in[3] == 0xfd) {
        l->kind = ZSTD;
        l->zs = ZSTD_createDStream();
        if (!l->zs) rc = tk_err_errno(e, ENOMEM, "out of memory");
    }
    if (rc) {
        tk_lines_close(l);
        return rc;
    }
    *lp = l;
    return 0;
}

int tk_lines_next(tk_lines *l, const char **line, size_t *len, int *newline, tk_err *e) {
    *line = NULL;
    *len = 0;
    *newline = 0;
    size_t scan = l->start;
    for (;;) {
        char *nl = memchr(l->buf + scan, '\n', l->end - scan);
        if (nl) {
            *line = l->buf + l->start;
            *len = (size_t)(nl - *line);
            *newline = 1;
            l->start = (size_t)(nl - l->buf) + 1;
            l->lineno++;
            return 0;
        }
        if (l->eof_out) {
            if (l->end > l->start) {
                *line = l->buf + l->start;
                *len = l->end - l->start;
                l->start = l->end;
                l->lineno++;
            }
            return 0;
        }
        scan = l->end;
        if (l->start > 0 && l->end == l->cap) { // move the partial line to the front
            memmove(l->buf, l->buf + l->start, l->end - l->start);
            scan -= l->start;
            l->end -= l->start;
            l->start = 0;
        }
        if (l->end == l->cap) {
            if (l->cap >= MAX_LINE) {
                tk_err_set(e, TK_EDATA, "line longer than %d bytes", MAX_LINE);
                return tk_err_where(e, "%s: line %llu", l->name, (unsigned long long)l->lineno + 1);
            }
            char *nb = realloc(l->buf, l->cap * 2);
            if (!nb) return tk_err_errno(e, ENOMEM, "out of memory");
            l->buf = nb;
            l->cap *= 2;
        }
        TRY(produce(l, e));
    }
}

uint64_t tk_lines_lineno(const tk_lines *l) { return l->lineno; }
const char *tk_lines_name(const tk_lines *l) { return l->name; }
uint64_t tk_lines_bytes_in(const tk_lines *l) { return l->consumed; }

void tk_lines_close(tk_lines *l) {
    if (!l) return;
    if (l->z_live) inflateEnd(&l->z);
    ZSTD_freeDStream(l->zs);
    if (l->own_fd) close(l->fd);
    free(l->buf);
    free(l);
}
