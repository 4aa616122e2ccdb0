// .tks reader: random access over the trailing index for seekable files (pread, so
// tks_reader_read_frame is thread-safe), sequential block-by-block reading for pipes. Every check
// of man/man5/tks.5 "READING AND CORRUPTION" lives here.
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "core/afile.h"
#include "tks/tks_internal.h"

struct tks_reader {
    char name[4096];
    int fd, own_fd, seekable;
    tks_schema s;
    size_t frame_records;  // from the header: no frame holds more
    uint64_t payload;      // offset of the first frame block
    uint64_t size;         // file size (seekable files)
    tks_frame_info *fr;
    size_t nfr, frcap;
    uint64_t nrecords;     // total, once known
    size_t max_records;
    size_t next;           // next frame for tks_reader_next
    // streaming state
    uint64_t pos;
    uint64_t seen_records;
    int done;
    uint8_t *cbuf;
    size_t ccap;
    ZSTD_DCtx *dctx;
};

#define FAIL_AT(off, code, ...)                                                                    \
    (tk_err_set(e, code, __VA_ARGS__), tk_err_where(e, "%s: offset %llu", r->name,                \
                                                    (unsigned long long)(off)))

// Stream reads: exactly n bytes, or "truncated stream" at the offset where bytes are missing.
static int sread(tks_reader *r, void *buf, size_t n, tk_err *e) {
    uint8_t *p = buf;
    while (n) {
        ssize_t k = read(r->fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            tk_err_errno(e, errno, "read failed");
            return tk_err_where(e, "%s: offset %llu", r->name, (unsigned long long)r->pos);
        }
        if (k == 0) return FAIL_AT(r->pos, TK_EDATA, "truncated stream");
        p += k;
        n -= (size_t)k;
        r->pos += (uint64_t)k;
    }
    return 0;
}

static int rread(tks_reader *r, void *buf, size_t n, uint64_t off, tk_err *e) {
    if (!r->seekable) return sread(r, buf, n, e);
    if (off + n > r->size) return FAIL_AT(r->size, TK_EDATA, "truncated file");
    return tk_pread_all(r->fd, buf, n, (long long)off, r->name, e);
}

static int push_frame(tks_reader *r, tks_frame_info fi, tk_err *e) {
    if (r->nfr == r->frcap) {
        size_t ncap = r->frcap ? 2 * r->frcap : 64;
        tks_frame_info *n = realloc(r->fr, ncap * sizeof *n);
        if (!n) return tk_err_errno(e, ENOMEM, "out of memory");
        r->fr = n;
        r->frcap = ncap;
    }
    r->fr[r->nfr++] = fi;
    if (fi.nrecords > r->max_records) r->max_records = fi.nrecords;
    return 0;
}

static int read_header(tks_reader *r, tk_err *e) {
    uint8_t h[TKS_HEADER_BYTES];
    if (r->seekable && r->size < TKS_HEADER_BYTES) { // a short non-.tks file is still "bad magic"
        if (r->size >= 8 && tk_pread_all(r->fd, h, 8, 0, r->name, e) == 0 && memcmp(h, TKS_MAGIC, 8) != 0)
            return FAIL_AT(0, TK_EDATA, "bad magic (not a .tks file)");
        return FAIL_AT(0, TK_EDATA, "truncated file");
    }
    TRY(rread(r, h, sizeof h, 0, e));
    if (memcmp(h, TKS_MAGIC, 8) != 0) return FAIL_AT(0, TK_EDATA, "bad magic (not a .tks file)");
    uint32_t version = tks_get32(h + 8);
    if (version != TKS_VERSION && version != TKS_VERSION_RAGGED)
        return FAIL_AT(8, TK_EDATA, "unsupported version %u (this reader knows versions %d and %d)", version,
                       TKS_VERSION, TKS_VERSION_RAGGED);
    if (tks_get32(h + 12) != 0) return FAIL_AT(12, TK_EDATA, "unsupported flags");
    uint32_t slen = tks_get32(h + 16);
    if (slen < 2 || slen > TKS_MAX_SCHEMA)
        return FAIL_AT(16, TK_EDATA, "schema length %u out of range", slen);
    char *js = malloc(slen);
    if (!js) return tk_err_errno(e, ENOMEM, "out of memory");
    int rc = rread(r, js, slen, TKS_HEADER_BYTES, e);
    if (!rc && tks_crc(tks_crc(0, h, 20), js, slen) != tks_get32(h + 20))
        rc = FAIL_AT(20, TK_EDATA, "header checksum mismatch");
    if (!rc && (rc = tks_schema_from_json(&r->s, &r->frame_records, js, slen, e)))
        tk_err_where(e, "%s: offset %d", r->name, TKS_HEADER_BYTES);
    if (!rc && (r->s.nragged > 0) != (version == TKS_VERSION_RAGGED))
        rc = FAIL_AT(TKS_HEADER_BYTES, TK_EDATA, "bad schema: %s", r->s.nragged ?
                     "a ragged field in a version 1 file" : "a version 2 file without a ragged field");
    free(js);
    r->payload = TKS_HEADER_BYTES + (uint64_t)slen;
    return rc;
}

