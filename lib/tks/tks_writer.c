// .tks writer: buffers records column-wise, one zstd frame per records_per_frame records, then
// the index block and the trailer (man/man5/tks.5). Files are written atomically (lib/core/afile).
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
    size_t cap = TKS_TARGET_FRAME_BYTES / w->s.record_bytes;
    if (w->rpf > cap) w->rpf = cap ? cap : 1;
    if (w->rpf > TKS_MAX_COUNT) w->rpf = TKS_MAX_COUNT;
    int level = o && o->zstd_level ? o->zstd_level : 3;
    w->buf = malloc(w->rpf * w->s.record_bytes);
    w->ccap = ZSTD_compressBound(w->rpf * w->s.record_bytes);
    w->cbuf = malloc(w->ccap);
    w->cctx = ZSTD_createCCtx();
    if (!w->buf || !w->cbuf || !w->cctx) {
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
    tks_put32(h + 8, TKS_VERSION);
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

static int flush_frame(tks_writer *w, tk_err *e) {
    if (!w->nbuf) return 0;
    // Close the gaps of a partly filled buffer so the fields lie back to back (column-wise).
    size_t src = 0, dst = 0;
    for (int i = 0; i < w->s.nfields; i++) {
        size_t n = w->nbuf * w->s.f[i].bytes;
        if (src != dst) memmove(w->buf + dst, w->buf + src, n);
        src += w->rpf * w->s.f[i].bytes;
        dst += n;
    }
    size_t c = ZSTD_compress2(w->cctx, w->cbuf, w->ccap, w->buf, dst);
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
    free(w->idx);
    free(w);
}
