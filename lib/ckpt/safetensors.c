// safetensors reader and writer (man/man5/trainkit-checkpoint.5).
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "core/afile.h"
#include "core/crc32c.h"
#include "core/json_text.h"

// The header is capped so a corrupt length cannot make us allocate gigabytes
// (the Python library caps it at 100 MB too).
#define TK_ST_MAX_HEADER (100u << 20)

struct tk_st_writer {
    tk_afile f;
    uint64_t total, written;
    int n, cur;            // tensors; the one the next bytes belong to
    uint64_t *end;         // (n) end of each tensor's bytes in the data section
    long *crc_at;          // (n) file offset of the 8 hex digits of its "crc32c.NAME" placeholder
    uint32_t *crc;         // (n) checksums so far
};

#define CRC_KEY "crc32c."
#define CRC_HOLD "00000000"

int tk_st_dtype_parse(const char *s) {
    static const tk_dtype all[] = {TK_F32, TK_BF16, TK_F16, TK_I32, TK_I64, TK_U8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(s, tk_dtype_name(all[i])) == 0) return (int)all[i];
    return -1;
}

uint64_t tk_st_nbytes(const tk_st_tensor *t) {
    uint64_t n = tk_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
    return n;
}

static void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

int tk_st_writer_open(tk_st_writer **out, const char *path, const tk_st_tensor *t, int n,
                      const json_t *meta, tk_err *e) {
    *out = NULL;
    json_t *h = json_object();
    // The metadata, plus one checksum per tensor ("crc32c.NAME": 8 hex digits), written as a
    // placeholder of the same width now and filled in once the tensor's bytes have passed.
    json_t *md = meta ? json_deep_copy(meta) : json_object();
    for (int i = 0; i < n; i++) {
        char key[sizeof t[i].name + 8];
        snprintf(key, sizeof key, CRC_KEY "%s", t[i].name);
        json_object_set_new(md, key, json_string(CRC_HOLD));
    }
    json_object_set_new(h, "__metadata__", md);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < t[i].ndim; d++) json_array_append_new(shape, json_integer(t[i].shape[d]));
        uint64_t nb = tk_st_nbytes(&t[i]);
        json_object_set_new(h, t[i].name,
                            json_pack("{s:s, s:o, s:[I,I]}", "dtype", tk_dtype_name(t[i].dtype),
                                      "shape", shape, "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + nb)));
        off += nb;
    }
    char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!text) return tk_err_set(e, TK_EINTERNAL, "%s: cannot serialize the header", path);
    size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
    tk_st_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->end = calloc((size_t)n + 1, sizeof *w->end);
        w->crc_at = calloc((size_t)n + 1, sizeof *w->crc_at);
        w->crc = calloc((size_t)n + 1, sizeof *w->crc);
    }
    if (!w || !w->end || !w->crc_at || !w->crc) {
        free(text);
        tk_st_writer_abort(w);
        return tk_err_set(e, TK_EIO, "out of memory");
    }
    w->n = n;
    uint64_t o = 0;
    for (int i = 0; i < n; i++) {
        o += tk_st_nbytes(&t[i]);
        w->end[i] = o;
        // The placeholder's place in the text: the key as jansson writes it, then :"
        json_t *k = json_sprintf(CRC_KEY "%s", t[i].name);
        char *ks = json_dumps(k, JSON_ENCODE_ANY | JSON_COMPACT);
        json_decref(k);
        const char *at = ks ? strstr(text, ks) : NULL;
        if (!at || strncmp(at + strlen(ks), ":\"" CRC_HOLD "\"", 11) != 0) {
            free(ks);
            free(text);
            tk_st_writer_abort(w);
            return tk_err_set(e, TK_EINTERNAL, "%s: checksum placeholder of '%s' not found", path, t[i].name);
        }
        w->crc_at[i] = (long)(8 + (size_t)(at - text) + strlen(ks) + 2);
        free(ks);
    }
    w->total = off;
    while (w->cur < n && w->end[w->cur] == 0) w->cur++; // empty tensors first
    int rc = tk_afile_open(&w->f, path, e);
    if (rc == 0) {
        unsigned char le[8];
        put_le64(le, padded);
        rc = tk_write_all(w->f.fp, le, 8, path, e);
        if (!rc) rc = tk_write_all(w->f.fp, text, len, path, e);
        if (!rc) rc = tk_write_all(w->f.fp, "       ", padded - len, path, e);
        if (rc) tk_afile_abort(&w->f);
    }
    free(text);
    if (rc) {
        w->f.tmp[0] = 0;
        tk_st_writer_abort(w);
        return rc;
    }
    *out = w;
    return 0;
}