// Checks the index entries (ib: isize bytes) against the frames they describe; index_offset is
// where the index block starts. Fills r->fr.
static int load_index(tks_reader *r, const uint8_t *ib, uint64_t nframes, uint64_t index_offset,
                      uint64_t nrecords, tk_err *e) {
    uint64_t expect = r->payload + TKS_BLOCK_BYTES, first = 0;
    for (uint64_t i = 0; i < nframes; i++) {
        const uint8_t *p = ib + i * TKS_ENTRY_BYTES;
        tks_frame_info fi = {tks_get64(p), tks_get64(p + 8), tks_get64(p + 16), tks_get32(p + 24)};
        if (fi.offset != expect || fi.csize < 1 || fi.csize > TKS_MAX_COUNT ||
            fi.csize > index_offset - fi.offset || fi.first_record != first || fi.nrecords < 1 ||
            fi.nrecords > r->frame_records || tks_get32(p + 28) != 0)
            return FAIL_AT(index_offset + TKS_BLOCK_BYTES + i * TKS_ENTRY_BYTES, TK_EDATA,
                           "index entry %llu out of range", (unsigned long long)i);
        expect = fi.offset + fi.csize + TKS_BLOCK_BYTES;
        first += fi.nrecords;
        if (r->seekable) TRY(push_frame(r, fi, e));
    }
    if (expect - TKS_BLOCK_BYTES != index_offset || first != nrecords)
        return FAIL_AT(index_offset, TK_EDATA, "bad index: frames do not add up to the trailer");
    return 0;
}

