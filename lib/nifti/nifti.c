// NIfTI-1 reader and writer (nifti.h). Field offsets are those of the NIfTI-1 header
// (nifti1.h, 348 bytes); every check names the offset of the field it reads.
#include "nifti/nifti.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/afile.h"

enum {
    HDR_SIZE = 348,         // sizeof_hdr of NIfTI-1
    HDR_NIFTI2 = 540,       // sizeof_hdr of NIfTI-2
    OFF_DIM = 40,           // short dim[8]
    OFF_DATATYPE = 70,      // short
    OFF_BITPIX = 72,        // short
    OFF_PIXDIM = 76,        // float pixdim[8]
    OFF_VOX_OFFSET = 108,   // float
    OFF_SCL_SLOPE = 112,    // float
    OFF_SCL_INTER = 116,    // float
    OFF_XYZT_UNITS = 123,   // char
    OFF_QFORM_CODE = 252,   // short
    OFF_SFORM_CODE = 254,   // short
    OFF_QUATERN = 256,      // float quatern_b, c, d, qoffset_x, y, z
    OFF_SROW = 280,         // float srow_x[4], srow_y[4], srow_z[4]
    OFF_MAGIC = 344,        // char magic[4]
    MIN_VOX_OFFSET = 352,   // the header and the 4-byte extension flag
};

static const struct { int code; const char *name; int size; } dtypes[] = {
    {TK_NIFTI_UINT8, "uint8", 1},     {TK_NIFTI_INT8, "int8", 1},       {TK_NIFTI_INT16, "int16", 2},
    {TK_NIFTI_UINT16, "uint16", 2},   {TK_NIFTI_INT32, "int32", 4},     {TK_NIFTI_UINT32, "uint32", 4},
    {TK_NIFTI_INT64, "int64", 8},     {TK_NIFTI_FLOAT32, "float32", 4}, {TK_NIFTI_FLOAT64, "float64", 8},
    // defined by NIfTI-1, not read by trainkit (size 0)
    {1, "binary", 0},       {32, "complex64", 0},    {128, "rgb24", 0},        {1280, "uint64", 0},
    {1536, "float128", 0},  {1792, "complex128", 0}, {2048, "complex256", 0}, {2304, "rgba32", 0},
};

int tk_nifti_dtype_size(int datatype) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].code == datatype) return dtypes[i].size;
    return 0;
}

const char *tk_nifti_dtype_name(int datatype) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].code == datatype) return dtypes[i].name;
    return "unknown";
}

