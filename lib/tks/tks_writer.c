// .tks writer: buffers records column-wise, one zstd frame per records_per_frame records (or
// per frame_bytes of content when the schema has ragged fields), then the index block and the
// trailer (man/man5/tks.5). Files are written atomically (lib/core/afile).
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "core/afile.h"
#include "tks/tks_internal.h"

struct tks_writer {
    tks_schema s;
    tk_afile af;          // used when writing a file
    FILE *fp;             // af.fp or stdout
    char name[4096];      // for messages ("-" shows as "<stdout>")
    size_t rpf;           // records per frame
    uint8_t *buf;         // rpf records, field i at offset rpf * (sum of earlier field bytes)
    size_t nbuf;          // records buffered
    // ragged fields: each one's buffered values and per-record row counts
    uint8_t *rdata[TKS_MAX_FIELDS];
    size_t rsize[TKS_MAX_FIELDS], rcap[TKS_MAX_FIELDS];
    uint32_t *rlen[TKS_MAX_FIELDS];
    size_t frame_bytes;   // ragged schemas: close a frame once its content reaches this
    size_t content;       // ragged schemas: bytes the buffered frame will decompress to
    uint8_t *cont;        // ragged schemas: the frame's content, assembled for compression
    size_t contcap;
    uint8_t *cbuf;
    size_t ccap;
    ZSTD_CCtx *cctx;
    uint64_t pos, nrecords;
    tks_frame_info *idx;
    size_t nidx, idxcap;
};

static int put(tks_writer *w, const void *p, size_t n, tk_err *e) {
    TRY(tk_write_all(w->fp, p, n, w->name, e));
    w->pos += n;
    return 0;
}

static int zfail(tks_writer *w, size_t rc, const char *what, tk_err *e) {
    tk_err_set(e, TK_EINTERNAL, "%s: zstd %s failed: %s", w->name, what, ZSTD_getErrorName(rc));
    return tk_err_lib(e, "zstd", (int)ZSTD_getErrorCode(rc));
}

int tks_writer_open(tks_writer **wp, const char *path, const tks_schema *s, const tks_writer_opts *o,
                    tk_err *e) {
    *wp = NULL;
    tks_writer *w = calloc(1, sizeof *w);
    if (!w) return tk_err_errno(e, ENOMEM, "out of memory");
    w->s = *s;
    int rc = tks_schema_finish(&w->s, e);
    if (rc) {
        free(w);
        return rc;
    }
    w->rpf = o && o->records_per_frame ? o->records_per_frame : 65536;
    size_t fixed = (size_t)tks_frame_fixed_bytes(&w->s, 1);
    size_t cap = fixed ? TKS_TARGET_FRAME_BYTES / fixed : TKS_MAX_COUNT;
    if (w->rpf > cap) w->rpf = cap ? cap : 1;
    if (w->rpf > TKS_MAX_COUNT) w->rpf = TKS_MAX_COUNT;
    w->frame_bytes = o && o->frame_bytes ? o->frame_bytes : TKS_TARGET_RAGGED_FRAME_BYTES;
    if (w->frame_bytes > TKS_TARGET_FRAME_BYTES) w->frame_bytes = TKS_TARGET_FRAME_BYTES;
    int level = o && o->zstd_level ? o->zstd_level : 3;
    int nomem = 0;
    for (int i = 0; i < w->s.nfields; i++)
        if (w->s.f[i].ragged && !(w->rlen[i] = malloc(w->rpf * sizeof *w->rlen[i]))) nomem = 1;
    w->buf = malloc(w->rpf * w->s.record_bytes + 1);
    w->ccap = w->s.nragged ? 0 : ZSTD_compressBound(w->rpf * w->s.record_bytes); // ragged: grows
    w->cbuf = w->ccap ? malloc(w->ccap) : NULL;
    w->cctx = ZSTD_createCCtx();
    if (nomem || !w->buf || (w->ccap && !w->cbuf) || !w->cctx) {
        tks_writer_abort(w);
        return tk_err_errno(e, ENOMEM, "out of memory for a %zu-record frame", w->rpf);
    }
    ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1);
    if (o && o->threads > 1) // ignored when libzstd was built without threads: output is the same format
        ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_nbWorkers, o->threads);

    char *js = NULL;
    size_t jlen = 0;
    if ((rc = tks_schema_to_json(&w->s, w->rpf, &js, &jlen, e))) {
        tks_writer_abort(w);
        return rc;
    }
    if (jlen > TKS_MAX_SCHEMA) {
        free(js);
        tks_writer_abort(w);
        return tk_err_set(e, TK_EUSAGE, "schema JSON longer than 1 MiB");
    }
    if (strcmp(path, "-") == 0) {
        w->fp = stdout;
        snprintf(w->name, sizeof w->name, "<stdout>");
    } else {
        if ((rc = tk_afile_open(&w->af, path, e))) {
            free(js);
            tks_writer_abort(w);
            return rc;
        }
        w->fp = w->af.fp;
        snprintf(w->name, sizeof w->name, "%s", path);
    }
    uint8_t h[TKS_HEADER_BYTES];
    memcpy(h, TKS_MAGIC, 8);
    tks_put32(h + 8, w->s.nragged ? TKS_VERSION_RAGGED : TKS_VERSION);
    tks_put32(h + 12, 0);
    tks_put32(h + 16, (uint32_t)jlen);
    tks_put32(h + 20, tks_crc(tks_crc(0, h, 20), js, jlen));
    rc = put(w, h, sizeof h, e);
    if (!rc) rc = put(w, js, jlen, e);
    free(js);
    if (rc) {
        tks_writer_abort(w);
        return rc;
    }
    *wp = w;
    return 0;
}

