// .tks ragged fields (man/man5/tks.5 "Ragged fields"): round trips through files and pipes, the
// frame byte layout checked by decompressing with libzstd directly (not through lib/tks), the
// version rules, frame closing by size, and the corruption cases with their exact messages.
#include <fcntl.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "tks/tks.h"
#include "tk_test.h"

static const char *tpath(const char *name) { return tk_test_path("test_tks_ragged", name); }

// jpeg: u8 [-1]; label: i16 []; pts: f32 [-1, 3] (rows of 12 bytes); hw: i32 [2].
static tks_schema mixed_schema(void) {
    tks_schema s;
    memset(&s, 0, sizeof s);
    const struct { const char *n; tks_dtype t; int nd; int64_t d0, d1; } f[] = {
        {"jpeg", TKS_U8, 1, TKS_RAGGED, 0}, {"label", TKS_I16, 0, 0, 0},
        {"pts", TKS_F32, 2, TKS_RAGGED, 3}, {"hw", TKS_I32, 1, 2, 0}};
    for (int i = 0; i < 4; i++) {
        snprintf(s.f[i].name, 64, "%s", f[i].n);
        s.f[i].dtype = f[i].t;
        s.f[i].ndim = f[i].nd;
        s.f[i].shape[0] = f[i].d0;
        s.f[i].shape[1] = f[i].d1;
    }
    s.nfields = 4;
    return s;
}

// Record r: jpeg has (r * 37) % 300 bytes (0 for r % 300 == 0), pts (r % 4) rows.
static size_t jpeg_len(uint64_t r) { return (size_t)((r * 37) % 300); }
static size_t pts_rows(uint64_t r) { return (size_t)(r % 4); }
static uint8_t jbyte(uint64_t r, size_t j) { return (uint8_t)(r * 7 + j * 13 + 1); }

// Columns of records [first, first + n) of the mixed schema.
typedef struct {
    uint8_t *jpeg;
    uint64_t *joff;
    int16_t *label;
    float *pts;
    uint64_t *poff;
    int32_t *hw;
} mixed_cols;

static mixed_cols make_mixed(uint64_t first, size_t n) {
    mixed_cols c;
    c.joff = malloc((n + 1) * 8);
    c.poff = malloc((n + 1) * 8);
    c.label = malloc(n * 2 + 1);
    c.hw = malloc(n * 8 + 1);
    c.joff[0] = 5; // offsets need not start at 0
    c.poff[0] = 0;
    for (size_t i = 0; i < n; i++) {
        c.joff[i + 1] = c.joff[i] + jpeg_len(first + i);
        c.poff[i + 1] = c.poff[i] + pts_rows(first + i) * 12;
    }
    c.jpeg = malloc(c.joff[n] + 1);
    c.pts = malloc(c.poff[n] + 4);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = first + i;
        for (size_t j = 0; j < jpeg_len(r); j++) c.jpeg[c.joff[i] + j] = jbyte(r, j);
        for (size_t k = 0; k < pts_rows(r) * 3; k++) c.pts[c.poff[i] / 4 + k] = (float)r + 0.25f * (float)k;
        c.label[i] = (int16_t)(r % 1000);
        c.hw[2 * i] = (int32_t)(100 + r);
        c.hw[2 * i + 1] = (int32_t)(200 + r);
    }
    return c;
}

static void free_mixed(mixed_cols *c) {
    free(c->jpeg);
    free(c->joff);
    free(c->label);
    free(c->pts);
    free(c->poff);
    free(c->hw);
}

