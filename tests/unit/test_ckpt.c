// safetensors reader/writer (lib/ckpt): round trip, and each corrupt header case fails with
// TK_EDATA naming the byte offset.
#include <stdint.h>
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "core/crc32c.h"
#include "tk_test.h"

static char dir[64];

static const char *tmp(const char *name) {
    static char p[128];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/tk-ckpt-XXXXXX");
        if (!mkdtemp(dir)) return "/nonexistent";
    }
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void write_raw(const char *path, const char *header, size_t data_bytes) {
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(header);
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(n >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, n, f);
    for (size_t i = 0; i < data_bytes; i++) fputc(0, f);
    fclose(f);
}

TK_TEST(roundtrip_tensors_and_metadata) {
    tk_st_tensor t[2] = {{.name = "a", .dtype = TK_F32, .ndim = 2, .shape = {2, 3}},
                         {.name = "b.bias", .dtype = TK_U8, .ndim = 1, .shape = {5}}};
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint8_t b[5] = {9, 8, 7, 6, 5};
    json_t *meta = json_pack("{s:s, s:s}", "step", "12", "workload", "dlrm");
    tk_st_writer *w;
    tk_err e;
    const char *path = tmp("rt.safetensors");
    CHECK_EQ_INT(tk_st_writer_open(&w, path, t, 2, meta, &e), 0);
    CHECK_EQ_INT(tk_st_writer_put(w, a, 10, &e), 0); // any chunking
    CHECK_EQ_INT(tk_st_writer_put(w, (char *)a + 10, 14, &e), 0);
    CHECK_EQ_INT(tk_st_writer_put(w, b, 5, &e), 0);
    CHECK_EQ_INT(tk_st_writer_commit(w, &e), 0);
    json_decref(meta);
    tk_st_file *f;
    CHECK_EQ_INT(tk_st_open(&f, path, &e), 0);
    if (!f) return;
    CHECK_EQ_INT(f->n, 2);
    CHECK_EQ_INT(f->data_off % 8, 0);
    CHECK_STR(tk_st_meta(f, "step"), "12");
    const tk_st_tensor *ta = tk_st_find(f, "a"), *tb = tk_st_find(f, "b.bias");
    CHECK(ta && tb && ta->shape[1] == 3 && tb->dtype == TK_U8 && tb->begin == 24 && tb->end == 29);
    float ra[6];
    uint8_t rb[5];
    CHECK_EQ_INT(tk_st_read(f, ta, 0, ra, 24, &e), 0);
    CHECK_EQ_INT(tk_st_read(f, tb, 0, rb, 5, &e), 0);
    CHECK(memcmp(ra, a, 24) == 0 && memcmp(rb, b, 5) == 0);
    tk_st_close(f);
}

TK_TEST(short_write_is_refused_and_leaves_nothing) {
    tk_st_tensor t = {.name = "x", .dtype = TK_I32, .ndim = 1, .shape = {4}};
    tk_st_writer *w;
    tk_err e;
    const char *path = tmp("short.safetensors");
    CHECK_EQ_INT(tk_st_writer_open(&w, path, &t, 1, NULL, &e), 0);
    int32_t x[3] = {1, 2, 3};
    CHECK_EQ_INT(tk_st_writer_put(w, x, 12, &e), 0);
    CHECK_EQ_INT(tk_st_writer_commit(w, &e), TK_EINTERNAL);
    CHECK(access(path, F_OK) != 0);
}

static void expect_bad(const char *name, const char *header, size_t data, const char *where,
                       const char *what, int *tk_failed_) {
    const char *path = tmp(name);
    write_raw(path, header, data);
    tk_st_file *f = NULL;
    tk_err e;
    tk_err_clear(&e);
    CHECK_EQ_INT(tk_st_open(&f, path, &e), TK_EDATA);
    char want[256];
    snprintf(want, sizeof want, "%s: %s", path, where);
    CHECK_STR(e.where, want);
    CHECK(strstr(e.what, what) != NULL);
    if (!strstr(e.what, what)) printf("#     what: %s\n", e.what);
    tk_st_close(f);
}

