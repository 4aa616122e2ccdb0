// NIfTI-1 reader and writer (lib/nifti). The files are built here byte by byte (a header written
// field by field in either byte order, gzip through zlib's gz* API), not by the writer under
// test, and each refusal must be TK_EDATA naming the file and the byte offset.
//
// Also a driver for tests/cli/nifti_oracle.py: `test_nifti --dump FILE PREFIX` reads FILE, prints
// its header as one JSON line and writes PREFIX.raw (the voxels, host order, the file's datatype)
// and PREFIX.f32 (tk_nifti_to_f32); an error goes to stderr with its exit code.
#include <stdint.h>
#include <unistd.h>
#include <zlib.h>

#include "nifti/nifti.h"

#define main tk_test_main
#include "tk_test.h"
#undef main

// ---- a NIfTI-1 file by hand --------------------------------------------------------------------
typedef struct {
    uint8_t b[1 << 16];
    size_t n;
    int be; // big-endian fields
} buf;

static void put(buf *f, size_t off, const void *p, int size) {
    const uint8_t *s = p;
    for (int i = 0; i < size; i++) f->b[off + i] = s[f->be ? size - 1 - i : i]; // host is little-endian
    if (off + (size_t)size > f->n) f->n = off + (size_t)size;
}
static void put16(buf *f, size_t off, int v) {
    int16_t x = (int16_t)v;
    put(f, off, &x, 2);
}
static void put32(buf *f, size_t off, int32_t v) { put(f, off, &v, 4); }
static void putf(buf *f, size_t off, float v) { put(f, off, &v, 4); }

// A header for dims (nd of them), datatype/bitpix, vox_offset 352, slope 1 / inter 0.
static void header(buf *f, int be, int nd, const int *dims, int datatype, int bitpix) {
    memset(f, 0, sizeof *f);
    f->be = be;
    put32(f, 0, 348);
    put16(f, 40, nd);
    for (int i = 1; i < 8; i++) put16(f, 40 + 2 * i, i <= nd ? dims[i - 1] : 1);
    put16(f, 70, datatype);
    put16(f, 72, bitpix);
    for (int i = 0; i < 8; i++) putf(f, 76 + 4 * i, i == 0 ? -1.0f : 0.5f * (float)i);
    putf(f, 108, 352);
    putf(f, 112, 1);
    memcpy(f->b + 344, "n+1", 4);
    f->n = 352;
}

static const char *tmp(const char *name) { return tk_test_path("tk-nifti", name); }

static void save(const buf *f, const char *path, int gz) {
    if (gz) {
        gzFile g = gzopen(path, "wb6");
        gzwrite(g, f->b, (unsigned)f->n);
        gzclose(g);
    } else {
        FILE *fp = fopen(path, "wb");
        fwrite(f->b, 1, f->n, fp);
        fclose(fp);
    }
}

// The read must fail with TK_EDATA, where = "PATH: offset OFF" and what containing text.
static int fails_at(const char *path, long long off, const char *text) {
    tk_nifti *n = (tk_nifti *)1;
    tk_err e = {0};
    int rc = tk_nifti_read(path, &n, &e);
    char where[600];
    snprintf(where, sizeof where, "%s: offset %lld", path, off);
    int ok = rc == TK_EDATA && n == NULL && strcmp(e.where, where) == 0 && strstr(e.what, text);
    if (!ok) printf("#   rc %d where '%s' (want '%s') what '%s' (want '%s')\n", rc, e.where, where, e.what, text);
    return ok;
}

// f saved to path (gzip when gz) must be refused so.
static int refused(const buf *f, const char *path, int gz, long long off, const char *text) {
    save(f, path, gz);
    return fails_at(path, off, text);
}

// ---- datatypes, byte orders, gzip --------------------------------------------------------------
static const struct { int code, size; } types[] = {{2, 1}, {256, 1}, {4, 2}, {512, 2}, {8, 4}, {768, 4},
                                                   {1024, 8}, {16, 4}, {64, 8}};