static int write_mixed(const char *path, uint64_t n, size_t rpf, size_t frame_bytes, size_t chunk) {
    tks_schema s = mixed_schema();
    tks_writer *w;
    tk_err e;
    tks_writer_opts o = {.records_per_frame = rpf, .frame_bytes = frame_bytes};
    if (tks_writer_open(&w, path, &s, &o, &e)) {
        printf("# open: %s\n", e.what);
        return -1;
    }
    for (uint64_t done = 0; done < n;) {
        size_t k = n - done < chunk ? (size_t)(n - done) : chunk;
        mixed_cols c = make_mixed(done, k);
        tks_colref ref[4] = {{c.jpeg, c.joff}, {c.label, NULL}, {c.pts, c.poff}, {c.hw, NULL}};
        int rc = tks_writer_append_ref(w, ref, k, &e);
        free_mixed(&c);
        if (rc) {
            printf("# append: %s\n", e.what);
            tks_writer_abort(w);
            return -1;
        }
        done += k;
    }
    return tks_writer_close(w, &e) ? -1 : 0;
}

// Checks records [first, first + fr->n) of a decoded frame against the generator.
static int check_frame(const tks_frame *fr, uint64_t first) {
    for (size_t i = 0; i < fr->n; i++) {
        uint64_t r = first + i;
        const uint64_t *jo = fr->col[0].off, *po = fr->col[2].off;
        if (jo[0] != 0 || po[0] != 0 || jo[i + 1] - jo[i] != jpeg_len(r) || po[i + 1] - po[i] != pts_rows(r) * 12)
            return -1;
        for (size_t j = 0; j < jpeg_len(r); j++)
            if (((uint8_t *)fr->col[0].data)[jo[i] + j] != jbyte(r, j)) return -1;
        for (size_t k = 0; k < pts_rows(r) * 3; k++)
            if (((float *)fr->col[2].data)[po[i] / 4 + k] != (float)r + 0.25f * (float)k) return -1;
        if (((int16_t *)fr->col[1].data)[i] != (int16_t)(r % 1000) || ((int32_t *)fr->col[3].data)[2 * i] != (int32_t)(100 + r) ||
            ((int32_t *)fr->col[3].data)[2 * i + 1] != (int32_t)(200 + r))
            return -1;
    }
    return 0;
}

static int check_mixed(const char *path, uint64_t n, int use_next) {
    tks_reader *r;
    tk_err e;
    if (tks_reader_open(&r, path, &e)) {
        printf("# open: %s: %s\n", e.where, e.what);
        return -1;
    }
    tks_frame fr = {0};
    uint64_t got = 0;
    int bad = 0;
    for (size_t i = 0;; i++) {
        int rc = use_next ? tks_reader_next_frame(r, &fr, &e)
                          : (i < tks_reader_nframes(r) ? tks_reader_read(r, i, &fr, &e) : (fr.n = 0, 0));
        if (rc) {
            printf("# read: %s: %s\n", e.where, e.what);
            bad = 1;
            break;
        }
        if (!fr.n) break;
        if (check_frame(&fr, got)) {
            printf("# frame %zu differs\n", i);
            bad = 1;
        }
        got += fr.n;
    }
    if (got != n || tks_reader_nrecords(r) != n) bad = 1;
    tks_frame_free(&fr);
    tks_reader_close(r);
    return bad ? -1 : 0;
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) abort();
    fclose(f);
    return b;
}

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

TK_TEST(schema_ragged_derived_sizes) {
    tks_schema s = mixed_schema();
    tk_err e;
    CHECK_EQ_INT(tks_schema_finish(&s, &e), 0);
    CHECK_EQ_INT(s.nragged, 2);
    CHECK_EQ_INT(s.record_bytes, 2 + 8);
    CHECK(s.f[0].ragged && s.f[2].ragged && !s.f[1].ragged && !s.f[3].ragged);
    CHECK_EQ_INT(s.f[0].row_bytes, 1);
    CHECK_EQ_INT(s.f[2].row_bytes, 12);
    CHECK_EQ_INT(s.f[0].bytes, 0);
    s.f[3].shape[0] = TKS_RAGGED; // [-1, ...] fine; [2, -1] is not
    s.f[3].shape[0] = 2;
    s.f[2].shape[1] = TKS_RAGGED;
    CHECK_EQ_INT(tks_schema_finish(&s, &e), TK_EUSAGE);
    CHECK_STR(e.what, "field 'pts': dimension 1 is -1 (only the first dimension can be ragged)");
}