// ---- byte order ------------------------------------------------------------------------------
static int host_is_le(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static void swap_bytes(void *p, size_t size, size_t count) {
    uint8_t *b = p;
    for (size_t i = 0; i < count; i++, b += size)
        for (size_t j = 0; j < size / 2; j++) {
            uint8_t t = b[j];
            b[j] = b[size - 1 - j];
            b[size - 1 - j] = t;
        }
}

// Header fields in the file's byte order (swap: it differs from the host's).
static uint32_t rd32(const uint8_t *h, int off, int swap) {
    uint32_t v;
    memcpy(&v, h + off, 4);
    if (swap) swap_bytes(&v, 4, 1);
    return v;
}
static int rd16(const uint8_t *h, int off, int swap) {
    int16_t v;
    memcpy(&v, h + off, 2);
    if (swap) swap_bytes(&v, 2, 1);
    return v;
}
static double rdf(const uint8_t *h, int off, int swap) {
    uint32_t u = rd32(h, off, swap);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// ---- reading ---------------------------------------------------------------------------------
typedef struct {
    const char *path;
    gzFile g;
    int direct;      // a plain .nii (zlib reads it through)
    long long size;  // its size (plain files)
    long long pos;   // bytes read so far (of the decompressed stream)
} src;

static int bad(tk_err *e, const src *s, long long off, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int bad(tk_err *e, const src *s, long long off, const char *fmt, ...) {
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tk_err_set(e, TK_EDATA, "%s", what);
    return tk_err_where(e, "%s: offset %lld", s->path, off);
}

// zlib's own error after a short read, or none (0): the stream simply ended.
static int zlib_error(src *s, tk_err *e) {
    int zerr = Z_OK;
    const char *msg = gzerror(s->g, &zerr);
    if (zerr == Z_OK || zerr == Z_STREAM_END) return 0;
    if (zerr == Z_ERRNO) {
        tk_err_errno(e, errno, "%s: cannot read", s->path);
        return TK_EIO;
    }
    if (strncmp(msg, "<fd:", 4) == 0 && strstr(msg, ": ")) msg = strstr(msg, ": ") + 2; // gzdopen's name for the file
    if (zerr == Z_MEM_ERROR) return tk_err_errno(e, ENOMEM, "%s: out of memory inflating", s->path);
    tk_err_set(e, TK_EDATA, "gzip stream: %s (zlib), after offset %lld of the decompressed data", msg, s->pos);
    tk_err_lib(e, "zlib", zerr);
    tk_err_where(e, "%s: offset %lld", s->path, s->pos);
    return TK_EDATA;
}

// Reads up to n bytes; *got says how many (fewer only at the end of the stream).
static int src_read(src *s, void *buf, size_t n, size_t *got, tk_err *e) {
    *got = 0;
    while (*got < n) {
        size_t want = n - *got;
        if (want > (1u << 30)) want = 1u << 30;
        int r = gzread(s->g, (char *)buf + *got, (unsigned)want);
        if (r < 0) return zlib_error(s, e) ? e->code : tk_err_set(e, TK_EINTERNAL, "%s: gzread failed", s->path);
        *got += (size_t)r;
        s->pos += r;
        if ((size_t)r < want) return zlib_error(s, e);
    }
    return 0;
}

static int parse_header(const uint8_t *h, src *s, tk_nifti *n, int *swap_out, long long *vox_off, tk_err *e) {
    uint32_t sz;
    memcpy(&sz, h, 4);
    uint32_t szs = sz;
    swap_bytes(&szs, 4, 1);
    int swap = sz == HDR_SIZE ? 0 : szs == HDR_SIZE ? 1 : -1;
    if (swap < 0) {
        if (sz == HDR_NIFTI2 || szs == HDR_NIFTI2)
            return bad(e, s, 0, "a NIfTI-2 file (sizeof_hdr %d): only NIfTI-1 is read", HDR_NIFTI2);
        if (memcmp(h + OFF_MAGIC, "n+1", 4) && memcmp(h + OFF_MAGIC, "ni1", 4))
            return bad(e, s, 0, "not a NIfTI-1 file (sizeof_hdr %u, not 348, and no 'n+1' magic at offset 344)", sz);
        return bad(e, s, 0, "bad sizeof_hdr: %u, a NIfTI-1 header has 348 (in either byte order)", sz);
    }
    *swap_out = swap;
    if (memcmp(h + OFF_MAGIC, "ni1", 4) == 0)
        return bad(e, s, OFF_MAGIC, "a NIfTI-1 header/image pair (magic 'ni1'): only single files (magic 'n+1') are "
                   "read; join the .hdr and .img into one .nii");
    if (memcmp(h + OFF_MAGIC, "n+1", 4) != 0)
        return bad(e, s, OFF_MAGIC, "not a NIfTI-1 file: no 'n+1' magic at offset 344 (an ANALYZE 7.5 header?)");
    n->ndim = rd16(h, OFF_DIM, swap);
    if (n->ndim < 1 || n->ndim > 7)
        return bad(e, s, OFF_DIM, "dim[0] is %d: the number of dimensions must be 1 to 7", n->ndim);
    int64_t nvox = 1;
    n->dim[0] = n->ndim;
    for (int i = 1; i < 8; i++) {
        n->dim[i] = 1;
        if (i > n->ndim) continue;
        n->dim[i] = rd16(h, OFF_DIM + 2 * i, swap);
        if (n->dim[i] < 1)
            return bad(e, s, OFF_DIM + 2 * i, "dim[%d] is %lld: every dimension must be at least 1", i, (long long)n->dim[i]);
        nvox *= n->dim[i]; // each factor < 2^15 and the product stays < 2^31 * 2^15 before the check
        if (nvox > TK_NIFTI_MAX_VOXELS)
            return bad(e, s, OFF_DIM + 2 * i, "too many voxels: dims up to dim[%d] hold more than %lld", i,
                       (long long)TK_NIFTI_MAX_VOXELS);
    }
    n->nvox = (size_t)nvox;
    n->datatype = rd16(h, OFF_DATATYPE, swap);
    int size = tk_nifti_dtype_size(n->datatype);
    if (size == 0)
        return bad(e, s, OFF_DATATYPE, "unsupported datatype %s (%d): trainkit reads uint8, int8, int16, uint16, "
                   "int32, uint32, int64, float32 and float64", tk_nifti_dtype_name(n->datatype), n->datatype);
    int bitpix = rd16(h, OFF_BITPIX, swap);
    if (bitpix != 8 * size)
        return bad(e, s, OFF_BITPIX, "bitpix is %d but datatype %s has %d bits", bitpix, tk_nifti_dtype_name(n->datatype),
                   8 * size);
    if (nvox * size > TK_NIFTI_MAX_BYTES)
        return bad(e, s, OFF_DIM, "too much data: %lld bytes of voxels, at most %lld are read", (long long)(nvox * size),
                   (long long)TK_NIFTI_MAX_BYTES);
    for (int i = 0; i < 8; i++) n->pixdim[i] = rdf(h, OFF_PIXDIM + 4 * i, swap);
    double vo = rdf(h, OFF_VOX_OFFSET, swap);
    if (!(vo >= MIN_VOX_OFFSET && vo <= (double)TK_NIFTI_MAX_OFFSET) || vo != floor(vo))
        return bad(e, s, OFF_VOX_OFFSET, "vox_offset is %g: it must be a whole number from 352 to %lld", vo,
                   (long long)TK_NIFTI_MAX_OFFSET);
    *vox_off = (long long)vo;
    n->scl_slope = rdf(h, OFF_SCL_SLOPE, swap);
    n->scl_inter = rdf(h, OFF_SCL_INTER, swap);
    if (n->scl_slope != 0 && isfinite(n->scl_slope) && !isfinite(n->scl_inter))
        return bad(e, s, OFF_SCL_INTER, "scl_inter is %g while scl_slope is a valid scale", n->scl_inter);
    n->xyzt_units = h[OFF_XYZT_UNITS];
    n->qform_code = rd16(h, OFF_QFORM_CODE, swap);
    n->sform_code = rd16(h, OFF_SFORM_CODE, swap);
    for (int i = 0; i < 3; i++) {
        n->quatern[i] = rdf(h, OFF_QUATERN + 4 * i, swap);
        n->qoffset[i] = rdf(h, OFF_QUATERN + 12 + 4 * i, swap);
        for (int j = 0; j < 4; j++) n->srow[i][j] = rdf(h, OFF_SROW + 16 * i + 4 * j, swap);
    }
    return 0;
}

static int read_data(src *s, tk_nifti *n, long long vox_off, int swap, tk_err *e) {
    size_t esize = (size_t)tk_nifti_dtype_size(n->datatype), nbytes = n->nvox * esize;
    long long end = vox_off + (long long)nbytes;
    if (s->direct && s->size != end) // a plain file's size is known: no allocation for a bad one
        return s->size < end ? bad(e, s, s->size, "truncated: the file ends at offset %lld but its dims (%zu "
                                   "voxels) need data up to offset %lld", s->size, n->nvox, end)
                             : bad(e, s, end, "%lld bytes after the data, which ends at offset %lld: the header's "
                                   "dims disagree with the file's size", s->size - end, end);
    // skip the extensions between the header and the data
    uint8_t skip[512];
    while (s->pos < vox_off) {
        size_t want = (size_t)(vox_off - s->pos) < sizeof skip ? (size_t)(vox_off - s->pos) : sizeof skip, got;
        TRY(src_read(s, skip, want, &got, e));
        if (got < want)
            return bad(e, s, s->pos, "truncated: the file ends at offset %lld, before vox_offset %lld", s->pos, vox_off);
    }
    // A .gz grows its buffer with what it really inflates (doubling), so a header that promises
    // gigabytes costs memory only once the stream delivers them.
    size_t cap = s->direct || nbytes < (1u << 20) ? nbytes : (1u << 20), have = 0;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) return tk_err_errno(e, ENOMEM, "%s: out of memory for %zu bytes of voxels", s->path, nbytes);
    int rc = 0;
    while (have < nbytes) {
        if (have == cap) {
            size_t ncap = cap * 2 < nbytes ? cap * 2 : nbytes;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                rc = tk_err_errno(e, ENOMEM, "%s: out of memory for %zu bytes of voxels", s->path, nbytes);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got;
        if ((rc = src_read(s, buf + have, cap - have, &got, e))) break;
        have += got;
        if (have < cap) {
            rc = bad(e, s, s->pos, "truncated: the data ends at offset %lld but its dims (%zu voxels) need data "
                     "up to offset %lld", s->pos, n->nvox, end);
            break;
        }
    }
    if (!rc && !s->direct) { // one byte more must be the end of the stream
        uint8_t extra;
        size_t got;
        rc = src_read(s, &extra, 1, &got, e);
        if (!rc && got)
            rc = bad(e, s, end, "data continues after offset %lld, where the header's dims (%zu voxels) end it", end,
                     n->nvox);
    }
    if (rc) {
        free(buf);
        return rc;
    }
    if (swap && esize > 1) swap_bytes(buf, esize, n->nvox);
    n->data = buf;
    return 0;
}

int tk_nifti_read(const char *path, tk_nifti **out, tk_err *e) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tk_err_errno(e, errno, "%s: cannot open", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return tk_err_errno(e, err, "%s: cannot stat", path);
    }
    src s = {.path = path, .size = (long long)st.st_size};
    if (!(s.g = gzdopen(fd, "rb"))) {
        close(fd);
        return tk_err_errno(e, ENOMEM, "%s: cannot open (zlib)", path);
    }
    gzbuffer(s.g, 1u << 17);
    tk_nifti *n = calloc(1, sizeof *n);
    uint8_t h[HDR_SIZE];
    size_t got = 0;
    int rc = n ? src_read(&s, h, HDR_SIZE, &got, e) : tk_err_errno(e, ENOMEM, "out of memory");
    s.direct = gzdirect(s.g);
    if (!rc && got < HDR_SIZE)
        rc = got >= 4 && (h[0] == 0x5c || h[3] == 0x5c)
                 ? bad(e, &s, (long long)got, "truncated header: the file ends at offset %zu, a NIfTI-1 header "
                       "has 348 bytes", got)
                 : bad(e, &s, (long long)got, "not a NIfTI-1 file: %zu bytes, shorter than the 348-byte header", got);
    int swap = 0;
    long long vox_off = 0;
    if (!rc) rc = parse_header(h, &s, n, &swap, &vox_off, e);
    if (!rc) rc = read_data(&s, n, vox_off, swap, e);
    gzclose(s.g);
    if (rc) {
        tk_nifti_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

int tk_nifti_new(tk_nifti **out, int ndim, const int64_t *dims, int datatype, tk_err *e) {
    *out = NULL;
    int size = tk_nifti_dtype_size(datatype);
    if (!size) return tk_err_set(e, TK_EDATA, "unsupported datatype %s (%d)", tk_nifti_dtype_name(datatype), datatype);
    if (ndim < 1 || ndim > 7) return tk_err_set(e, TK_EDATA, "%d dimensions: NIfTI-1 holds 1 to 7", ndim);
    int64_t nvox = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 1 || dims[i] > 32767) return tk_err_set(e, TK_EDATA, "dimension %d is %lld: NIfTI-1 holds 1 to 32767", i + 1, (long long)dims[i]);
        nvox *= dims[i];
        if (nvox > TK_NIFTI_MAX_VOXELS || nvox * size > TK_NIFTI_MAX_BYTES)
            return tk_err_set(e, TK_EDATA, "more than %lld voxels or %lld bytes", (long long)TK_NIFTI_MAX_VOXELS,
                              (long long)TK_NIFTI_MAX_BYTES);
    }
    tk_nifti *n = calloc(1, sizeof *n);
    if (!n || !(n->data = calloc((size_t)nvox, (size_t)size))) {
        free(n);
        return tk_err_errno(e, ENOMEM, "out of memory");
    }
    n->ndim = ndim;
    n->dim[0] = ndim;
    for (int i = 1; i < 8; i++) {
        n->dim[i] = i <= ndim ? dims[i - 1] : 1;
        n->pixdim[i] = 1;
    }
    n->pixdim[0] = 1;
    n->datatype = datatype;
    n->scl_slope = 1;
    n->nvox = (size_t)nvox;
    *out = n;
    return 0;
}

void tk_nifti_free(tk_nifti *n) {
    if (!n) return;
    free(n->data);
    free(n);
}

// ---- values ----------------------------------------------------------------------------------
// Raw voxel i as a double (exact for every type but int64 beyond 2^53, rounded as numpy does).
static double raw_at(const tk_nifti *n, size_t i) {
    switch (n->datatype) {
    case TK_NIFTI_UINT8: return ((const uint8_t *)n->data)[i];
    case TK_NIFTI_INT8: return ((const int8_t *)n->data)[i];
    case TK_NIFTI_INT16: return ((const int16_t *)n->data)[i];
    case TK_NIFTI_UINT16: return ((const uint16_t *)n->data)[i];
    case TK_NIFTI_INT32: return ((const int32_t *)n->data)[i];
    case TK_NIFTI_UINT32: return ((const uint32_t *)n->data)[i];
    case TK_NIFTI_INT64: return (double)((const int64_t *)n->data)[i];
    case TK_NIFTI_FLOAT32: return ((const float *)n->data)[i];
    default: return ((const double *)n->data)[i];
    }
}

int tk_nifti_to_f32(const tk_nifti *n, float *out, tk_err *e) {
    if (!tk_nifti_dtype_size(n->datatype))
        return tk_err_set(e, TK_EINTERNAL, "tk_nifti_to_f32: datatype %d", n->datatype);
    // nibabel: a slope of 0 or not finite is no scaling; (1, 0) leaves the values as they are, else
    // x * slope (when slope != 1) + inter (when inter != 0), all in float64, then one cast to float32.
    double slope = n->scl_slope, inter = n->scl_inter;
    int scaled = slope != 0 && isfinite(slope) && !(slope == 1 && inter == 0);
    if (scaled && !isfinite(inter)) return tk_err_set(e, TK_EDATA, "scl_inter is not finite");
    for (size_t i = 0; i < n->nvox; i++) {
        double v = raw_at(n, i);
        if (scaled) {
            if (slope != 1) v *= slope;
            if (inter != 0) v += inter;
        }
        out[i] = (float)v;
    }
    return 0;
}

// ---- writing ---------------------------------------------------------------------------------
static void wr16(uint8_t *h, int off, int v) {
    int16_t x = (int16_t)v;
    if (!host_is_le()) swap_bytes(&x, 2, 1);
    memcpy(h + off, &x, 2);
}
static void wr32(uint8_t *h, int off, int32_t x) {
    if (!host_is_le()) swap_bytes(&x, 4, 1);
    memcpy(h + off, &x, 4);
}
static void wrf(uint8_t *h, int off, double v) {
    float f = (float)v;
    int32_t x;
    memcpy(&x, &f, 4);
    wr32(h, off, x);
}

static void build_header(const tk_nifti *n, uint8_t h[MIN_VOX_OFFSET]) {
    memset(h, 0, MIN_VOX_OFFSET);
    wr32(h, 0, HDR_SIZE);
    h[38] = 'r'; // regular: what nibabel and niftilib write
    for (int i = 0; i < 8; i++) wr16(h, OFF_DIM + 2 * i, i == 0 ? n->ndim : i <= n->ndim ? (int)n->dim[i] : 1);
    wr16(h, OFF_DATATYPE, n->datatype);
    wr16(h, OFF_BITPIX, 8 * tk_nifti_dtype_size(n->datatype));
    for (int i = 0; i < 8; i++) wrf(h, OFF_PIXDIM + 4 * i, n->pixdim[i]);
    wrf(h, OFF_VOX_OFFSET, MIN_VOX_OFFSET);
    wrf(h, OFF_SCL_SLOPE, n->scl_slope);
    wrf(h, OFF_SCL_INTER, n->scl_inter);
    h[OFF_XYZT_UNITS] = (uint8_t)n->xyzt_units;
    wr16(h, OFF_QFORM_CODE, n->qform_code);
    wr16(h, OFF_SFORM_CODE, n->sform_code);
    for (int i = 0; i < 3; i++) {
        wrf(h, OFF_QUATERN + 4 * i, n->quatern[i]);
        wrf(h, OFF_QUATERN + 12 + 4 * i, n->qoffset[i]);
        for (int j = 0; j < 4; j++) wrf(h, OFF_SROW + 16 * i + 4 * j, n->srow[i][j]);
    }
    memcpy(h + OFF_MAGIC, "n+1", 4); // bytes 348..351 (no extensions) stay 0
}

typedef struct {
    FILE *fp;
    const char *path;
    z_stream z;
    int gz;
    uint8_t zout[1 << 16];
} sink;

static int sink_put(sink *k, const void *p, size_t n, int finish, tk_err *e) {
    if (!k->gz) return tk_write_all(k->fp, p, n, k->path, e);
    k->z.next_in = (Bytef *)p;
    k->z.avail_in = (uInt)n;
    for (;;) {
        k->z.next_out = k->zout;
        k->z.avail_out = sizeof k->zout;
        int zr = deflate(&k->z, finish ? Z_FINISH : Z_NO_FLUSH);
        if (zr == Z_STREAM_ERROR) return tk_err_set(e, TK_EINTERNAL, "%s: deflate failed", k->path);
        TRY(tk_write_all(k->fp, k->zout, sizeof k->zout - k->z.avail_out, k->path, e));
        if (finish ? zr == Z_STREAM_END : k->z.avail_in == 0 && k->z.avail_out != 0) return 0;
    }
}

int tk_nifti_write(const char *path, const tk_nifti *n, int gz, tk_err *e) {
    int size = tk_nifti_dtype_size(n->datatype);
    if (!size) return tk_err_set(e, TK_EINTERNAL, "tk_nifti_write: datatype %d", n->datatype);
    if (gz < 0 || gz > 9) return tk_err_set(e, TK_EINTERNAL, "tk_nifti_write: gzip level %d", gz);
    sink *k = calloc(1, sizeof *k);
    if (!k) return tk_err_errno(e, ENOMEM, "out of memory");
    k->path = path;
    k->gz = gz;
    // windowBits 15 + 16: a gzip wrapper whose header zlib writes with no name and time 0
    if (gz && deflateInit2(&k->z, gz, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(k);
        return tk_err_errno(e, ENOMEM, "%s: deflateInit2 failed", path);
    }
    tk_afile af;
    int rc = tk_afile_open(&af, path, e);
    if (!rc) {
        k->fp = af.fp;
        uint8_t h[MIN_VOX_OFFSET];
        build_header(n, h);
        rc = sink_put(k, h, sizeof h, 0, e);
        // the data in chunks, little-endian
        static const size_t chunk = 1 << 20;
        uint8_t *tmp = host_is_le() || size == 1 ? NULL : malloc(chunk);
        if (!host_is_le() && size > 1 && !tmp) rc = tk_err_errno(e, ENOMEM, "out of memory");
        size_t nbytes = n->nvox * (size_t)size;
        for (size_t off = 0; !rc && off < nbytes; off += chunk) {
            size_t len = nbytes - off < chunk ? nbytes - off : chunk;
            const uint8_t *p = (const uint8_t *)n->data + off;
            if (tmp) {
                memcpy(tmp, p, len);
                swap_bytes(tmp, (size_t)size, len / (size_t)size);
                p = tmp;
            }
            rc = sink_put(k, p, len, 0, e);
        }
        free(tmp);
        if (!rc && gz) rc = sink_put(k, "", 0, 1, e);
        if (!rc) rc = tk_afile_commit(&af, e);
        else tk_afile_abort(&af);
    }
    if (gz) deflateEnd(&k->z);
    free(k);
    return rc;
}
