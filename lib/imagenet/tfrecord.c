// TFRecord files and tf.train.Example records (imagenet.h), read with our own code: the framing
// with its masked CRC-32C checks, and a protobuf wire-format walker for the few Example fields
// prep needs. Everything read is checked against the bytes actually there.
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imagenet/imagenet.h"

// ---- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), slicing by 8 ----------------------
static uint32_t crc_tab[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++) crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 255];
}

uint32_t imagenet_crc32c(uint32_t crc, const void *data, size_t n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, crc_init);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = crc_tab[7][lo & 255] ^ crc_tab[6][(lo >> 8) & 255] ^ crc_tab[5][(lo >> 16) & 255] ^ crc_tab[4][lo >> 24] ^
            crc_tab[3][p[4]] ^ crc_tab[2][p[5]] ^ crc_tab[1][p[6]] ^ crc_tab[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 255];
    return ~c;
}

// ---- framing ------------------------------------------------------------------------------------
#define MAX_RECORD ((uint64_t)256 << 20)

struct imagenet_tfrecord {
    FILE *f;
    char name[4096];
    uint64_t pos;
    uint8_t *buf;
    size_t cap;
};

static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

int imagenet_tfrecord_open(imagenet_tfrecord **tp, const char *path, tk_err *e) {
    *tp = NULL;
    imagenet_tfrecord *t = calloc(1, sizeof *t);
    if (!t) return tk_err_errno(e, ENOMEM, "out of memory");
    if (!(t->f = fopen(path, "rb"))) {
        int err = errno;
        free(t);
        return tk_err_errno(e, err, "%s: cannot open", path);
    }
    snprintf(t->name, sizeof t->name, "%s", path);
    *tp = t;
    return 0;
}

static int bad(const imagenet_tfrecord *t, uint64_t off, tk_err *e, const char *what) {
    tk_err_set(e, TK_EDATA, "bad TFRecord: %s", what);
    return tk_err_where(e, "%s: offset %llu", t->name, (unsigned long long)off);
}

// Reads exactly n bytes; 1 = got them, 0 = clean end before the first byte, -1 = short.
static int get(imagenet_tfrecord *t, void *p, size_t n) {
    size_t k = fread(p, 1, n, t->f);
    t->pos += k;
    return k == n ? 1 : k == 0 && !ferror(t->f) ? 0 : -1;
}

int imagenet_tfrecord_next(imagenet_tfrecord *t, const uint8_t **data, size_t *n, uint64_t *offset, tk_err *e) {
    *data = NULL;
    *n = 0;
    uint64_t start = t->pos;
    *offset = start;
    uint8_t h[12];
    int r = get(t, h, 12);
    if (ferror(t->f)) return tk_err_errno(e, errno ? errno : EIO, "%s: read failed", t->name);
    if (r == 0) return 0;
    if (r < 0) return bad(t, start, e, "truncated record header");
    if (imagenet_crc_mask(imagenet_crc32c(0, h, 8)) != get32(h + 8)) return bad(t, start, e, "length checksum mismatch");
    uint64_t len = get64(h);
    if (len > MAX_RECORD) return bad(t, start, e, "a record larger than 256 MiB");
    if (len + 4 > t->cap) {
        uint8_t *nb = realloc(t->buf, (size_t)len + 4);
        if (!nb) return tk_err_errno(e, ENOMEM, "out of memory for a %llu-byte record", (unsigned long long)len);
        t->buf = nb;
        t->cap = (size_t)len + 4;
    }
    if (get(t, t->buf, (size_t)len + 4) != 1) {
        if (ferror(t->f)) return tk_err_errno(e, errno ? errno : EIO, "%s: read failed", t->name);
        return bad(t, start, e, "truncated record");
    }
    if (imagenet_crc_mask(imagenet_crc32c(0, t->buf, (size_t)len)) != get32(t->buf + len))
        return bad(t, start + 12, e, "data checksum mismatch");
    *data = t->buf;
    *n = (size_t)len;
    return 0;
}

void imagenet_tfrecord_close(imagenet_tfrecord *t) {
    if (!t) return;
    if (t->f) fclose(t->f);
    free(t->buf);
    free(t);
}

int imagenet_is_tfrecord(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint8_t h[12];
    int ok = fread(h, 1, 12, f) == 12 && imagenet_crc_mask(imagenet_crc32c(0, h, 8)) == get32(h + 8);
    fclose(f);
    return ok;
}

// ---- tf.train.Example ---------------------------------------------------------------------------
// Protobuf wire format: each field is a varint key (field number << 3 | wire type) and a value:
// 0 varint, 1 8 bytes, 2 a varint length then that many bytes, 5 4 bytes. Example: features (1);
// Features: feature (1), a map entry {key (1): string, value (2): Feature}; Feature: bytes_list (1),
// float_list (2), int64_list (3); BytesList: value (1) bytes, repeated; Int64List: value (1),
// repeated int64, packed (one length-delimited run of varints) or not.
typedef struct {
    const uint8_t *p, *end;
} span;