TK_TEST(roundtrip_files_frames_by_count_and_by_bytes) {
    // by count: 1000 records in frames of 64
    CHECK_EQ_INT(write_mixed(tpath("a.tks"), 1000, 64, 0, 333), 0);
    CHECK_EQ_INT(check_mixed(tpath("a.tks"), 1000, 0), 0);
    CHECK_EQ_INT(check_mixed(tpath("a.tks"), 1000, 1), 0);
    tks_reader *r;
    tk_err e;
    CHECK_EQ_INT(tks_reader_open(&r, tpath("a.tks"), &e), 0);
    CHECK_EQ_INT(tks_reader_nframes(r), 16); // 15 x 64 + 40
    CHECK_EQ_INT(tks_reader_frame(r, 15)->nrecords, 40);
    CHECK_EQ_INT(tks_reader_frame(r, 15)->first_record, 960);
    // the fixed-field calls refuse a ragged schema
    uint8_t buf[64];
    void *cols[4] = {buf, buf, buf, buf};
    size_t n;
    CHECK_EQ_INT(tks_reader_read_frame(r, 0, cols, &n, &e), TK_EUSAGE);
    char want[512];
    snprintf(want, sizeof want, "%s: the schema has ragged fields: read it with tks_reader_read", tpath("a.tks"));
    CHECK_STR(e.what, want);
    CHECK_EQ_INT(tks_reader_next(r, cols, &n, &e), TK_EUSAGE);
    tks_reader_close(r);
    // by bytes: a frame closes once its content reaches 4000 bytes. Record r's content is
    // 2 + 8 + 2 x 4 (lengths) + jpeg_len(r) + 12 pts_rows(r) bytes; count the frames from that.
    CHECK_EQ_INT(write_mixed(tpath("b.tks"), 1000, 65536, 4000, 1000), 0);
    size_t frames = 0, content = 0, recs = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        content += 18 + jpeg_len(i) + 12 * pts_rows(i);
        recs++;
        if (content >= 4000) frames++, content = 0, recs = 0;
    }
    frames += recs > 0;
    CHECK_EQ_INT(tks_reader_open(&r, tpath("b.tks"), &e), 0);
    CHECK_EQ_INT(tks_reader_nframes(r), frames);
    tks_reader_close(r);
    CHECK_EQ_INT(check_mixed(tpath("b.tks"), 1000, 0), 0);
    // empty file and one record with empty values
    CHECK_EQ_INT(write_mixed(tpath("empty.tks"), 0, 10, 0, 10), 0);
    CHECK_EQ_INT(check_mixed(tpath("empty.tks"), 0, 1), 0);
    CHECK_EQ_INT(write_mixed(tpath("one.tks"), 1, 10, 0, 10), 0); // record 0: 0 jpeg bytes, 0 rows
    CHECK_EQ_INT(check_mixed(tpath("one.tks"), 1, 0), 0);
}