// Voxel i of datatype code, as its bytes in host order, and its value as a double.
static double value(int code, int i, uint8_t *bytes) {
    double v;
    switch (code) {
    case 2: { uint8_t x = (uint8_t)(250 - i); memcpy(bytes, &x, 1); return x; }
    case 256: { int8_t x = (int8_t)(i * 37 - 100); memcpy(bytes, &x, 1); return x; }
    case 4: { int16_t x = (int16_t)(i * 3001 - 30000); memcpy(bytes, &x, 2); return x; }
    case 512: { uint16_t x = (uint16_t)(65535 - i * 4099); memcpy(bytes, &x, 2); return x; }
    case 8: { int32_t x = (int32_t)((int64_t)i * 200000001 - 2000000000); memcpy(bytes, &x, 4); return x; }
    case 768: { uint32_t x = 4000000000u - (uint32_t)i * 123456789u; memcpy(bytes, &x, 4); return x; }
    case 1024: { int64_t x = (int64_t)i * 1000000000000001LL - 9000000000000000000LL; memcpy(bytes, &x, 8); return (double)x; }
    case 16: { float x = (float)i * -1.25f + 3.0f; memcpy(bytes, &x, 4); return x; }
    default: v = (double)i * 0.1 - 1e300 * (i == 3); memcpy(bytes, &v, 8); return v;
    }
}

TK_TEST(every_datatype_both_byte_orders_plain_and_gz) {
    int dims[3] = {3, 2, 2}; // 12 voxels, dim[1] fastest
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int be = 0; be < 2; be++)
            for (int gz = 0; gz < 2; gz++) {
                buf f;
                header(&f, be, 3, dims, types[t].code, 8 * types[t].size);
                uint8_t want[12 * 8];
                double wantv[12];
                for (int i = 0; i < 12; i++) {
                    uint8_t b[8];
                    wantv[i] = value(types[t].code, i, b);
                    memcpy(want + i * types[t].size, b, (size_t)types[t].size);
                    put(&f, 352 + (size_t)i * (size_t)types[t].size, b, types[t].size);
                }
                const char *path = tmp(gz ? "t.nii.gz" : "t.nii");
                save(&f, path, gz);
                tk_nifti *n;
                tk_err e = {0};
                int rc = tk_nifti_read(path, &n, &e);
                CHECK_EQ_INT(rc, 0);
                if (rc) {
                    printf("#   %s be %d gz %d: %s %s\n", tk_nifti_dtype_name(types[t].code), be, gz, e.where, e.what);
                    continue;
                }
                CHECK_EQ_INT(n->datatype, types[t].code);
                CHECK_EQ_INT(n->ndim, 3);
                CHECK(n->dim[1] == 3 && n->dim[2] == 2 && n->dim[3] == 2 && n->dim[4] == 1 && n->nvox == 12);
                CHECK(n->pixdim[0] == -1 && n->pixdim[1] == 0.5 && n->pixdim[3] == 1.5 && n->pixdim[7] == 3.5);
                CHECK(memcmp(n->data, want, 12 * (size_t)types[t].size) == 0);
                float out[12];
                CHECK_EQ_INT(tk_nifti_to_f32(n, out, &e), 0);
                for (int i = 0; i < 12; i++) CHECK(out[i] == (float)wantv[i]);
                tk_nifti_free(n);
            }
}

TK_TEST(header_fields_kept) {
    buf f;
    int dims[2] = {2, 1};
    header(&f, 1, 2, dims, 4, 16);
    put16(&f, 252, 1);
    put16(&f, 254, 2);
    f.b[123] = 10; // mm + seconds
    for (int i = 0; i < 6; i++) putf(&f, 256 + 4 * i, 0.25f * (float)(i + 1));
    for (int i = 0; i < 12; i++) putf(&f, 280 + 4 * i, (float)(i - 6));
    f.n = 356;
    save(&f, tmp("h.nii"), 0);
    tk_nifti *n;
    tk_err e = {0};
    CHECK_EQ_INT(tk_nifti_read(tmp("h.nii"), &n, &e), 0);
    if (!n) return;
    CHECK_EQ_INT(n->qform_code, 1);
    CHECK_EQ_INT(n->sform_code, 2);
    CHECK_EQ_INT(n->xyzt_units, 10);
    CHECK(n->quatern[0] == 0.25 && n->quatern[2] == 0.75 && n->qoffset[0] == 1 && n->qoffset[2] == 1.5);
    CHECK(n->srow[0][0] == -6 && n->srow[1][2] == 0 && n->srow[2][3] == 5);
    CHECK(n->ndim == 2 && n->dim[3] == 1 && n->nvox == 2);
    tk_nifti_free(n);
}