// Reads the index block (at index_offset) and the trailer; checks them against each other.
static int read_index(tks_reader *r, const uint8_t blk[TKS_BLOCK_BYTES], uint64_t index_offset,
                      tk_err *e) {
    if (memcmp(blk, "IDX1", 4) != 0 || tks_get32(blk + 12) != tks_crc(0, blk, 12))
        return FAIL_AT(index_offset, TK_EDATA, "bad index: bad index block header");
    uint64_t nframes = tks_get32(blk + 4), isize = tks_get32(blk + 8);
    if (isize != nframes * TKS_ENTRY_BYTES)
        return FAIL_AT(index_offset + 8, TK_EDATA, "bad index: size disagrees with frame count");
    uint64_t tpos = index_offset + TKS_BLOCK_BYTES + isize;
    if (r->seekable && tpos + TKS_TRAILER_BYTES != r->size)
        return FAIL_AT(index_offset + 8, TK_EDATA, "bad index: size disagrees with the file size");
    uint8_t *ib = malloc(isize + TKS_TRAILER_BYTES);
    if (!ib) return tk_err_errno(e, ENOMEM, "out of memory");
    int rc = rread(r, ib, isize + TKS_TRAILER_BYTES, index_offset + TKS_BLOCK_BYTES, e);
    const uint8_t *t = ib + isize;
    if (rc) goto out;
    if (memcmp(t + 28, "TKSE", 4) != 0) {
        rc = FAIL_AT(tpos + 28, TK_EDATA, "truncated file (no trailer)");
        goto out;
    }
    if (tks_get64(t) != index_offset || tks_get64(t + 8) != nframes) {
        rc = FAIL_AT(tpos, TK_EDATA, "bad index: trailer disagrees with the index block");
        goto out;
    }
    if (tks_crc(0, ib, isize + 24) != tks_get32(t + 24)) {
        rc = FAIL_AT(tpos + 24, TK_EDATA, "bad index: index checksum mismatch");
        goto out;
    }
    r->nrecords = tks_get64(t + 16);
    if (r->seekable) {
        rc = load_index(r, ib, nframes, index_offset, r->nrecords, e);
    } else { // a stream: the index must list exactly the frames already read
        for (uint64_t i = 0; i < nframes && !rc; i++) {
            const uint8_t *p = ib + i * TKS_ENTRY_BYTES;
            if (i >= r->nfr || tks_get64(p) != r->fr[i].offset || tks_get64(p + 8) != r->fr[i].csize ||
                tks_get64(p + 16) != r->fr[i].first_record || tks_get32(p + 24) != r->fr[i].nrecords ||
                tks_get32(p + 28) != 0)
                rc = FAIL_AT(index_offset + TKS_BLOCK_BYTES + i * TKS_ENTRY_BYTES, TK_EDATA,
                             "index entry %llu out of range", (unsigned long long)i);
        }
        if (!rc && (nframes != r->nfr || r->nrecords != r->seen_records))
            rc = FAIL_AT(index_offset, TK_EDATA, "bad index: frames do not add up to the trailer");
    }
out:
    free(ib);
    return rc;
}

int tks_reader_open(tks_reader **rp, const char *path, tk_err *e) {
    *rp = NULL;
    tks_reader *r = calloc(1, sizeof *r);
    if (!r) return tk_err_errno(e, ENOMEM, "out of memory");
    if (strcmp(path, "-") == 0) {
        r->fd = 0;
        snprintf(r->name, sizeof r->name, "<stdin>");
    } else {
        r->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (r->fd < 0) {
            int err = errno;
            free(r);
            return tk_err_errno(e, err, "%s: cannot open", path);
        }
        r->own_fd = 1;
        snprintf(r->name, sizeof r->name, "%s", path);
    }
    struct stat st;
    if (fstat(r->fd, &st) == 0 && S_ISREG(st.st_mode)) {
        r->seekable = 1;
        r->size = (uint64_t)st.st_size;
    }
    int rc = read_header(r, e);
    if (!rc && r->seekable) {
        if (r->size < r->payload + TKS_BLOCK_BYTES + TKS_TRAILER_BYTES) {
            rc = FAIL_AT(r->size, TK_EDATA, "truncated file (no trailer)");
        } else {
            uint8_t t[TKS_TRAILER_BYTES];
            rc = rread(r, t, sizeof t, r->size - TKS_TRAILER_BYTES, e);
            uint64_t io = tks_get64(t);
            if (!rc && memcmp(t + 28, "TKSE", 4) != 0)
                rc = FAIL_AT(r->size, TK_EDATA, "truncated file (no trailer)");
            else if (!rc && (io < r->payload ||
                             io > r->size - TKS_BLOCK_BYTES - TKS_TRAILER_BYTES))
                rc = FAIL_AT(r->size - TKS_TRAILER_BYTES, TK_EDATA,
                             "bad index: index offset %llu out of range", (unsigned long long)io);
            uint8_t blk[TKS_BLOCK_BYTES];
            if (!rc) rc = rread(r, blk, sizeof blk, io, e);
            if (!rc) rc = read_index(r, blk, io, e);
        }
    } else if (!rc) {
        r->pos = r->payload;
        r->max_records = r->frame_records;
        r->ccap = 1 << 16;
        r->cbuf = malloc(r->ccap);
        r->dctx = ZSTD_createDCtx();
        if (!r->cbuf || !r->dctx) rc = tk_err_errno(e, ENOMEM, "out of memory");
    }
    if (rc) {
        tks_reader_close(r);
        return rc;
    }
    *rp = r;
    return 0;
}