// The bytes of man5: version 2 at offset 8, and frame 0's content laid out column by column with
// each ragged column's 4-byte lengths before its rows. Decompressed here with ZSTD_decompress.
TK_TEST(frame_byte_layout_matches_man5) {
    CHECK_EQ_INT(write_mixed(tpath("l.tks"), 5, 10, 0, 5), 0);
    size_t n;
    uint8_t *b = slurp(tpath("l.tks"), &n);
    CHECK_EQ_INT(le32(b + 8), 2);
    size_t P = 24 + le32(b + 16);
    CHECK(memcmp(b + P, "FRM1", 4) == 0);
    CHECK_EQ_INT(le32(b + P + 4), 5);
    size_t csize = le32(b + P + 8);
    uint8_t out[4096];
    size_t m = ZSTD_decompress(out, sizeof out, b + P + 16, csize);
    // jpeg: lengths 0, 37, 74, 111, 148 then 370 bytes; label 5 x 2; pts: lengths 0..3, 0 then
    // 6 rows x 12 bytes; hw: 5 x 8
    size_t want = 20 + 370 + 10 + 20 + 72 + 40;
    CHECK_EQ_INT(m, want);
    if (m == want) {
        for (int i = 0; i < 5; i++) CHECK_EQ_INT(le32(out + 4 * i), jpeg_len((uint64_t)i));
        CHECK_EQ_INT(out[20 + 0], jbyte(1, 0)); // record 0 has no bytes: record 1's come first
        CHECK_EQ_INT(out[20 + 369], jbyte(4, 147));
        CHECK_EQ_INT(out[390] | out[391] << 8, 0);
        CHECK_EQ_INT(out[398] | out[399] << 8, 4);
        for (int i = 0; i < 5; i++) CHECK_EQ_INT(le32(out + 400 + 4 * i), pts_rows((uint64_t)i));
        float f;
        memcpy(&f, out + 420, 4); // record 1's first row
        CHECK(f == 1.0f);
        CHECK_EQ_INT(le32(out + 492), 100);       // hw[0][0]
        CHECK_EQ_INT(le32(out + 492 + 36), 204);  // hw[4][1]
    }
    free(b);
    // A schema without ragged fields is still written as version 1.
    tks_schema s;
    memset(&s, 0, sizeof s);
    s.nfields = 1;
    snprintf(s.f[0].name, 64, "x");
    s.f[0].dtype = TKS_U8;
    tks_writer *w;
    tk_err e;
    CHECK_EQ_INT(tks_writer_open(&w, tpath("v1.tks"), &s, NULL, &e), 0);
    CHECK_EQ_INT(tks_writer_close(w, &e), 0);
    b = slurp(tpath("v1.tks"), &n);
    CHECK_EQ_INT(le32(b + 8), 1);
    free(b);
}

TK_TEST(pipe_stream_reads_ragged) {
    int p[2];
    if (pipe(p)) abort();
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 1);
        close(p[1]);
        _exit(write_mixed("-", 3000, 100, 0, 700) ? 1 : 0);
    }
    close(p[1]);
    char dev[64];
    snprintf(dev, sizeof dev, "/dev/fd/%d", p[0]);
    CHECK_EQ_INT(check_mixed(dev, 3000, 1), 0);
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TK_TEST(read_is_thread_safe_with_own_frames) {
    CHECK_EQ_INT(write_mixed(tpath("mt.tks"), 4000, 100, 0, 4000), 0);
    tks_reader *r;
    tk_err e;
    CHECK_EQ_INT(tks_reader_open(&r, tpath("mt.tks"), &e), 0);
    int bad = 0;
#pragma omp parallel num_threads(4) reduction(+ : bad)
    {
        tks_frame fr = {0};
        tk_err te;
#pragma omp for
        for (int k = 0; k < 120; k++) {
            size_t i = (size_t)(k * 7) % 40;
            if (tks_reader_read(r, i, &fr, &te) || fr.n != 100 || check_frame(&fr, i * 100)) bad++;
        }
        tks_frame_free(&fr);
    }
    CHECK_EQ_INT(bad, 0);
    tks_reader_close(r);
}