TK_TEST(extensions_between_header_and_data_are_skipped) {
    buf f;
    int dims[1] = {2};
    header(&f, 0, 1, dims, 2, 8);
    putf(&f, 108, 400);
    f.b[348] = 1; // extension flag; the bytes up to 400 are an extension we do not read
    for (int i = 352; i < 400; i++) f.b[i] = 0xEE;
    f.b[400] = 7;
    f.b[401] = 9;
    f.n = 402;
    for (int gz = 0; gz < 2; gz++) {
        save(&f, tmp("x.nii"), gz);
        tk_nifti *n;
        tk_err e = {0};
        CHECK_EQ_INT(tk_nifti_read(tmp("x.nii"), &n, &e), 0);
        if (!n) return;
        CHECK(((uint8_t *)n->data)[0] == 7 && ((uint8_t *)n->data)[1] == 9);
        tk_nifti_free(n);
    }
}

// ---- scaling, as nibabel's get_fdata() then astype(float32) ----------------------------------
static void scaled(float slope, float inter, int datatype, const void *vals, int nv, float *out, int *rc) {
    buf f;
    int size = datatype == 4 ? 2 : 4;
    header(&f, 0, 1, &nv, datatype, 8 * size);
    putf(&f, 112, slope);
    putf(&f, 116, inter);
    for (int i = 0; i < nv; i++) put(&f, 352 + (size_t)(i * size), (const uint8_t *)vals + i * size, size);
    save(&f, tmp("s.nii"), 0);
    tk_nifti *n;
    tk_err e = {0};
    *rc = tk_nifti_read(tmp("s.nii"), &n, &e);
    if (!*rc) {
        *rc = tk_nifti_to_f32(n, out, &e);
        tk_nifti_free(n);
    }
}

TK_TEST(slope_and_inter) {
    int16_t v[3] = {-3, 0, 7};
    float out[3];
    int rc;
    scaled(2.5f, -1.0f, 4, v, 3, out, &rc); // x * 2.5 - 1
    CHECK(rc == 0 && out[0] == -8.5f && out[1] == -1.0f && out[2] == 16.5f);
    scaled(0.0f, 5.0f, 4, v, 3, out, &rc); // slope 0: no scaling (inter ignored too)
    CHECK(rc == 0 && out[0] == -3 && out[1] == 0 && out[2] == 7);
    scaled(NAN, 5.0f, 4, v, 3, out, &rc); // a slope that is not finite: no scaling
    CHECK(rc == 0 && out[0] == -3 && out[2] == 7);
    scaled(1.0f, 1024.0f, 4, v, 3, out, &rc); // intercept only (KiTS-like HU offsets)
    CHECK(rc == 0 && out[0] == 1021 && out[2] == 1031);
    // float data, slope 1 / inter 0: left as it is (a negative zero stays negative)
    float fv[2] = {-0.0f, 0.1f};
    scaled(1.0f, 0.0f, 16, fv, 2, out, &rc);
    CHECK(rc == 0 && signbit(out[0]) && out[1] == 0.1f);
    // float data with a slope: in double, then rounded once (0.1f * 3 in double, to float)
    scaled(3.0f, 0.0f, 16, fv, 2, out, &rc);
    CHECK(rc == 0 && out[1] == (float)((double)0.1f * 3.0));
}

