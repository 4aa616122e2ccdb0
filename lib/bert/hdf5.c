// NVIDIA's MLPerf BERT HDF5 files (hdf5.h). Key names, shapes and types follow NVIDIA's
// input_preprocessing scripts (training_results_v2.0 .../bert/implementations/pytorch):
// create_pretraining_data.py and chop_hdf5_files.py (fixed), convert_fixed2variable.py (variable).
// Values are read through HDF5's conversion to int32, whatever integer type the file stores.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bert/hdf5.h"
#include "core/sandbox.h"

#ifndef TK_HAVE_HDF5

int bert_h5_available(void) { return 0; }
int bert_h5_open(bert_h5 **h, const char *path, tk_err *e) {
    *h = NULL;
    return tk_err_set(e, TK_EUSAGE, "%s: this trainkit was built without libhdf5 (install libhdf5-dev, rebuild)",
                      path);
}
int bert_h5_layout(const bert_h5 *h) { return h ? 0 : 0; }
uint64_t bert_h5_count(const bert_h5 *h) { return h ? 0 : 0; }
int bert_h5_read(bert_h5 *h, uint64_t first, size_t n, bert_records *b, int32_t vocab_size, tk_err *e) {
    (void)h, (void)first, (void)n, (void)b, (void)vocab_size;
    return tk_err_set(e, TK_EUSAGE, "this trainkit was built without libhdf5");
}
void bert_h5_close(bert_h5 *h) { (void)h; }

#else

#include <hdf5.h>