TK_TEST(writer_rejects_bad_values) {
    tks_schema s = mixed_schema();
    tks_writer *w;
    tk_err e;
    CHECK_EQ_INT(tks_writer_open(&w, tpath("w.tks"), &s, NULL, &e), 0);
    mixed_cols c = make_mixed(0, 4);
    tks_colref ref[4] = {{c.jpeg, c.joff}, {c.label, NULL}, {c.pts, c.poff}, {c.hw, NULL}};
    c.poff[2] += 4; // record 1's pts (offsets 0..12) becomes 16 bytes: not whole rows of 12
    CHECK_EQ_INT(tks_writer_append_ref(w, ref, 4, &e), TK_EUSAGE);
    char want[512];
    snprintf(want, sizeof want, "%s: field 'pts': offsets 0..16 are not whole rows of 12 bytes", tpath("w.tks"));
    CHECK_STR(e.what, want);
    const void *cols[4] = {c.jpeg, c.label, c.pts, c.hw};
    CHECK_EQ_INT(tks_writer_append(w, cols, 1, &e), TK_EUSAGE);
    free_mixed(&c);
    // a record of more than 64 MiB
    size_t big = ((size_t)64 << 20) - 10 + 1; // + 10 fixed bytes: one byte too many
    uint8_t *data = calloc(1, big);
    uint64_t off[2] = {0, big}, poff[2] = {0, 0};
    int16_t label = 0;
    int32_t hw[2] = {0, 0};
    tks_colref one[4] = {{data, off}, {&label, NULL}, {data, poff}, {hw, NULL}};
    // record 0 went in before record 1 failed above: this one would be record 1
    CHECK_EQ_INT(tks_writer_append_ref(w, one, 1, &e), TK_EDATA);
    snprintf(want, sizeof want, "%s: record 1 has 67108865 bytes; a record is at most 64 MiB", tpath("w.tks"));
    CHECK_STR(e.what, want);
    off[1] = big - 1; // exactly 64 MiB is fine
    CHECK_EQ_INT(tks_writer_append_ref(w, one, 1, &e), 0);
    free(data);
    CHECK_EQ_INT(tks_writer_close(w, &e), 0);
}

// Rewrites a one-frame file with frame content `content` (n records), or with the header's
// version set to `version`: the block header, index and trailer are rebuilt with valid CRCs, so
// only the case under test is wrong.
static void rewrite(const char *src, const char *dst, const uint8_t *content, size_t clen, uint32_t n,
                    uint32_t version) {
    size_t fn;
    uint8_t *b = slurp(src, &fn);
    size_t P = 24 + le32(b + 16);
    put32(b + 8, version);
    put32(b + 20, (uint32_t)crc32(crc32(0, b, 20), b + 24, (uInt)(P - 24)));
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    size_t cap = ZSTD_compressBound(clen);
    uint8_t *z = malloc(cap);
    size_t cs = ZSTD_compress2(cc, z, cap, content, clen);
    ZSTD_freeCCtx(cc);
    FILE *f = fopen(dst, "wb");
    fwrite(b, 1, P, f);
    uint8_t blk[16], ent[32] = {0}, tr[32];
    memcpy(blk, "FRM1", 4);
    put32(blk + 4, n);
    put32(blk + 8, (uint32_t)cs);
    put32(blk + 12, (uint32_t)crc32(0, blk, 12));
    fwrite(blk, 1, 16, f);
    fwrite(z, 1, cs, f);
    uint64_t io = P + 16 + cs;
    memcpy(blk, "IDX1", 4);
    put32(blk + 4, 1);
    put32(blk + 8, 32);
    put32(blk + 12, (uint32_t)crc32(0, blk, 12));
    fwrite(blk, 1, 16, f);
    put64(ent, P + 16);
    put64(ent + 8, cs);
    put32(ent + 24, n);
    put64(tr, io);
    put64(tr + 8, 1);
    put64(tr + 16, n);
    uint32_t c = (uint32_t)crc32(0, ent, 32);
    c = (uint32_t)crc32(c, tr, 24);
    put32(tr + 24, c);
    memcpy(tr + 28, "TKSE", 4);
    fwrite(ent, 1, 32, f);
    fwrite(tr, 1, 32, f);
    fclose(f);
    free(z);
    free(b);
}

static int read_msg(const char *path, char *msg, size_t cap) {
    tks_reader *r;
    tk_err e;
    tk_err_clear(&e);
    int rc = tks_reader_open(&r, path, &e);
    if (!rc) {
        tks_frame fr = {0};
        for (size_t i = 0; i < tks_reader_nframes(r) && !rc; i++) rc = tks_reader_read(r, i, &fr, &e);
        tks_frame_free(&fr);
        tks_reader_close(r);
    }
    snprintf(msg, cap, "%s: %s", e.where, e.what);
    return rc;
}