int tk_st_writer_put(tk_st_writer *w, const void *data, size_t bytes, tk_err *e) {
    if (w->written + bytes > w->total)
        return tk_err_set(e, TK_EINTERNAL, "%s: more tensor bytes than the header declares",
                          w->f.path);
    // Checksum each tensor's share of the bytes (a put may span tensors).
    const char *p = data;
    uint64_t at = w->written;
    size_t left = bytes;
    while (left > 0 && w->cur < w->n) {
        size_t k = w->end[w->cur] - at < left ? (size_t)(w->end[w->cur] - at) : left;
        w->crc[w->cur] = tk_crc32c(w->crc[w->cur], p, k);
        p += k, at += k, left -= k;
        while (w->cur < w->n && at == w->end[w->cur]) w->cur++;
    }
    w->written += bytes;
    return tk_write_all(w->f.fp, data, bytes, w->f.path, e);
}

int tk_st_writer_commit(tk_st_writer *w, tk_err *e) {
    int rc = 0;
    if (w->written != w->total) {
        rc = tk_err_set(e, TK_EINTERNAL, "%s: %llu of %llu tensor bytes written", w->f.path,
                        (unsigned long long)w->written, (unsigned long long)w->total);
    }
    // The checksums into their placeholders (same width: the header does not move).
    for (int i = 0; !rc && i < w->n; i++) {
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", w->crc[i]);
        if (fseek(w->f.fp, w->crc_at[i], SEEK_SET) != 0)
            rc = tk_err_errno(e, errno, "%s: cannot seek", w->f.tmp);
        else
            rc = tk_write_all(w->f.fp, hex, 8, w->f.path, e);
    }
    if (rc) tk_afile_abort(&w->f);
    else rc = tk_afile_commit(&w->f, e);
    w->f.tmp[0] = 0;
    tk_st_writer_abort(w);
    return rc;
}

void tk_st_writer_abort(tk_st_writer *w) {
    if (!w) return;
    tk_afile_abort(&w->f);
    free(w->end);
    free(w->crc_at);
    free(w->crc);
    free(w);
}

// ---- reading ----

static int bad(tk_err *e, const char *path, uint64_t off, const char *fmt, const char *arg) {
    tk_err_set(e, TK_EDATA, fmt, arg);
    tk_err_where(e, "%s: offset %llu", path, (unsigned long long)off);
    return TK_EDATA;
}