// ---- refusals: TK_EDATA, the file and the offset ---------------------------------------------
TK_TEST(not_nifti_and_bad_header) {
    const char *p = tmp("bad.nii");
    FILE *fp = fopen(p, "wb");
    fputs("this is not a NIfTI file, it is text\n", fp);
    fclose(fp);
    CHECK(fails_at(p, 37, "not a NIfTI-1 file"));
    buf f;
    int dims[3] = {4, 4, 4};
    header(&f, 0, 3, dims, 2, 8);
    f.n = 352 + 64;
    memset(f.b, 'x', 4); // sizeof_hdr "xxxx", magic kept
    CHECK(refused(&f, p, 0, 0, "bad sizeof_hdr"));
    memcpy(f.b + 344, "abc", 4);
    CHECK(refused(&f, p, 0, 0, "not a NIfTI-1 file"));
    header(&f, 0, 3, dims, 2, 8);
    f.n = 352 + 64;
    put32(&f, 0, 540);
    CHECK(refused(&f, p, 0, 0, "NIfTI-2"));
    header(&f, 1, 3, dims, 2, 8);
    f.n = 352 + 64;
    memcpy(f.b + 344, "ni1", 4);
    CHECK(refused(&f, p, 0, 344, "header/image pair"));
    memcpy(f.b + 344, "n+2", 4);
    CHECK(refused(&f, p, 0, 344, "no 'n+1' magic"));
    header(&f, 0, 3, dims, 2, 8);
    f.n = 200;
    CHECK(refused(&f, p, 0, 200, "truncated header"));
}

// One field of a good header (4x4x4 uint8) changed: the offset the error must name and its text.
static const struct {
    int off, is_float;
    double value;
    int want_off;
    const char *text;
} mutations[] = {
    {40, 0, 0, 40, "dim[0] is 0"},
    {40, 0, 8, 40, "dim[0] is 8"},
    {44, 0, 0, 44, "dim[2] is 0"},
    {44, 0, -5, 44, "dim[2] is -5"},
    {70, 0, 32, 70, "unsupported datatype complex64"},
    {70, 0, 1280, 70, "unsupported datatype uint64"},
    {70, 0, 99, 70, "unsupported datatype unknown (99)"},
    {70, 0, 4, 72, "bitpix is 8 but datatype int16 has 16 bits"},
    {108, 1, 348, 108, "vox_offset is 348"},
    {108, 1, 352.5, 108, "vox_offset is 352.5"},
    {108, 1, NAN, 108, "vox_offset is nan"},
    {108, 1, 1e30, 108, "vox_offset is 1e+30"},
    {116, 1, INFINITY, 116, "scl_inter is inf"},
};

TK_TEST(bad_dims_types_offsets) {
    const char *p = tmp("bad.nii");
    int dims[3] = {4, 4, 4};
    buf f;
    for (int be = 0; be < 2; be++) {
        for (size_t i = 0; i < sizeof mutations / sizeof mutations[0]; i++) {
            header(&f, be, 3, dims, 2, 8);
            f.n = 352 + 64;
            if (mutations[i].is_float) putf(&f, (size_t)mutations[i].off, (float)mutations[i].value);
            else put16(&f, (size_t)mutations[i].off, (int)mutations[i].value);
            CHECK(refused(&f, p, 0, mutations[i].want_off, mutations[i].text));
        }
        header(&f, be, 3, dims, 2, 8);
        f.n = 352 + 64;
        put16(&f, 50, -1);     // dim[5] is past dim[0] = 3: ignored
        putf(&f, 112, 0);      // no scaling: then the intercept is not used
        putf(&f, 116, NAN);
        save(&f, p, 0);
        tk_nifti *n;
        tk_err e = {0};
        CHECK_EQ_INT(tk_nifti_read(p, &n, &e), 0);
        if (n) CHECK(n->dim[5] == 1 && n->nvox == 64);
        tk_nifti_free(n);
        // 32767^3 voxels: refused at dim[3] before anything is allocated
        int big[3] = {32767, 32767, 32767};
        header(&f, be, 3, big, 2, 8);
        CHECK(refused(&f, p, 0, 46, "too many voxels"));
        // 32767 * 32767 * 2 voxels (< 2^31) of float64: more bytes than the limit
        int wide[3] = {32767, 32767, 2};
        header(&f, be, 3, wide, 64, 64);
        CHECK(refused(&f, p, 0, 40, "too much data"));
    }
}

TK_TEST(data_size_must_match_dims) {
    const char *p = tmp("d.nii"), *pz = tmp("d.nii.gz");
    int dims[3] = {4, 4, 4};
    buf f;
    header(&f, 0, 3, dims, 4, 16); // 128 bytes of data from 352 to 480
    f.n = 352 + 100;
    CHECK(refused(&f, p, 0, 452, "truncated: the file ends at offset 452"));
    CHECK(refused(&f, pz, 6, 452, "truncated: the data ends at offset 452"));
    f.n = 352 + 130;
    CHECK(refused(&f, p, 0, 480, "2 bytes after the data"));
    CHECK(refused(&f, pz, 6, 480, "data continues after offset 480"));
    f.n = 300; // a gzip of a short header
    CHECK(refused(&f, pz, 6, 300, "truncated header"));
    header(&f, 0, 3, dims, 4, 16);
    putf(&f, 108, 1024);
    f.n = 600;
    CHECK(refused(&f, pz, 6, 600, "before vox_offset 1024"));
}