TK_TEST(corrupt_headers_name_the_offset) {
    expect_bad("json.st", "{\"a\": {\"dtype\": \"F32\",, }", 0, "offset 30", "invalid JSON header", tk_failed_);
    expect_bad("dtype.st", "{\"a\": {\"dtype\": \"F33\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "offset 9", "unknown dtype 'F33'", tk_failed_);
    expect_bad("size.st", "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 8,
               "offset 9", "do not match shape and dtype", tk_failed_);
    expect_bad("past.st", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 2,
               "offset 9", "ends past the end of the file", tk_failed_);
    expect_bad("overlap.st",
               "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
               "\"b\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [2, 6]}}",
               6, "offset 69", "overlaps", tk_failed_);
    expect_bad("fields.st", "{\"a\": {\"dtype\": \"F32\"}}", 0, "offset 9", "needs dtype", tk_failed_);
    expect_bad("meta.st", "{\"__metadata__\": {\"step\": 3}}", 0, "offset 9", "not a string", tk_failed_);
    expect_bad("array.st", "[1, 2]", 0, "offset 8", "not a JSON object", tk_failed_);
    // A header length larger than the file.
    const char *path = tmp("len.st");
    FILE *fp = fopen(path, "wb");
    unsigned char le[8] = {0xff, 0xff, 0, 0, 0, 0, 0, 0};
    fwrite(le, 1, 8, fp);
    fwrite("{}", 1, 2, fp);
    fclose(fp);
    tk_st_file *f = NULL;
    tk_err e;
    CHECK_EQ_INT(tk_st_open(&f, path, &e), TK_EDATA);
    CHECK(strstr(e.what, "header length 65535 exceeds the file size") != NULL);
    CHECK(strstr(e.where, "offset 0") != NULL);
    // Too short for the length field.
    fp = fopen(path, "wb");
    fwrite(le, 1, 3, fp);
    fclose(fp);
    CHECK_EQ_INT(tk_st_open(&f, path, &e), TK_EDATA);
    CHECK_EQ_INT(tk_st_open(&f, tmp("missing.st"), &e), TK_EIO);
}

// The writer puts a CRC-32C of every tensor in the metadata; a flipped bit in the data is found
// by tk_st_read_verified, which names the tensor and its offset.
static int keep_chunk(void *arg, uint64_t off, const void *p, size_t n, tk_err *e) {
    (void)e;
    memcpy((char *)arg + off, p, n);
    return 0;
}

TK_TEST(checksums_written_and_a_flipped_bit_found) {
    tk_st_tensor t[3] = {{.name = "w", .dtype = TK_F32, .ndim = 1, .shape = {1000}},
                         {.name = "empty", .dtype = TK_U8, .ndim = 1, .shape = {0}},
                         {.name = "b", .dtype = TK_U8, .ndim = 1, .shape = {3}}};
    float w[1000];
    for (int i = 0; i < 1000; i++) w[i] = (float)i * 0.5f;
    uint8_t b[3] = {1, 2, 3};
    tk_st_writer *wr;
    tk_err e;
    const char *path = tmp("crc.safetensors");
    CHECK_EQ_INT(tk_st_writer_open(&wr, path, t, 3, NULL, &e), 0);
    CHECK_EQ_INT(tk_st_writer_put(wr, w, 3999, &e), 0); // a put spanning two tensors
    CHECK_EQ_INT(tk_st_writer_put(wr, (char *)w + 3999, 1, &e), 0);
    CHECK_EQ_INT(tk_st_writer_put(wr, b, 3, &e), 0);
    CHECK_EQ_INT(tk_st_writer_commit(wr, &e), 0);
    tk_st_file *f;
    CHECK_EQ_INT(tk_st_open(&f, path, &e), 0);
    if (!f) return;
    CHECK_EQ_INT(f->ncrc, 3);
    const tk_st_tensor *tw = tk_st_find(f, "w"), *te = tk_st_find(f, "empty");
    char want[16];
    snprintf(want, sizeof want, "%08x", tk_crc32c(0, w, sizeof w));
    CHECK_STR(tk_st_meta(f, "crc32c.w"), want);
    CHECK_STR(tk_st_meta(f, "crc32c.empty"), "00000000");
    CHECK(te && te->has_crc && te->crc == 0);
    float back[1000];
    char buf[64];
    CHECK_EQ_INT(tk_st_read_verified(f, tw, keep_chunk, back, buf, sizeof buf, &e), 0);
    CHECK(memcmp(back, w, sizeof w) == 0);
    uint64_t at = f->data_off + tw->begin + 1234;
    tk_st_close(f);
    // Flip one bit of w's data.
    FILE *fp = fopen(path, "r+b");
    fseek(fp, (long)at, SEEK_SET);
    int c = fgetc(fp);
    fseek(fp, (long)at, SEEK_SET);
    fputc(c ^ 0x10, fp);
    fclose(fp);
    CHECK_EQ_INT(tk_st_open(&f, path, &e), 0);
    if (!f) return;
    tw = tk_st_find(f, "w");
    CHECK_EQ_INT(tk_st_read_verified(f, tw, keep_chunk, back, buf, sizeof buf, &e), TK_EDATA);
    CHECK(strstr(e.what, "tensor 'w': checksum mismatch") != NULL);
    snprintf(want, sizeof want, "offset %llu", (unsigned long long)(f->data_off + tw->begin));
    CHECK(strstr(e.where, want) != NULL);
    tk_st_close(f);
}

TK_TEST(foreign_files_without_checksums_read) {
    const char *path = tmp("foreign.st");
    write_raw(path, "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 4);
    tk_st_file *f;
    tk_err e;
    CHECK_EQ_INT(tk_st_open(&f, path, &e), 0);
    if (!f) return;
    CHECK_EQ_INT(f->ncrc, 0);
    uint8_t back[4] = {9, 9, 9, 9}, buf[2];
    CHECK_EQ_INT(tk_st_read_verified(f, tk_st_find(f, "a"), keep_chunk, back, buf, 2, &e), 0);
    CHECK(back[0] == 0 && back[3] == 0);
    tk_st_close(f);
    write_raw(path, "{\"__metadata__\": {\"crc32c.a\": \"12zz\"}, \"a\": {\"dtype\": \"U8\", \"shape\": [4], "
                    "\"data_offsets\": [0, 4]}}", 4);
    CHECK_EQ_INT(tk_st_open(&f, path, &e), TK_EDATA);
    CHECK(strstr(e.what, "metadata 'crc32c.a' is not 8 hex digits") != NULL);
}