static int cmp_begin(const void *a, const void *b) {
    const tk_st_tensor *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

// Byte offset in the file of the header text for tensor name (for messages): search the raw text.
static uint64_t name_off(const char *text, const char *name) {
    size_t nl = strlen(name);
    for (const char *p = text; (p = strchr(p, '"')) != NULL; p++)
        if (strncmp(p + 1, name, nl) == 0 && p[1 + nl] == '"') return 8 + (uint64_t)(p - text);
    return 8;
}

static int parse_header(tk_st_file *f, char *text, size_t len, tk_err *e) {
    json_error_t je;
    json_t *h = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!h) {
        char msg[4 * JSON_ERROR_TEXT_LENGTH];
        tk_err_set(e, TK_EDATA, "invalid JSON header: %s", tk_json_err_text(msg, sizeof msg, &je));
        // jansson counts the offending character as read
        tk_err_where(e, "%s: offset %llu", f->path,
                     (unsigned long long)(8 + (je.position > 0 ? je.position - 1 : 0)));
        return TK_EDATA;
    }
    int rc = 0;
    if (!json_is_object(h)) {
        rc = bad(e, f->path, 8, "the header is not a JSON object%s", "");
        goto out;
    }
    f->t = calloc(json_object_size(h) + 1, sizeof *f->t);
    if (!f->t) {
        rc = tk_err_set(e, TK_EIO, "out of memory");
        goto out;
    }
    const char *key;
    json_t *v;
    uint64_t data_size = f->file_size - f->data_off;
    json_object_foreach(h, key, v) {
        uint64_t at = name_off(text, key);
        if (strcmp(key, "__metadata__") == 0) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(v)) { rc = bad(e, f->path, at, "__metadata__ is not an object%s", ""); goto out; }
            json_object_foreach(v, mk, mv) if (!json_is_string(mv)) {
                rc = bad(e, f->path, at, "__metadata__ value of '%s' is not a string", mk);
                goto out;
            }
            f->meta = json_incref(v);
            continue;
        }
        tk_st_tensor *t = &f->t[f->n];
        if (strlen(key) >= sizeof t->name) { rc = bad(e, f->path, at, "tensor name too long: '%.60s'", key); goto out; }
        strcpy(t->name, key);
        json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
               *of = json_object_get(v, "data_offsets");
        if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(sh) || !json_is_array(of) ||
            json_array_size(of) != 2 || !json_is_integer(json_array_get(of, 0)) ||
            !json_is_integer(json_array_get(of, 1))) {
            rc = bad(e, f->path, at, "tensor '%s' needs dtype (string), shape (array) and data_offsets ([begin, end])", key);
            goto out;
        }
        int dtype = tk_st_dtype_parse(json_string_value(dt));
        if (dtype < 0) { rc = bad(e, f->path, at, "unknown dtype '%s'", json_string_value(dt)); goto out; }
        t->dtype = (tk_dtype)dtype;
        if (json_array_size(sh) > TK_ST_MAX_DIMS) { rc = bad(e, f->path, at, "tensor '%s' has too many dimensions", key); goto out; }
        t->ndim = (int)json_array_size(sh);
        for (int d = 0; d < t->ndim; d++) {
            json_t *x = json_array_get(sh, d);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > ((json_int_t)1 << 40)) {
                rc = bad(e, f->path, at, "tensor '%s': bad shape", key);
                goto out;
            }
            t->shape[d] = json_integer_value(x);
        }
        uint64_t nb = tk_dtype_size(t->dtype); // shape's product: 4 dimensions of 2^40 wrap around
        for (int d = 0; d < t->ndim; d++)
            if (__builtin_mul_overflow(nb, (uint64_t)t->shape[d], &nb)) {
                rc = bad(e, f->path, at, "tensor '%s': the shape's size overflows", key);
                goto out;
            }
        json_int_t b = json_integer_value(json_array_get(of, 0)), en = json_integer_value(json_array_get(of, 1));
        if (b < 0 || en < b) { rc = bad(e, f->path, at, "tensor '%s': data_offsets begin > end", key); goto out; }
        t->begin = (uint64_t)b;
        t->end = (uint64_t)en;
        if (t->end > data_size) { rc = bad(e, f->path, at, "tensor '%s' ends past the end of the file", key); goto out; }
        if (t->end - t->begin != tk_st_nbytes(t)) { rc = bad(e, f->path, at, "tensor '%s': data_offsets do not match shape and dtype", key); goto out; }
        f->n++;
    }
    if (!f->meta) f->meta = json_object();
    for (int i = 0; i < f->n; i++) { // "crc32c.NAME": 8 hex digits, when the writer gave one
        char key[sizeof f->t[i].name + 8];
        snprintf(key, sizeof key, CRC_KEY "%s", f->t[i].name);
        const char *v = json_string_value(json_object_get(f->meta, key));
        if (!v) continue;
        char *end;
        unsigned long c = strtoul(v, &end, 16);
        if (strlen(v) != 8 || *end) {
            rc = bad(e, f->path, name_off(text, key), "metadata '%s' is not 8 hex digits", key);
            goto out;
        }
        f->t[i].has_crc = 1;
        f->t[i].crc = (uint32_t)c;
        f->ncrc++;
    }
    // Overlap check on a sorted copy (the header order is kept for users).
    tk_st_tensor *s = malloc((size_t)(f->n + 1) * sizeof *s);
    if (!s) { rc = tk_err_set(e, TK_EIO, "out of memory"); goto out; }
    memcpy(s, f->t, (size_t)f->n * sizeof *s);
    qsort(s, (size_t)f->n, sizeof *s, cmp_begin);
    uint64_t reach = f->n ? s[0].end : 0; // the furthest end so far: an empty tensor between two hides nothing
    for (int i = 1; i < f->n; reach = s[i].end > reach ? s[i].end : reach, i++)
        if (s[i].begin < reach && s[i].end > s[i].begin) {
            rc = bad(e, f->path, name_off(text, s[i].name), "tensor '%s' overlaps another tensor", s[i].name);
            break;
        }
    free(s);