static int grow(uint8_t **p, size_t *cap, size_t need, tk_err *e) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 1 << 16;
    while (ncap < need) ncap *= 2;
    uint8_t *n = realloc(*p, ncap);
    if (!n) return tk_err_errno(e, ENOMEM, "out of memory for a %zu-byte frame", need);
    *p = n;
    *cap = ncap;
    return 0;
}

// The frame's content for a schema with ragged fields (man5 "Frame block"): per field, the
// fixed values, or the row counts then the rows.
static int assemble_ragged(tks_writer *w, const uint8_t **src, size_t *len, tk_err *e) {
    TRY(grow(&w->cont, &w->contcap, w->content, e));
    size_t pos = 0, col = 0;
    for (int i = 0; i < w->s.nfields; i++) {
        const tks_field *f = &w->s.f[i];
        if (f->ragged) {
            for (size_t j = 0; j < w->nbuf; j++, pos += TKS_LENGTH_BYTES) tks_put32(w->cont + pos, w->rlen[i][j]);
            if (w->rsize[i]) memcpy(w->cont + pos, w->rdata[i], w->rsize[i]);
            pos += w->rsize[i];
            w->rsize[i] = 0;
        } else {
            memcpy(w->cont + pos, w->buf + col, w->nbuf * f->bytes);
            pos += w->nbuf * f->bytes;
            col += w->rpf * f->bytes;
        }
    }
    if (pos != w->content) return tk_err_set(e, TK_EINTERNAL, "%s: frame content is %zu bytes, expected %zu", w->name, pos, w->content);
    w->content = 0;
    *src = w->cont;
    *len = pos;
    return grow(&w->cbuf, &w->ccap, ZSTD_compressBound(pos), e);
}

static int flush_frame(tks_writer *w, tk_err *e) {
    if (!w->nbuf) return 0;
    const uint8_t *src = w->buf;
    size_t dst = 0;
    if (w->s.nragged) {
        TRY(assemble_ragged(w, &src, &dst, e));
    } else {
        // Close the gaps of a partly filled buffer so the fields lie back to back (column-wise).
        size_t from = 0;
        for (int i = 0; i < w->s.nfields; i++) {
            size_t n = w->nbuf * w->s.f[i].bytes;
            if (from != dst) memmove(w->buf + dst, w->buf + from, n);
            from += w->rpf * w->s.f[i].bytes;
            dst += n;
        }
    }
    size_t c = ZSTD_compress2(w->cctx, w->cbuf, w->ccap, src, dst);
    if (ZSTD_isError(c)) return zfail(w, c, "compression", e);
    if (w->nidx == w->idxcap) {
        size_t ncap = w->idxcap ? 2 * w->idxcap : 64;
        tks_frame_info *ni = realloc(w->idx, ncap * sizeof *ni);
        if (!ni) return tk_err_errno(e, ENOMEM, "out of memory");
        w->idx = ni;
        w->idxcap = ncap;
    }
    uint8_t b[TKS_BLOCK_BYTES];
    tks_put_block(b, "FRM1", (uint32_t)w->nbuf, (uint32_t)c);
    TRY(put(w, b, sizeof b, e));
    w->idx[w->nidx++] = (tks_frame_info){w->pos, c, w->nrecords, (uint32_t)w->nbuf};
    TRY(put(w, w->cbuf, c, e));
    w->nrecords += w->nbuf;
    w->nbuf = 0;
    return 0;
}

int tks_writer_append(tks_writer *w, const void *const *cols, size_t n, tk_err *e) {
    if (w->s.nragged)
        return tk_err_set(e, TK_EUSAGE, "%s: the schema has ragged fields: append with tks_writer_append_ref", w->name);
    size_t done = 0;
    while (done < n) {
        size_t k = w->rpf - w->nbuf;
        if (k > n - done) k = n - done;
        size_t off = 0;
        for (int i = 0; i < w->s.nfields; i++) {
            size_t fb = w->s.f[i].bytes;
            memcpy(w->buf + off + w->nbuf * fb, (const uint8_t *)cols[i] + done * fb, k * fb);
            off += w->rpf * fb;
        }
        w->nbuf += k;
        done += k;
        if (w->nbuf == w->rpf) TRY(flush_frame(w, e));
    }
    return 0;
}