// The bytes of path, or NULL; *n its size.
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    uint8_t *b = malloc(1 << 20);
    *n = fread(b, 1, 1 << 20, fp);
    fclose(fp);
    return b;
}

TK_TEST(truncated_and_corrupt_gzip_name_zlib) {
    const char *pz = tmp("g.nii.gz"), *pc = tmp("cut.nii.gz");
    int dims[3] = {16, 16, 8};
    buf f;
    header(&f, 0, 3, dims, 4, 16);
    for (int i = 0; i < 16 * 16 * 8; i++) put16(&f, 352 + 2 * (size_t)i, (i * 7919) % 30011);
    save(&f, pz, 6);
    size_t n;
    uint8_t *b = slurp(pz, &n);
    CHECK(b && n > 200);
    if (!b) return;
    FILE *fp = fopen(pc, "wb");
    fwrite(b, 1, n / 2, fp); // the compressed stream cut in half
    fclose(fp);
    tk_nifti *v = (tk_nifti *)1;
    tk_err e = {0};
    CHECK_EQ_INT(tk_nifti_read(pc, &v, &e), TK_EDATA);
    CHECK(v == NULL && strstr(e.what, "unexpected end of file") && strstr(e.what, "(zlib)") && strcmp(e.lib, "zlib") == 0);
    CHECK(strncmp(e.where, pc, strlen(pc)) == 0 && strstr(e.where, ": offset "));
    b[n - 6] ^= 0x55; // the CRC-32 of the gzip trailer
    fp = fopen(pc, "wb");
    fwrite(b, 1, n, fp);
    fclose(fp);
    CHECK_EQ_INT(tk_nifti_read(pc, &v, &e), TK_EDATA);
    CHECK(strstr(e.what, "incorrect data check") != NULL && strcmp(e.lib, "zlib") == 0);
    // zlib checks the CRC when its buffer reaches the end: the offset is where the read had got to
    CHECK(strncmp(e.where, pc, strlen(pc)) == 0 && strstr(e.where, ": offset "));
    free(b);
}

TK_TEST(missing_file_is_io) {
    tk_nifti *n;
    tk_err e = {0};
    CHECK_EQ_INT(tk_nifti_read(tmp("nope.nii.gz"), &n, &e), TK_EIO);
    CHECK(n == NULL);
}