const tks_schema *tks_reader_schema(const tks_reader *r) { return &r->s; }
uint64_t tks_reader_nrecords(const tks_reader *r) { return r->seekable || r->done ? r->nrecords : 0; }
size_t tks_reader_nframes(const tks_reader *r) { return r->nfr; }
const tks_frame_info *tks_reader_frame(const tks_reader *r, size_t i) {
    return i < r->nfr ? &r->fr[i] : NULL;
}
size_t tks_reader_max_frame_records(const tks_reader *r) { return r->max_records; }

// Streams the next out_size bytes of the frame into out. 1 when they are all there; 0 when the
// frame ends first or zstd fails (*ret then holds zstd's error code).
static int pull(ZSTD_DCtx *dctx, ZSTD_inBuffer *in, void *out, size_t out_size, size_t *ret) {
    ZSTD_outBuffer o = {out, out_size, 0};
    while (o.pos < o.size) {
        *ret = ZSTD_decompressStream(dctx, &o, in);
        if (ZSTD_isError(*ret)) return 0;
        if (*ret == 0 || (in->pos == in->size && o.pos < o.size)) break;
    }
    return o.pos == o.size;
}

static int grow_buf(void **p, size_t *cap, size_t need, tk_err *e) {
    if (need <= *cap && *p) return 0;
    size_t ncap = *cap > need ? *cap : need;
    void *n = realloc(*p, ncap ? ncap : 1);
    if (!n) return tk_err_errno(e, ENOMEM, "out of memory for a %zu-byte column", need);
    *p = n;
    *cap = ncap;
    return 0;
}

// pull() into a buffer that grows as the bytes arrive (doubling from 1 MiB), so lengths that
// promise more than the frame holds cost no more memory than the frame's real content.
static int pull_grow(ZSTD_DCtx *dctx, ZSTD_inBuffer *in, void **buf, size_t *cap, size_t size, size_t *ret,
                     int *got, tk_err *e) {
    size_t pos = 0;
    *got = 1;
    while (pos < size && *got) {
        size_t step = pos > ((size_t)1 << 20) ? pos : (size_t)1 << 20, end = size - pos < step ? size : pos + step;
        TRY(grow_buf(buf, cap, end, e));
        *got = pull(dctx, in, (uint8_t *)*buf + pos, end - pos, ret);
        pos = end;
    }
    return 0;
}