out:
    json_decref(h);
    return rc;
}

int tk_st_open(tk_st_file **out, const char *path, tk_err *e) {
    *out = NULL;
    tk_st_file *f = calloc(1, sizeof *f);
    if (!f) return tk_err_set(e, TK_EIO, "out of memory");
    snprintf(f->path, sizeof f->path, "%s", path);
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        int err = errno;
        free(f);
        return tk_err_errno(e, err, "%s: cannot open", path);
    }
    struct stat st;
    int rc = 0;
    char *text = NULL;
    if (fstat(f->fd, &st) != 0) {
        rc = tk_err_errno(e, errno, "%s: cannot stat", path);
        goto fail;
    }
    f->file_size = (uint64_t)st.st_size;
    unsigned char le[8];
    if (f->file_size < 8) {
        rc = bad(e, path, f->file_size, "file too short for a safetensors header (%s8 bytes needed)", "");
        goto fail;
    }
    if ((rc = tk_pread_all(f->fd, le, 8, 0, path, e))) goto fail;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | le[i];
    if (hlen > f->file_size - 8 || hlen > TK_ST_MAX_HEADER) {
        char msg[96];
        snprintf(msg, sizeof msg, "%llu", (unsigned long long)hlen);
        rc = bad(e, path, 0, "header length %s exceeds the file size", msg);
        goto fail;
    }
    f->data_off = 8 + hlen;
    text = malloc(hlen + 1);
    if (!text) {
        rc = tk_err_set(e, TK_EIO, "out of memory");
        goto fail;
    }
    if ((rc = tk_pread_all(f->fd, text, hlen, 8, path, e))) goto fail;
    text[hlen] = 0;
    if ((rc = parse_header(f, text, hlen, e))) goto fail;
    free(text);
    *out = f;
    return 0;
fail:
    free(text);
    tk_st_close(f);
    return rc;
}

void tk_st_close(tk_st_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    free(f->t);
    json_decref(f->meta);
    free(f);
}

const tk_st_tensor *tk_st_find(const tk_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

const char *tk_st_meta(const tk_st_file *f, const char *key) {
    return json_string_value(json_object_get(f->meta, key));
}

int tk_st_read(const tk_st_file *f, const tk_st_tensor *t, uint64_t off, void *dst, size_t n,
               tk_err *e) {
    if (off + n > t->end - t->begin)
        return tk_err_set(e, TK_EINTERNAL, "%s: read past tensor '%s'", f->path, t->name);
    return tk_pread_all(f->fd, dst, n, (long long)(f->data_off + t->begin + off), f->path, e);
}

int tk_st_check(const tk_st_file *f, const tk_st_tensor *t, uint32_t crc, tk_err *e) {
    if (!t->has_crc || crc == t->crc) return 0;
    tk_err_set(e, TK_EDATA, "tensor '%s': checksum mismatch (the header says crc32c %08x, the data has %08x)",
               t->name, t->crc, crc);
    tk_err_where(e, "%s: offset %llu", f->path, (unsigned long long)(f->data_off + t->begin));
    return tk_err_hint(e, "the file was damaged after it was written: use another checkpoint");
}

int tk_st_read_verified(const tk_st_file *f, const tk_st_tensor *t, tk_st_chunk_fn fn, void *arg, void *buf,
                        size_t buf_bytes, tk_err *e) {
    uint64_t nb = t->end - t->begin;
    uint32_t crc = 0;
    for (uint64_t off = 0; off < nb; off += buf_bytes) {
        size_t k = nb - off < buf_bytes ? (size_t)(nb - off) : buf_bytes;
        TRY(tk_st_read(f, t, off, buf, k, e));
        crc = tk_crc32c(crc, buf, k);
        TRY(fn(arg, off, buf, k, e));
    }
    return tk_st_check(f, t, crc, e);
}

int tk_st_read_all(const tk_st_file *f, const tk_st_tensor *t, void *dst, tk_err *e) {
    size_t nb = (size_t)(t->end - t->begin);
    TRY(tk_st_read(f, t, 0, dst, nb, e));
    return tk_st_check(f, t, tk_crc32c(0, dst, nb), e);
}