// ---- the writer ------------------------------------------------------------------------------
TK_TEST(writer_round_trip_and_bytes) {
    int64_t d[3] = {5, 4, 3};
    tk_nifti *n;
    tk_err e = {0};
    CHECK_EQ_INT(tk_nifti_new(&n, 3, d, TK_NIFTI_INT16, &e), 0);
    if (!n) return;
    for (size_t i = 0; i < n->nvox; i++) ((int16_t *)n->data)[i] = (int16_t)(i * 97 - 1000);
    n->pixdim[1] = 2.5;
    n->scl_inter = -1024;
    n->sform_code = 2;
    n->srow[2][0] = -2.5;
    for (int gz = 0; gz <= 9; gz += 9) {
        const char *p = tmp(gz ? "w.nii.gz" : "w.nii");
        CHECK_EQ_INT(tk_nifti_write(p, n, gz, &e), 0);
        size_t len;
        uint8_t *b = slurp(p, &len);
        CHECK(b != NULL);
        if (!b) continue;
        if (!gz) { // the header as NIfTI-1 lays it out, little-endian
            int32_t sz;
            float vo, inter, s20;
            int16_t dim1, dt;
            memcpy(&sz, b, 4);
            memcpy(&dim1, b + 42, 2);
            memcpy(&dt, b + 70, 2);
            memcpy(&vo, b + 108, 4);
            memcpy(&inter, b + 116, 4);
            memcpy(&s20, b + 312, 4);
            CHECK(sz == 348 && dim1 == 5 && dt == 4 && vo == 352 && inter == -1024 && s20 == -2.5f);
            CHECK(memcmp(b + 344, "n+1", 4) == 0 && len == 352 + 120);
            CHECK(memcmp(b + 352, n->data, 120) == 0);
        } else {
            CHECK(b[0] == 0x1f && b[1] == 0x8b && b[4] == 0 && b[5] == 0 && b[6] == 0 && b[7] == 0); // no mtime
        }
        tk_nifti *r;
        CHECK_EQ_INT(tk_nifti_read(p, &r, &e), 0);
        if (r) {
            CHECK(r->nvox == 60 && memcmp(r->data, n->data, 120) == 0 && r->pixdim[1] == 2.5 && r->scl_inter == -1024);
            CHECK(r->sform_code == 2 && r->srow[2][0] == -2.5 && r->dim[3] == 3);
        }
        tk_nifti_free(r);
        // the same volume gives the same bytes
        size_t len2;
        CHECK_EQ_INT(tk_nifti_write(tmp("w2"), n, gz, &e), 0);
        uint8_t *b2 = slurp(tmp("w2"), &len2);
        CHECK(b2 && len2 == len && memcmp(b, b2, len) == 0);
        free(b);
        free(b2);
    }
    tk_nifti_free(n);
    CHECK_EQ_INT(tk_nifti_new(&n, 3, (int64_t[]){5, 0, 3}, TK_NIFTI_UINT8, &e), TK_EDATA);
    CHECK_EQ_INT(tk_nifti_new(&n, 3, d, 32, &e), TK_EDATA);
}

TK_TEST(cleanup) { CHECK_EQ_INT(tk_test_rmdir(), 0); }

// ---- the oracle's driver ---------------------------------------------------------------------
static int write_file(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    size_t w = fwrite(p, 1, n, fp);
    return fclose(fp) || w != n ? -1 : 0;
}

static int dump(const char *path, const char *prefix) {
    tk_nifti *n;
    tk_err e = {0};
    int rc = tk_nifti_read(path, &n, &e);
    float *f = rc ? NULL : malloc(n->nvox * sizeof(float) + 1);
    if (!rc && !f) rc = tk_err_set(&e, TK_EIO, "out of memory");
    if (!rc) rc = tk_nifti_to_f32(n, f, &e);
    if (rc) {
        char msg[1400];
        tk_err_format(&e, msg, sizeof msg);
        fprintf(stderr, "test_nifti: error: %s\n", msg);
        tk_nifti_free(n);
        free(f);
        return rc;
    }
    char p[4200];
    snprintf(p, sizeof p, "%s.raw", prefix);
    rc = write_file(p, n->data, n->nvox * (size_t)tk_nifti_dtype_size(n->datatype));
    snprintf(p, sizeof p, "%s.f32", prefix);
    rc |= write_file(p, f, n->nvox * sizeof(float));
    printf("{\"datatype\": \"%s\", \"dim\": [", tk_nifti_dtype_name(n->datatype));
    for (int i = 0; i < 8; i++) printf("%s%lld", i ? ", " : "", (long long)n->dim[i]);
    printf("], \"pixdim\": [");
    for (int i = 0; i < 8; i++) printf("%s%.17g", i ? ", " : "", n->pixdim[i]);
    printf("], \"scl_slope\": %.17g, \"scl_inter\": %.17g, \"qform_code\": %d, \"sform_code\": %d, "
           "\"xyzt_units\": %d, \"quatern\": [%.17g, %.17g, %.17g], \"qoffset\": [%.17g, %.17g, %.17g], \"srow\": [",
           n->scl_slope, n->scl_inter, n->qform_code, n->sform_code, n->xyzt_units, n->quatern[0], n->quatern[1],
           n->quatern[2], n->qoffset[0], n->qoffset[1], n->qoffset[2]);
    for (int i = 0; i < 12; i++) printf("%s%.17g", i ? ", " : "", n->srow[i / 4][i % 4]);
    printf("], \"nvox\": %zu}\n", n->nvox);
    tk_nifti_free(n);
    free(f);
    return rc ? TK_EIO : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--dump") == 0) return dump(argv[2], argv[3]);
    return tk_test_main(argc, argv);
}