enum { K_IDS, K_SEG, K_POS, K_MID, K_NSP, K_MASK, NKEYS };
static const char *const key_names[NKEYS] = {"input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                                             "next_sentence_labels", "input_mask"};

// The reader in the child process: libhdf5 runs only there (see the parent side below).
typedef struct h5r {
    char path[4096];
    hid_t file, d[NKEYS];
    int layout;
    uint64_t n;
    hsize_t width[NKEYS];       // fixed layout: the second dimension of each 2-D dataset
    int32_t *buf;               // fixed layout: room for one chunk of every dataset
    size_t bufcap;
} h5r;

// Names the file as the place of the error set in e.
static int in_file(const h5r *h, tk_err *e) { return tk_err_where(e, "%s", h->path); }

static void h5r_close(h5r *h) {
    if (!h) return;
    for (int k = 0; k < NKEYS; k++)
        if (h->d[k] > 0) H5Dclose(h->d[k]);
    if (h->file > 0) H5Fclose(h->file);
    free(h->buf);
    free(h);
}

// The class of a dataset's type, and for variable-length types the class of the base type.
static void type_class(hid_t d, H5T_class_t *cls, H5T_class_t *base) {
    hid_t t = H5Dget_type(d);
    *cls = H5Tget_class(t);
    *base = H5T_NO_CLASS;
    if (*cls == H5T_VLEN) {
        hid_t s = H5Tget_super(t);
        *base = H5Tget_class(s);
        H5Tclose(s);
    }
    H5Tclose(t);
}

static int dims_of(hid_t d, hsize_t dims[2]) {
    hid_t s = H5Dget_space(d);
    int r = H5Sget_simple_extent_ndims(s);
    dims[0] = dims[1] = 0;
    if (r >= 1 && r <= 2) H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    return r;
}

static int h5r_open(h5r **hp, const char *path, tk_err *e) {
    *hp = NULL;
    h5r *h = calloc(1, sizeof *h);
    if (!h) return tk_err_errno(e, ENOMEM, "out of memory");
    snprintf(h->path, sizeof h->path, "%s", path);
    int rc = 0;
    if (H5Fis_hdf5(path) <= 0) {
        tk_err_set(e, TK_EDATA, "not an HDF5 file");
        tk_err_where(e, "%s: offset 0", path);
        rc = TK_EDATA;
    } else if ((h->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0) {
        rc = tk_err_set(e, TK_EDATA, "%s: HDF5 cannot open the file", path);
    }
    // Which layout: a 1-D variable-length input_ids, or a 2-D one beside input_mask.
    for (int k = 0; !rc && k < NKEYS; k++) {
        if (k == K_MASK && h->layout == BERT_H5_VARLEN) break;
        if (H5Lexists(h->file, key_names[k], H5P_DEFAULT) <= 0 ||
            (h->d[k] = H5Dopen2(h->file, key_names[k], H5P_DEFAULT)) < 0) {
            tk_err_set(e, TK_EDATA, "missing dataset '%s'", key_names[k]);
            rc = in_file(h, e);
            tk_err_hint(e, "NVIDIA's BERT HDF5 files hold input_ids, segment_ids, masked_lm_positions, "
                           "masked_lm_ids, next_sentence_labels (and input_mask when fixed-length)");
            break;
        }
        H5T_class_t cls, base;
        type_class(h->d[k], &cls, &base);
        hsize_t dims[2];
        int rank = dims_of(h->d[k], dims);
        if (k == K_IDS) {
            if (rank == 1 && cls == H5T_VLEN) h->layout = BERT_H5_VARLEN;
            else if (rank == 2 && cls == H5T_INTEGER) h->layout = BERT_H5_FIXED;
            else {
                tk_err_set(e, TK_EDATA, "'%s' is neither a 2-D integer dataset nor a 1-D variable-length one",
                           key_names[k]);
                rc = in_file(h, e);
                break;
            }
            h->n = dims[0];
        }
        int vlen = h->layout == BERT_H5_VARLEN && k != K_NSP;
        if (vlen ? (cls != H5T_VLEN || base != H5T_INTEGER) : cls != H5T_INTEGER) {
            tk_err_set(e, TK_EDATA, "'%s' is not %s integer dataset", key_names[k], vlen ? "a variable-length" : "an");
            rc = in_file(h, e);
            break;
        }
        int want_rank = vlen || k == K_NSP ? 1 : 2;
        if (!(rank == want_rank || (k == K_NSP && rank == 2 && dims[1] == 1))) {
            tk_err_set(e, TK_EDATA, "'%s' has %d dimensions, expected %d", key_names[k], rank, want_rank);
            rc = in_file(h, e);
            break;
        }
        if (dims[0] != h->n) {
            tk_err_set(e, TK_EDATA, "'%s' has %llu records, input_ids has %llu", key_names[k],
                       (unsigned long long)dims[0], (unsigned long long)h->n);
            rc = in_file(h, e);
            break;
        }
        h->width[k] = rank == 2 ? dims[1] : 1;
    }
    if (!rc && h->layout == BERT_H5_FIXED) {
        int k = h->width[K_SEG] != h->width[K_IDS] ? K_SEG : h->width[K_MASK] != h->width[K_IDS] ? K_MASK : -1;
        if (k >= 0) {
            tk_err_set(e, TK_EDATA, "'%s' has %llu columns, input_ids %llu", key_names[k],
                       (unsigned long long)h->width[k], (unsigned long long)h->width[K_IDS]);
            rc = in_file(h, e);
        } else if (h->width[K_MID] != h->width[K_POS]) {
            tk_err_set(e, TK_EDATA, "'masked_lm_ids' has %llu columns, masked_lm_positions %llu",
                       (unsigned long long)h->width[K_MID], (unsigned long long)h->width[K_POS]);
            rc = in_file(h, e);
        }
    }
    if (rc) {
        h5r_close(h);
        return rc;
    }
    *hp = h;
    return 0;
}

// Reads rows [first, first+n) of dataset k into out through memory type mt: H5T_NATIVE_INT32
// (n * width values) or a variable-length type (n hvl_t, which the caller reclaims).
static int read_rows(h5r *h, int k, uint64_t first, size_t n, hid_t mt, void *out, tk_err *e) {
    hsize_t start[2] = {first, 0}, count[2] = {n, h->width[k]};
    hid_t fs = H5Dget_space(h->d[k]);
    int rank = H5Sget_simple_extent_ndims(fs);
    hid_t ms = H5Screate_simple(rank, count, NULL);
    herr_t r = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    if (r >= 0) r = H5Dread(h->d[k], mt, ms, fs, H5P_DEFAULT, out);
    H5Sclose(ms);
    H5Sclose(fs);
    if (r < 0) {
        tk_err_set(e, TK_EDATA, "HDF5 cannot read '%s' records %llu..%llu", key_names[k], (unsigned long long)first,
                   (unsigned long long)(first + n - 1));
        return tk_err_where(e, "%s", h->path);
    }
    return 0;
}

static int rec_fail(h5r *h, uint64_t rec, tk_err *e) {
    return tk_err_where(e, "%s: record %llu", h->path, (unsigned long long)rec);
}

// Fills record i of b from int32 rows; checks the lengths against b's shape.
static int fill(h5r *h, bert_records *b, size_t i, uint64_t rec, const int32_t *ids, const int32_t *seg, long len,
                const int32_t *pos, const int32_t *mid, long nmask, int32_t nsp, int32_t vocab, tk_err *e) {
    if (len > b->L) {
        tk_err_set(e, TK_EDATA, "a sequence of %ld tokens is longer than max_seq_length %d", len, b->L);
        tk_err_hint(e, "convert with --max-seq-length %ld or more", len);
        return rec_fail(h, rec, e);
    }
    if (nmask > b->P) {
        tk_err_set(e, TK_EDATA, "%ld masked positions, more than max_predictions_per_seq %d", nmask, b->P);
        tk_err_hint(e, "convert with --max-predictions %ld or more", nmask);
        return rec_fail(h, rec, e);
    }
    bert_records_clear(b, i);
    size_t L = (size_t)b->L, P = (size_t)b->P;
    for (long t = 0; t < len; t++) {
        if (ids[t] < 0 || ids[t] >= vocab || seg[t] < 0 || seg[t] > 1) {
            if (ids[t] < 0 || ids[t] >= vocab)
                tk_err_set(e, TK_EDATA, "input_ids[%ld] = %d is not a token id (vocabulary of %d)", t, ids[t], vocab);
            else
                tk_err_set(e, TK_EDATA, "segment_ids[%ld] = %d (expected 0 or 1)", t, seg[t]);
            return rec_fail(h, rec, e);
        }
        b->input_ids[i * L + (size_t)t] = (int16_t)ids[t];
        b->segment_ids[i * L + (size_t)t] = (uint8_t)seg[t];
    }
    for (long k = 0; k < nmask; k++) {
        if (pos[k] < 0 || pos[k] >= len || mid[k] < 0 || mid[k] >= vocab) {
            if (pos[k] < 0 || pos[k] >= len)
                tk_err_set(e, TK_EDATA, "masked_lm_positions[%ld] = %d is outside the sequence of %ld tokens", k,
                           pos[k], len);
            else
                tk_err_set(e, TK_EDATA, "masked_lm_ids[%ld] = %d is not a token id (vocabulary of %d)", k, mid[k],
                           vocab);
            return rec_fail(h, rec, e);
        }
        b->mlm_pos[i * P + (size_t)k] = (int16_t)pos[k];
        b->mlm_ids[i * P + (size_t)k] = (int16_t)mid[k];
    }
    if (nsp < 0 || nsp > 1) {
        tk_err_set(e, TK_EDATA, "next_sentence_labels = %d (expected 0 or 1)", nsp);
        return rec_fail(h, rec, e);
    }
    b->seq_len[i] = (int16_t)len;
    b->num_masked[i] = (int16_t)nmask;
    b->nsp[i] = (uint8_t)nsp;
    return 0;
}

static int read_fixed(h5r *h, uint64_t first, size_t n, bert_records *b, int32_t vocab, tk_err *e) {
    size_t W = h->width[K_IDS], Q = h->width[K_POS], need = n * (3 * W + 2 * Q + 1);
    if (need > h->bufcap) {
        int32_t *nb = realloc(h->buf, need * sizeof *nb);
        if (!nb) return tk_err_errno(e, ENOMEM, "out of memory");
        h->buf = nb;
        h->bufcap = need;
    }
    int32_t *ids = h->buf, *seg = ids + n * W, *mask = seg + n * W, *pos = mask + n * W, *mid = pos + n * Q,
            *nsp = mid + n * Q;
    int32_t *dst[6] = {ids, seg, mask, pos, mid, nsp};
    static const int keys[6] = {K_IDS, K_SEG, K_MASK, K_POS, K_MID, K_NSP};
    for (int k = 0; k < 6; k++) TRY(read_rows(h, keys[k], first, n, H5T_NATIVE_INT32, dst[k], e));
    for (size_t i = 0; i < n; i++) {
        uint64_t rec = first + i;
        // The sequence is input_mask's leading ones; the predictions are the nonzero positions
        // (as convert_fixed2variable.py counts them), which must come first.
        const int32_t *m = mask + i * W, *p = pos + i * Q;
        long len = 0, nmask = 0;
        while ((size_t)len < W && m[len] == 1) len++;
        for (size_t t = (size_t)len; t < W; t++)
            if (m[t] != 0) {
                tk_err_set(e, TK_EDATA, "input_mask[%zu] = %d after the padding began at %ld (expected 1s, then 0s)",
                           t, m[t], len);
                return rec_fail(h, rec, e);
            }
        while ((size_t)nmask < Q && p[nmask] != 0) nmask++;
        for (size_t k = (size_t)nmask; k < Q; k++)
            if (p[k] != 0) {
                tk_err_set(e, TK_EDATA, "masked_lm_positions[%zu] = %d after the padding began at %ld", k, p[k], nmask);
                return rec_fail(h, rec, e);
            }
        TRY(fill(h, b, i, rec, ids + i * W, seg + i * W, len, p, mid + i * Q, nmask, nsp[i], vocab, e));
    }
    b->n = n;
    return 0;
}

static int read_varlen(h5r *h, uint64_t first, size_t n, bert_records *b, int32_t vocab, tk_err *e) {
    hvl_t *v = calloc(4 * n, sizeof *v);
    int32_t *nsp = malloc(n * sizeof *nsp);
    hid_t mt = H5Tvlen_create(H5T_NATIVE_INT32);
    int rc = v && nsp ? 0 : tk_err_errno(e, ENOMEM, "out of memory"), got = 0;
    static const int keys[4] = {K_IDS, K_SEG, K_POS, K_MID};
    for (int k = 0; !rc && k < 4; k++) // zeroed, so a failed read reclaims nothing
        if (!(rc = read_rows(h, keys[k], first, n, mt, v + (size_t)k * n, e))) got++;
    if (!rc) rc = read_rows(h, K_NSP, first, n, H5T_NATIVE_INT32, nsp, e);
    for (size_t i = 0; !rc && i < n; i++) {
        const hvl_t *ids = &v[i], *seg = &v[n + i], *pos = &v[2 * n + i], *mid = &v[3 * n + i];
        if (seg->len != ids->len || mid->len != pos->len) {
            int s = seg->len != ids->len;
            tk_err_set(e, TK_EDATA, "%s has %zu values, %s %zu", s ? "segment_ids" : "masked_lm_ids",
                       s ? seg->len : mid->len, s ? "input_ids" : "masked_lm_positions", s ? ids->len : pos->len);
            rc = rec_fail(h, first + i, e);
            break;
        }
        rc = fill(h, b, i, first + i, ids->p, seg->p, (long)ids->len, pos->p, mid->p, (long)pos->len, nsp[i], vocab, e);
    }
    if (!rc) b->n = n;
    if (v) {
        hsize_t dim[1] = {n};
        hid_t ms = H5Screate_simple(1, dim, NULL);
        for (int k = 0; k < got; k++) H5Dvlen_reclaim(mt, ms, H5P_DEFAULT, v + (size_t)k * n);
        H5Sclose(ms);
    }
    H5Tclose(mt);
    free(v);
    free(nsp);
    return rc;
}

// ---- the child: libhdf5 reads the file and answers the parent's requests ----------------------
// libhdf5 1.10 (Debian 12's) is not safe with hostile files: crafted ones crash it (H5HG_read,
// H5Dopen2), make it spin or allocate gigabytes, and it leaks on its failure paths. So it runs
// only in a child process with CPU and memory limits (core/sandbox.h); the parent never calls it.
// The wire: the child answers the open with an open_answer; then for each read_request a tk_err,
// and when its code is 0 the request's records as the columns of bert_records_cols.

typedef struct {
    tk_err e;
    int32_t layout;
    uint64_t n;
} open_answer;

typedef struct {
    uint64_t first, n;
    int32_t L, P, vocab;
} read_request;

typedef struct {
    const char *path;
    uint64_t mem_mib;
} reader_arg;

// The bytes of each column of n records, in bert_records_cols's order.
static void col_bytes(size_t n, int L, int P, size_t bytes[BERT_NFIELDS]) {
    size_t l = (size_t)L, p = (size_t)P;
    size_t per[BERT_NFIELDS] = {2 * l, l, 2, 2 * p, 2 * p, 2, 1};
    for (int k = 0; k < BERT_NFIELDS; k++) bytes[k] = n * per[k];
}

// libhdf5 failed where the limit on the child's memory made an allocation fail: say so.
static void nomem_hint(tk_err *e, const reader_arg *a) {
    if (e->code && errno == ENOMEM)
        tk_err_hint(e, "libhdf5 ran out of the reader's %llu MiB (TK_HDF5_MEMORY_MIB raises it)",
                    (unsigned long long)a->mem_mib);
}

static int reader_main(void *arg, int fd) {
    const reader_arg *a = arg;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); // libraries do not print: HDF5's error stack stays silent
    open_answer oa;
    memset(&oa, 0, sizeof oa);
    h5r *h = NULL;
    errno = 0;
    if (h5r_open(&h, a->path, &oa.e)) {
        nomem_hint(&oa.e, a);
    } else {
        oa.layout = h->layout;
        oa.n = h->n;
    }
    bert_records b;
    int have = 0;
    read_request q;
    if (tk_sandbox_put(fd, &oa, sizeof oa) == 0 && h)
        while (tk_sandbox_get(fd, &q, sizeof q) == 0) {
            tk_err e;
            tk_err_clear(&e);
            if (!have || b.L != q.L || b.P != q.P || b.cap < q.n) {
                if (have) bert_records_free(&b);
                have = bert_records_init(&b, q.L, q.P, (size_t)q.n, &e) == 0;
            }
            errno = 0;
            if (have && (h->layout == BERT_H5_FIXED ? read_fixed(h, q.first, (size_t)q.n, &b, q.vocab, &e)
                                                    : read_varlen(h, q.first, (size_t)q.n, &b, q.vocab, &e)))
                nomem_hint(&e, a);
            if (tk_sandbox_put(fd, &e, sizeof e)) break;
            if (e.code) continue;
            const void *cols[BERT_NFIELDS];
            size_t bytes[BERT_NFIELDS];
            bert_records_cols(&b, cols);
            col_bytes((size_t)q.n, q.L, q.P, bytes);
            int k = 0;
            while (k < BERT_NFIELDS && tk_sandbox_put(fd, cols[k], bytes[k]) == 0) k++;
            if (k < BERT_NFIELDS) break;
        }
    if (have) bert_records_free(&b);
    h5r_close(h);
    return 0;
}

// ---- the parent: bert_h5_* ask the child and check every byte it answers ------------------------

struct bert_h5 {
    char path[4096];
    tk_sandbox *sb;
    tk_sandbox_limits lim;
    int layout;
    uint64_t n;
};

int bert_h5_available(void) { return 1; }

void bert_h5_close(bert_h5 *h) {
    if (!h) return;
    tk_sandbox_stop(h->sb);
    free(h);
}

int bert_h5_layout(const bert_h5 *h) { return h->layout; }
uint64_t bert_h5_count(const bert_h5 *h) { return h->n; }

// The reader process crashed, ran out of time or stopped answering (sandbox.h's TK_EDATA): the
// file did that. Other errors (the system refused a process) pass as they are.
static int reader_failed(const bert_h5 *h, int rc, tk_err *e) {
    if (rc != TK_EDATA) return rc;
    char how[sizeof e->what];
    snprintf(how, sizeof how, "%s", e->what);
    tk_err_set(e, TK_EDATA, "libhdf5 %s reading the file; the file is malformed", how);
    tk_err_hint(e, "libhdf5 reads each file in a process limited to %g s of CPU and %llu MiB; for a valid "
                   "file that needs more, set TK_HDF5_CPU_SECONDS or TK_HDF5_MEMORY_MIB (prep(1))",
                h->lim.cpu_s, (unsigned long long)(h->lim.mem_bytes >> 20));
    return tk_err_where(e, "%s", h->path);
}

static int garbled(const bert_h5 *h, const char *what, tk_err *e) {
    tk_err_set(e, TK_EDATA, "the libhdf5 reader's answer is garbled (%s); the file is malformed", what);
    return tk_err_where(e, "%s", h->path);
}

// An error the child sent: its strings end inside their arrays, its code is one a reader gives.
static int reader_error(const bert_h5 *h, tk_err *got, tk_err *e) {
    got->lib[sizeof got->lib - 1] = got->where[sizeof got->where - 1] = 0;
    got->what[sizeof got->what - 1] = got->hint[sizeof got->hint - 1] = 0;
    if (got->code != TK_EDATA && got->code != TK_EIO) return garbled(h, "an unknown error code", e);
    *e = *got;
    return e->code;
}

int bert_h5_open(bert_h5 **hp, const char *path, tk_err *e) {
    *hp = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tk_err_errno(e, errno, "%s: cannot open", path);
    struct stat st;
    int ok = fstat(fileno(f), &st) == 0;
    fclose(f);
    if (!ok) return tk_err_errno(e, errno, "%s: cannot stat", path);
    bert_h5 *h = calloc(1, sizeof *h);
    if (!h) return tk_err_errno(e, ENOMEM, "out of memory");
    snprintf(h->path, sizeof h->path, "%s", path);
    // Reading is a few seconds a GiB, and memory does not grow with the file but for a compressed
    // chunk that is read whole: limits far above that, which a hostile file still meets quickly.
    int rc = tk_sandbox_limits_for(&h->lim, (uint64_t)st.st_size, 10, 1, 512, 8, "TK_HDF5_CPU_SECONDS",
                                   "TK_HDF5_MEMORY_MIB", e);
    reader_arg a = {path, h->lim.mem_bytes >> 20};
    open_answer oa;
    if (!rc) rc = tk_sandbox_start(&h->sb, &h->lim, reader_main, &a, e);
    if (!rc && (rc = tk_sandbox_recv(h->sb, &oa, sizeof oa, e))) rc = reader_failed(h, rc, e);
    else if (!rc && oa.e.code) rc = reader_error(h, &oa.e, e);
    else if (!rc && oa.layout != BERT_H5_FIXED && oa.layout != BERT_H5_VARLEN) rc = garbled(h, "no layout", e);
    if (rc) {
        bert_h5_close(h);
        return rc;
    }
    h->layout = oa.layout;
    h->n = oa.n;
    *hp = h;
    return 0;
}

// A record from the reader keeps the record rules (record.h), its zero padding included.
static int check_record(const bert_records *b, size_t i, int32_t vocab, tk_err *e) {
    size_t L = (size_t)b->L, P = (size_t)b->P;
    int n = b->seq_len[i], m = b->num_masked[i];
    if (n < 0 || n > b->L || m < 0 || m > b->P)
        return tk_err_set(e, TK_EDATA, "the reader sent %d tokens and %d predictions (at most %d and %d)", n, m, b->L,
                          b->P);
    for (size_t t = (size_t)n; t < L; t++)
        if (b->input_ids[i * L + t] || b->segment_ids[i * L + t])
            return tk_err_set(e, TK_EDATA, "the reader sent a token after the sequence's %d", n);
    for (size_t k = (size_t)m; k < P; k++)
        if (b->mlm_pos[i * P + k] || b->mlm_ids[i * P + k])
            return tk_err_set(e, TK_EDATA, "the reader sent a prediction after the record's %d", m);
    return bert_records_check(b, i, vocab, e);
}

int bert_h5_read(bert_h5 *h, uint64_t first, size_t n, bert_records *b, int32_t vocab, tk_err *e) {
    if (n > b->cap) return tk_err_set(e, TK_EINTERNAL, "bert_h5_read: %zu records, room for %zu", n, b->cap);
    if (first + n > h->n) return tk_err_set(e, TK_EINTERNAL, "bert_h5_read: records past the end");
    b->n = 0;
    if (n == 0) return 0;
    read_request q = {first, n, b->L, b->P, vocab};
    tk_err got;
    int rc = tk_sandbox_send(h->sb, &q, sizeof q, e);
    if (!rc) rc = tk_sandbox_recv(h->sb, &got, sizeof got, e);
    if (rc) return reader_failed(h, rc, e);
    if (got.code) return reader_error(h, &got, e);
    // The columns land in b's own buffers: their sizes are the request's, never the child's word.
    void *cols[BERT_NFIELDS] = {b->input_ids, b->segment_ids, b->seq_len, b->mlm_pos,
                                b->mlm_ids,   b->num_masked,  b->nsp};
    size_t bytes[BERT_NFIELDS];
    col_bytes(n, b->L, b->P, bytes);
    for (int k = 0; k < BERT_NFIELDS; k++)
        if ((rc = tk_sandbox_recv(h->sb, cols[k], bytes[k], e))) return reader_failed(h, rc, e);
    for (size_t i = 0; i < n; i++)
        if (check_record(b, i, vocab, e))
            return tk_err_where(e, "%s: record %llu", h->path, (unsigned long long)(first + i));
    b->n = n;
    return 0;
}

#endif