static int varint(span *s, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (s->p >= s->end) return -1;
        uint8_t b = *s->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

// The next field of s: its number, wire type, and for type 2 its bytes in *sub (for 0, *v).
static int field(span *s, uint32_t *num, int *type, span *sub, uint64_t *v, const char **why) {
    uint64_t key;
    if (varint(s, &key)) return *why = "truncated field key", -1;
    *num = (uint32_t)(key >> 3);
    *type = (int)(key & 7);
    switch (*type) {
    case 0: if (varint(s, v)) return *why = "truncated varint", -1; return 0;
    case 1: if (s->end - s->p < 8) return *why = "truncated fixed64", -1; s->p += 8; return 0;
    case 5: if (s->end - s->p < 4) return *why = "truncated fixed32", -1; s->p += 4; return 0;
    case 2: {
        uint64_t len;
        if (varint(s, &len) || len > (uint64_t)(s->end - s->p)) return *why = "a length past the end of the message", -1;
        *sub = (span){s->p, s->p + len};
        s->p += len;
        return 0;
    }
    default: return *why = "an unsupported wire type (groups)", -1;
    }
}

// The first value of a BytesList or Int64List (kind 1 or 3) in a Feature.
static int feature_value(span f, int want, const uint8_t **bp, size_t *bn, int64_t *iv, int *found, const char **why) {
    while (f.p < f.end) {
        uint32_t num;
        int type;
        span sub = {0};
        uint64_t v;
        if (field(&f, &num, &type, &sub, &v, why)) return -1;
        if ((int)num != want || type != 2) continue;
        while (sub.p < sub.end) { // the list
            uint32_t ln;
            int lt;
            span val = {0};
            if (field(&sub, &ln, &lt, &val, &v, why)) return -1;
            if (ln != 1) continue;
            if (want == 1 && lt == 2) {
                *bp = val.p;
                *bn = (size_t)(val.end - val.p);
                *found = 1;
                return 0;
            }
            if (want == 3 && lt == 0) {
                *iv = (int64_t)v;
                *found = 1;
                return 0;
            }
            if (want == 3 && lt == 2) { // packed
                if (val.p < val.end && varint(&val, &v) == 0) {
                    *iv = (int64_t)v;
                    *found = 1;
                    return 0;
                }
                return *why = "an empty or truncated packed int64 list", -1;
            }
        }
    }
    return 0;
}

int imagenet_example_parse(const uint8_t *p, size_t n, imagenet_example *x, tk_err *e) {
    memset(x, 0, sizeof *x);
    x->label = -1;
    span ex = {p, p + n};
    const char *why = NULL;
    int enc = 0;
    while (ex.p < ex.end) {
        uint32_t num;
        int type;
        span feats = {0};
        uint64_t v;
        if (field(&ex, &num, &type, &feats, &v, &why)) goto fail;
        if (num != 1 || type != 2) continue;
        while (feats.p < feats.end) { // map entries
            span entry = {0};
            if (field(&feats, &num, &type, &entry, &v, &why)) goto fail;
            if (num != 1 || type != 2) continue;
            span key = {0}, val = {0};
            int have_val = 0;
            while (entry.p < entry.end) {
                span sub = {0};
                if (field(&entry, &num, &type, &sub, &v, &why)) goto fail;
                if (num == 1 && type == 2) key = sub;
                if (num == 2 && type == 2) val = sub, have_val = 1;
            }
            if (!have_val || !key.p) continue;
            size_t kl = (size_t)(key.end - key.p);
#define KEY(s) (kl == sizeof(s) - 1 && memcmp(key.p, s, kl) == 0)
            int found = 0;
            if (KEY("image/encoded")) {
                if (feature_value(val, 1, &x->encoded, &x->encoded_len, NULL, &found, &why)) goto fail;
                enc |= found;
            } else if (KEY("image/class/label")) {
                if (feature_value(val, 3, NULL, NULL, &x->label, &found, &why)) goto fail;
            } else if (KEY("image/filename")) {
                if (feature_value(val, 1, &x->filename, &x->filename_len, NULL, &found, &why)) goto fail;
            } else if (KEY("image/class/synset")) {
                if (feature_value(val, 1, &x->synset, &x->synset_len, NULL, &found, &why)) goto fail;
            }
#undef KEY
        }
    }
    if (!enc) {
        why = "no image/encoded bytes";
        goto fail;
    }
    return 0;
fail:
    return tk_err_set(e, TK_EDATA, "bad Example: %s", why);
}