// Decompresses one zstd frame (src, csize bytes, at file offset off) of n records into the
// per-field buffers cols (fixed fields only) or the frame fr's own buffers (any schema):
// streaming output switches buffer at each column boundary, and a ragged column's lengths are
// read before its values so their buffer can be sized.
static int decode(const tks_reader *r, ZSTD_DCtx *dctx, size_t i, const uint8_t *src, size_t csize,
                  uint32_t n, uint64_t off, void *const *cols, tks_frame *fr, tk_err *e) {
    uint64_t fixed = tks_frame_fixed_bytes(&r->s, n);
    // The frame must be one zstd frame (magic 0xFD2FB528) with the content-checksum flag (bit 2
    // of the frame header descriptor) and the declared content size: exactly the fixed columns'
    // size without ragged fields, at least that and at most 2 GiB with them.
    unsigned long long declared = csize >= 6 ? ZSTD_getFrameContentSize(src, csize) : 0;
    if (csize < 6 || tks_get32(src) != 0xFD2FB528u || !(src[4] & 4) ||
        ZSTD_findFrameCompressedSize(src, csize) != csize ||
        (r->s.nragged ? declared < fixed || declared > TKS_MAX_FRAME_BYTES : declared != fixed))
        return FAIL_AT(off, TK_EDATA, "frame %zu: checksum mismatch (not one checksummed zstd frame of %s%llu bytes)",
                       i, r->s.nragged ? "at least " : "", (unsigned long long)fixed);
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
    ZSTD_inBuffer in = {src, csize, 0};
    size_t ret = 1;
    int got = 1;
    uint64_t total = fixed; // the content the lengths read so far account for
    for (int f = 0; f < r->s.nfields && got; f++) {
        const tks_field *fd = &r->s.f[f];
        if (!fd->ragged) {
            size_t want = (size_t)n * fd->bytes;
            if (fr) TRY(pull_grow(dctx, &in, &fr->col[f].data, &fr->col[f].cap, want, &ret, &got, e));
            else got = pull(dctx, &in, cols[f], want, &ret);
            continue;
        }
        tks_column *c = &fr->col[f];
        size_t offbytes = ((size_t)n + 1) * sizeof *c->off;
        TRY(grow_buf((void **)&c->off, &c->offcap, offbytes, e));
        TRY(grow_buf(&c->data, &c->cap, (size_t)n * TKS_LENGTH_BYTES, e));
        if (!(got = pull(dctx, &in, c->data, (size_t)n * TKS_LENGTH_BYTES, &ret))) break;
        c->off[0] = 0;
        for (uint32_t j = 0; j < n; j++) {
            uint64_t len = (uint64_t)tks_get32((const uint8_t *)c->data + (size_t)j * TKS_LENGTH_BYTES) * fd->row_bytes;
            total += len;
            if (len > TKS_MAX_RECORD_BYTES || total > declared)
                return FAIL_AT(off, TK_EDATA, "frame %zu: bad lengths of ragged field '%s'", i, fd->name);
            c->off[j + 1] = c->off[j] + len;
        }
        TRY(pull_grow(dctx, &in, &c->data, &c->cap, (size_t)c->off[n], &ret, &got, e));
    }
    if (!ZSTD_isError(ret) && got && ret != 0) { // all output produced; let zstd finish and check XXH64
        uint8_t extra;
        ZSTD_outBuffer out = {&extra, 1, 0};
        ret = ZSTD_decompressStream(dctx, &out, &in);
        if (!ZSTD_isError(ret) && (ret != 0 || out.pos != 0)) ret = 1;
    }
    if (ZSTD_isError(ret)) {
        if (ZSTD_getErrorCode(ret) == ZSTD_error_checksum_wrong)
            FAIL_AT(off, TK_EDATA, "frame %zu: checksum mismatch", i);
        else
            FAIL_AT(off, TK_EDATA, "frame %zu: corrupt zstd frame: %s", i, ZSTD_getErrorName(ret));
        return tk_err_lib(e, "zstd", (int)ZSTD_getErrorCode(ret));
    }
    if (!got || ret != 0 || in.pos != in.size || total != declared)
        return FAIL_AT(off, TK_EDATA, "frame %zu: checksum mismatch (wrong decompressed size)", i);
    if (fr) fr->n = n;
    return 0;
}

static int check_block(const tks_reader *r, size_t i, const uint8_t *b, uint64_t boff, tk_err *e) {
    if (memcmp(b, "FRM1", 4) != 0 || tks_get32(b + 12) != tks_crc(0, b, 12))
        return FAIL_AT(boff, TK_EDATA, "frame %zu: bad block header", i);
    return 0;
}

static int fixed_only(const tks_reader *r, tk_err *e) {
    if (!r->s.nragged) return 0;
    return tk_err_set(e, TK_EUSAGE, "%s: the schema has ragged fields: read it with tks_reader_read", r->name);
}

static int read_frame(tks_reader *r, size_t i, void *const *cols, tks_frame *fr, size_t *n, tk_err *e) {
    *n = 0;
    if (i >= r->nfr || !r->seekable)
        return tk_err_set(e, TK_EINTERNAL, "%s: frame %zu read out of order or beyond the end", r->name, i);
    const tks_frame_info *fi = &r->fr[i];
    uint64_t boff = fi->offset - TKS_BLOCK_BYTES;
    uint8_t *buf = malloc(fi->csize + TKS_BLOCK_BYTES);
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    int rc = !buf || !dctx ? tk_err_errno(e, ENOMEM, "out of memory") : 0;
    if (!rc) rc = tk_pread_all(r->fd, buf, fi->csize + TKS_BLOCK_BYTES, (long long)boff, r->name, e);
    if (!rc) rc = check_block(r, i, buf, boff, e);
    if (!rc && (tks_get32(buf + 4) != fi->nrecords || tks_get32(buf + 8) != fi->csize))
        rc = FAIL_AT(boff, TK_EDATA, "frame %zu: bad block header (disagrees with the index)", i);
    if (!rc) rc = decode(r, dctx, i, buf + TKS_BLOCK_BYTES, fi->csize, fi->nrecords, fi->offset, cols, fr, e);
    if (!rc) *n = fi->nrecords;
    ZSTD_freeDCtx(dctx);
    free(buf);
    return rc;
}