// One record of a schema with ragged fields: record j of cols.
static int append_ragged_record(tks_writer *w, const tks_colref *cols, size_t j, tk_err *e) {
    uint64_t bytes = w->s.record_bytes;
    for (int i = 0; i < w->s.nfields; i++) {
        const tks_field *f = &w->s.f[i];
        if (!f->ragged) continue;
        uint64_t len = cols[i].off[j + 1] - cols[i].off[j];
        if (cols[i].off[j + 1] < cols[i].off[j] || len % f->row_bytes || len / f->row_bytes > TKS_MAX_COUNT)
            return tk_err_set(e, TK_EUSAGE, "%s: field '%s': offsets %llu..%llu are not whole rows of %zu bytes",
                              w->name, f->name, (unsigned long long)cols[i].off[j],
                              (unsigned long long)cols[i].off[j + 1], f->row_bytes);
        bytes += len;
    }
    if (bytes > TKS_MAX_RECORD_BYTES)
        return tk_err_set(e, TK_EDATA, "%s: record %llu has %llu bytes; a record is at most 64 MiB", w->name,
                          (unsigned long long)(w->nrecords + w->nbuf), (unsigned long long)bytes);
    size_t off = 0;
    for (int i = 0; i < w->s.nfields; i++) {
        const tks_field *f = &w->s.f[i];
        if (f->ragged) {
            size_t len = (size_t)(cols[i].off[j + 1] - cols[i].off[j]);
            TRY(grow(&w->rdata[i], &w->rcap[i], w->rsize[i] + len, e));
            if (len) memcpy(w->rdata[i] + w->rsize[i], (const uint8_t *)cols[i].data + cols[i].off[j], len);
            w->rsize[i] += len;
            w->rlen[i][w->nbuf] = (uint32_t)(len / f->row_bytes);
        } else {
            memcpy(w->buf + off + w->nbuf * f->bytes, (const uint8_t *)cols[i].data + j * f->bytes, f->bytes);
            off += w->rpf * f->bytes;
        }
    }
    w->nbuf++;
    w->content += (size_t)bytes + (size_t)w->s.nragged * TKS_LENGTH_BYTES;
    if (w->nbuf == w->rpf || w->content >= w->frame_bytes) TRY(flush_frame(w, e));
    return 0;
}

int tks_writer_append_ref(tks_writer *w, const tks_colref *cols, size_t n, tk_err *e) {
    if (!w->s.nragged) {
        const void *p[TKS_MAX_FIELDS];
        for (int i = 0; i < w->s.nfields; i++) p[i] = cols[i].data;
        return tks_writer_append(w, p, n, e);
    }
    for (size_t j = 0; j < n; j++) TRY(append_ragged_record(w, cols, j, e));
    return 0;
}

static int finish(tks_writer *w, tk_err *e) {
    TRY(flush_frame(w, e));
    size_t isize = w->nidx * TKS_ENTRY_BYTES;
    if (w->nidx > TKS_MAX_COUNT / TKS_ENTRY_BYTES)
        return tk_err_set(e, TK_EUSAGE, "%s: too many frames (%zu)", w->name, w->nidx);
    uint8_t *ib = calloc(1, isize + TKS_TRAILER_BYTES);
    if (!ib) return tk_err_errno(e, ENOMEM, "out of memory");
    for (size_t i = 0; i < w->nidx; i++) {
        uint8_t *p = ib + i * TKS_ENTRY_BYTES;
        tks_put64(p, w->idx[i].offset);
        tks_put64(p + 8, w->idx[i].csize);
        tks_put64(p + 16, w->idx[i].first_record);
        tks_put32(p + 24, w->idx[i].nrecords);
    }
    uint64_t index_offset = w->pos;
    uint8_t *t = ib + isize;
    tks_put64(t, index_offset);
    tks_put64(t + 8, w->nidx);
    tks_put64(t + 16, w->nrecords);
    tks_put32(t + 24, tks_crc(0, ib, isize + 24));
    memcpy(t + 28, "TKSE", 4);
    uint8_t b[TKS_BLOCK_BYTES];
    tks_put_block(b, "IDX1", (uint32_t)w->nidx, (uint32_t)isize);
    int rc = put(w, b, sizeof b, e);
    if (!rc) rc = put(w, ib, isize + TKS_TRAILER_BYTES, e);
    free(ib);
    if (rc) return rc;
    if (w->fp == stdout) {
        if (fflush(stdout) != 0 || ferror(stdout))
            return tk_err_errno(e, errno ? errno : EIO, "%s: write failed", w->name);
        return 0;
    }
    rc = tk_afile_commit(&w->af, e);
    w->fp = NULL;
    return rc;
}

int tks_writer_close(tks_writer *w, tk_err *e) {
    if (!w) return 0;
    int rc = finish(w, e);
    tks_writer_abort(w); // frees; after a commit there is no temporary file left to remove
    return rc;
}

void tks_writer_abort(tks_writer *w) {
    if (!w) return;
    if (w->fp != stdout) tk_afile_abort(&w->af); // nothing left to remove after a commit
    ZSTD_freeCCtx(w->cctx);
    free(w->buf);
    free(w->cbuf);
    free(w->cont);
    for (int i = 0; i < w->s.nfields; i++) {
        free(w->rdata[i]);
        free(w->rlen[i]);
    }
    free(w->idx);
    free(w);
}