TK_TEST(corrupt_lengths_and_versions) {
    const char *good = tpath("c.tks"), *bad = tpath("cbad.tks");
    CHECK_EQ_INT(write_mixed(good, 2, 10, 0, 2), 0); // record 0: nothing; record 1: 37 bytes, 1 row
    size_t fn;
    uint8_t *b = slurp(good, &fn);
    size_t P = 24 + le32(b + 16);
    free(b);
    // the content of 2 records, per man5: jpeg lengths, bytes; label; pts lengths, rows; hw
    uint8_t c[256];
    size_t k = 0;
    put32(c + k, 0), k += 4;
    put32(c + k, 37), k += 4;
    for (int j = 0; j < 37; j++) c[k++] = jbyte(1, (size_t)j);
    memset(c + k, 0, 4), k += 4; // labels 0, 1
    c[k - 2] = 1;
    put32(c + k, 0), k += 4;
    put32(c + k, 1), k += 4;
    float row[3] = {1.0f, 1.25f, 1.5f};
    memcpy(c + k, row, 12), k += 12;
    int32_t hw[4] = {100, 200, 101, 201};
    memcpy(c + k, hw, 16), k += 16;
    char msg[1024], want[1024];
    rewrite(good, bad, c, k, 2, 2); // the same bytes the writer produced: reads back
    CHECK_EQ_INT(read_msg(bad, msg, sizeof msg), 0);
    CHECK_EQ_INT(check_mixed(bad, 2, 0), 0);
    put32(c + 8 + 37 + 4 + 4, 2); // pts: two rows, 12 bytes more than the frame holds
    rewrite(good, bad, c, k, 2, 2);
    CHECK_EQ_INT(read_msg(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset %zu: frame 0: bad lengths of ragged field 'pts'", bad, P + 16);
    CHECK_STR(msg, want);
    put32(c + 8 + 37 + 4 + 4, 1);
    put32(c + 4, 0x7fffffff); // a length far past the content
    rewrite(good, bad, c, k, 2, 2);
    CHECK_EQ_INT(read_msg(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset %zu: frame 0: bad lengths of ragged field 'jpeg'", bad, P + 16);
    CHECK_STR(msg, want);
    put32(c + 4, 38); // one byte more: the rest of the frame shifts
    rewrite(good, bad, c, k, 2, 2);
    CHECK_EQ_INT(read_msg(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset %zu: frame 0: ", bad, P + 16);
    CHECK(strncmp(msg, want, strlen(want)) == 0);
    put32(c + 4, 36); // one byte short: the rest of the frame shifts, and the sizes no longer add up
    rewrite(good, bad, c, k, 2, 2);
    CHECK_EQ_INT(read_msg(bad, msg, sizeof msg), TK_EDATA);
    CHECK(strstr(msg, "frame 0: ") != NULL);
    put32(c + 4, 37);
    rewrite(good, bad, c, k, 2, 1); // a ragged schema in a version 1 file
    CHECK_EQ_INT(read_msg(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset 24: bad schema: a ragged field in a version 1 file", bad);
    CHECK_STR(msg, want);
    rewrite(good, bad, c, k, 2, 3);
    CHECK_EQ_INT(read_msg(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset 8: unsupported version 3 (this reader knows versions 1 and 2)", bad);
    CHECK_STR(msg, want);
    // a version 2 header over a schema without ragged fields (v1.tks from the layout test)
    b = slurp(tpath("v1.tks"), &fn);
    P = 24 + le32(b + 16);
    put32(b + 8, 2);
    put32(b + 20, (uint32_t)crc32(crc32(0, b, 20), b + 24, (uInt)(P - 24)));
    FILE *f = fopen(bad, "wb");
    fwrite(b, 1, fn, f);
    fclose(f);
    free(b);
    CHECK_EQ_INT(read_msg(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset 24: bad schema: a version 2 file without a ragged field", bad);
    CHECK_STR(msg, want);
}

TK_TEST(zz_cleanup) { CHECK_EQ_INT(tk_test_rmdir(), 0); }