int tks_reader_read_frame(tks_reader *r, size_t i, void *const *cols, size_t *n, tk_err *e) {
    *n = 0;
    TRY(fixed_only(r, e));
    return read_frame(r, i, cols, NULL, n, e);
}

int tks_reader_read(tks_reader *r, size_t i, tks_frame *fr, tk_err *e) {
    fr->n = 0;
    size_t n;
    return read_frame(r, i, NULL, fr, &n, e);
}

static int next_frame(tks_reader *r, void *const *cols, tks_frame *fr, size_t *n, tk_err *e) {
    *n = 0;
    if (r->seekable) {
        if (r->next >= r->nfr) return 0;
        TRY(read_frame(r, r->next, cols, fr, n, e));
        r->next++;
        return 0;
    }
    if (r->done) return 0;
    uint8_t b[TKS_BLOCK_BYTES];
    uint64_t boff = r->pos;
    size_t i = r->nfr;
    TRY(sread(r, b, sizeof b, e));
    if (memcmp(b, "IDX1", 4) == 0) {
        TRY(read_index(r, b, boff, e));
        uint8_t extra;
        ssize_t k;
        while ((k = read(r->fd, &extra, 1)) < 0 && errno == EINTR) {}
        if (k > 0) return FAIL_AT(r->pos, TK_EDATA, "trailing garbage after the trailer");
        r->done = 1;
        return 0;
    }
    TRY(check_block(r, i, b, boff, e));
    uint32_t nrec = tks_get32(b + 4), csize = tks_get32(b + 8);
    if (nrec < 1 || nrec > r->frame_records || csize < 1 || csize > TKS_MAX_COUNT)
        return FAIL_AT(boff, TK_EDATA, "frame %zu: bad block header (sizes out of range)", i);
    if (csize > r->ccap) {
        uint8_t *nb = realloc(r->cbuf, csize);
        if (!nb) return tk_err_errno(e, ENOMEM, "out of memory");
        r->cbuf = nb;
        r->ccap = csize;
    }
    TRY(sread(r, r->cbuf, csize, e));
    TRY(decode(r, r->dctx, i, r->cbuf, csize, nrec, boff + TKS_BLOCK_BYTES, cols, fr, e));
    TRY(push_frame(r, (tks_frame_info){boff + TKS_BLOCK_BYTES, csize, r->seen_records, nrec}, e));
    r->seen_records += nrec;
    *n = nrec;
    return 0;
}

int tks_reader_next(tks_reader *r, void *const *cols, size_t *n, tk_err *e) {
    *n = 0;
    TRY(fixed_only(r, e));
    return next_frame(r, cols, NULL, n, e);
}

int tks_reader_next_frame(tks_reader *r, tks_frame *fr, tk_err *e) {
    fr->n = 0;
    size_t n;
    return next_frame(r, NULL, fr, &n, e);
}

void tks_frame_free(tks_frame *fr) {
    if (!fr) return;
    for (int f = 0; f < TKS_MAX_FIELDS; f++) {
        free(fr->col[f].data);
        free(fr->col[f].off);
    }
    memset(fr, 0, sizeof *fr);
}

void tks_reader_close(tks_reader *r) {
    if (!r) return;
    if (r->own_fd) close(r->fd);
    ZSTD_freeDCtx(r->dctx);
    free(r->cbuf);
    free(r->fr);
    free(r);
}
