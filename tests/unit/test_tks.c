// .tks round trips (dtypes, shapes, empty, one frame, many frames, pipes) and every corruption
// case of man/man5/tks.5 with its exact message. Offsets below are computed from the byte layout
// in the man page, not from the code under test.
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "tks/tks.h"
#include "tk_test.h"

static char tmpdir[] = "/tmp/test_tks.XXXXXX";

static const char *tpath(const char *name) {
    static char buf[8][256];
    static int k;
    if (!tmpdir[strlen(tmpdir) - 1] || tmpdir[strlen(tmpdir) - 1] == 'X')
        if (!mkdtemp(tmpdir)) { perror(tmpdir); abort(); }
    char *b = buf[k++ % 8];
    snprintf(b, 256, "%s/%s", tmpdir, name);
    return b;
}

// A schema with every dtype and shapes of 0..3 dimensions.
static tks_schema wide_schema(void) {
    tks_schema s;
    memset(&s, 0, sizeof s);
    const char *names[] = {"u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"};
    for (int t = TKS_U8; t <= TKS_F64; t++) {
        tks_field *f = &s.f[s.nfields++];
        snprintf(f->name, sizeof f->name, "%s_field", names[t - 1]);
        f->dtype = (tks_dtype)t;
        f->ndim = (t - 1) % 4;
        for (int d = 0; d < f->ndim; d++) f->shape[d] = 1 + (t + d) % 3;
    }
    snprintf(s.meta_json, sizeof s.meta_json, "{\"k\":[1,2],\"s\":\"x\"}");
    return s;
}

static tks_schema small_schema(void) {
    tks_schema s;
    memset(&s, 0, sizeof s);
    s.nfields = 2;
    snprintf(s.f[0].name, 64, "label");
    s.f[0].dtype = TKS_U8;
    snprintf(s.f[1].name, 64, "x");
    s.f[1].dtype = TKS_I32;
    s.f[1].ndim = 1;
    s.f[1].shape[0] = 3;
    return s;
}

// Deterministic column data: byte j of field f of record r.
static uint8_t val(int f, uint64_t r, size_t j) { return (uint8_t)(r * 131 + (uint64_t)f * 17 + j * 7 + (r >> 8)); }

static void **make_cols(const tks_schema *s, uint64_t first, size_t n) {
    void **cols = calloc((size_t)s->nfields, sizeof *cols);
    for (int f = 0; f < s->nfields; f++) {
        uint8_t *c = malloc(n * s->f[f].bytes + 1);
        for (size_t r = 0; r < n; r++)
            for (size_t j = 0; j < s->f[f].bytes; j++) c[r * s->f[f].bytes + j] = val(f, first + r, j);
        cols[f] = c;
    }
    return cols;
}

static void free_cols(const tks_schema *s, void **cols) {
    for (int f = 0; f < s->nfields; f++) free(cols[f]);
    free(cols);
}

static int write_file(const char *path, const tks_schema *s, uint64_t n, size_t rpf, size_t chunk) {
    tks_writer *w;
    tk_err e;
    tks_writer_opts o = {.records_per_frame = rpf, .zstd_level = 3, .threads = 1};
    if (tks_writer_open(&w, path, s, &o, &e)) return -1;
    for (uint64_t done = 0; done < n;) {
        size_t k = n - done < chunk ? (size_t)(n - done) : chunk;
        void **cols = make_cols(s, done, k);
        int rc = tks_writer_append(w, (const void *const *)cols, k, &e);
        free_cols(s, cols);
        if (rc) {
            tks_writer_abort(w);
            return -1;
        }
        done += k;
    }
    return tks_writer_close(w, &e) ? -1 : 0;
}

// Reads every frame (read_frame when seekable, then again with next) and checks every byte.
static int check_file(const char *path, const tks_schema *want, uint64_t n, int use_next) {
    tks_reader *r;
    tk_err e;
    if (tks_reader_open(&r, path, &e)) {
        printf("# open: %s: %s\n", e.where, e.what);
        return -1;
    }
    const tks_schema *s = tks_reader_schema(r);
    int bad = s->nfields != want->nfields || s->record_bytes != want->record_bytes ||
              strcmp(s->meta_json, want->meta_json[0] ? want->meta_json : "{}") != 0;
    for (int f = 0; f < s->nfields && !bad; f++)
        bad = strcmp(s->f[f].name, want->f[f].name) || s->f[f].dtype != want->f[f].dtype ||
              s->f[f].ndim != want->f[f].ndim || s->f[f].bytes != want->f[f].bytes;
    size_t maxr = tks_reader_max_frame_records(r);
    void **cols = calloc((size_t)s->nfields, sizeof *cols);
    for (int f = 0; f < s->nfields; f++) cols[f] = malloc(maxr * s->f[f].bytes + 1);
    uint64_t got = 0;
    for (size_t i = 0; !bad; i++) {
        size_t k = 0;
        int rc = use_next ? tks_reader_next(r, cols, &k, &e)
                          : (i < tks_reader_nframes(r) ? tks_reader_read_frame(r, i, cols, &k, &e) : 0);
        if (rc) {
            printf("# read: %s: %s\n", e.where, e.what);
            bad = 1;
        }
        if (k == 0) break;
        for (int f = 0; f < s->nfields && !bad; f++)
            for (size_t x = 0; x < k * s->f[f].bytes; x++)
                if (((uint8_t *)cols[f])[x] != val(f, got + x / s->f[f].bytes, x % s->f[f].bytes)) {
                    bad = 1;
                    break;
                }
        got += k;
    }
    if (got != n || tks_reader_nrecords(r) != n) bad = 1;
    if (bad) printf("# got %llu of %llu records, meta %s\n", (unsigned long long)got, (unsigned long long)n, s->meta_json);
    for (int f = 0; f < s->nfields; f++) free(cols[f]);
    free(cols);
    tks_reader_close(r);
    return bad ? -1 : 0;
}

TK_TEST(roundtrip_every_dtype_and_shape) {
    tks_schema s = wide_schema();
    tk_err e;
    CHECK_EQ_INT(tks_schema_finish(&s, &e), 0);
    CHECK_EQ_INT(write_file(tpath("wide.tks"), &s, 1000, 128, 77), 0);
    CHECK_EQ_INT(check_file(tpath("wide.tks"), &s, 1000, 0), 0);
    CHECK_EQ_INT(check_file(tpath("wide.tks"), &s, 1000, 1), 0);
    tks_reader *r;
    CHECK_EQ_INT(tks_reader_open(&r, tpath("wide.tks"), &e), 0);
    CHECK_EQ_INT(tks_reader_nframes(r), 8); // 7 x 128 + 104
    CHECK_EQ_INT(tks_reader_frame(r, 7)->nrecords, 104);
    CHECK_EQ_INT(tks_reader_frame(r, 7)->first_record, 896);
    CHECK_EQ_INT(tks_schema_field(tks_reader_schema(r), "f64_field"), 8);
    CHECK_EQ_INT(tks_schema_field(tks_reader_schema(r), "nope"), -1);
    tks_reader_close(r);
}

TK_TEST(roundtrip_empty_one_frame_exact_frames) {
    tks_schema s = small_schema();
    tk_err e;
    tks_schema_finish(&s, &e);
    CHECK_EQ_INT(write_file(tpath("empty.tks"), &s, 0, 10, 10), 0);
    CHECK_EQ_INT(check_file(tpath("empty.tks"), &s, 0, 1), 0);
    struct stat st;
    stat(tpath("empty.tks"), &st);
    // header + schema + index block (16) + trailer (32); schema_len from bytes 16..19
    int fd = open(tpath("empty.tks"), O_RDONLY);
    uint8_t h[24];
    CHECK_EQ_INT(read(fd, h, 24), 24);
    close(fd);
    uint32_t slen = h[16] | h[17] << 8 | h[18] << 16 | (uint32_t)h[19] << 24;
    CHECK_EQ_INT(st.st_size, 24 + slen + 16 + 32);
    CHECK_EQ_INT(write_file(tpath("one.tks"), &s, 1, 10, 10), 0);
    CHECK_EQ_INT(check_file(tpath("one.tks"), &s, 1, 0), 0);
    CHECK_EQ_INT(write_file(tpath("ten.tks"), &s, 10, 10, 3), 0); // exactly one full frame
    CHECK_EQ_INT(check_file(tpath("ten.tks"), &s, 10, 1), 0);
    CHECK_EQ_INT(write_file(tpath("thirty.tks"), &s, 30, 10, 30), 0); // exactly three frames
    tks_reader *r;
    CHECK_EQ_INT(tks_reader_open(&r, tpath("thirty.tks"), &e), 0);
    CHECK_EQ_INT(tks_reader_nframes(r), 3);
    CHECK_EQ_INT(tks_reader_nrecords(r), 30);
    tks_reader_close(r);
    CHECK_EQ_INT(check_file(tpath("thirty.tks"), &s, 30, 0), 0);
}

TK_TEST(bad_schemas_rejected) {
    tk_err e;
    tks_schema s = small_schema();
    snprintf(s.f[1].name, 64, "label");
    CHECK_EQ_INT(tks_schema_finish(&s, &e), TK_EUSAGE);
    CHECK_STR(e.what, "field 'label' appears twice");
    s = small_schema();
    s.f[1].shape[0] = 0;
    CHECK_EQ_INT(tks_schema_finish(&s, &e), TK_EUSAGE);
    s = small_schema();
    s.nfields = 0;
    CHECK_EQ_INT(tks_schema_finish(&s, &e), TK_EUSAGE);
    s = small_schema();
    snprintf(s.meta_json, sizeof s.meta_json, "[1]");
    tks_writer *w;
    CHECK_EQ_INT(tks_writer_open(&w, tpath("never.tks"), &s, NULL, &e), TK_EUSAGE);
    CHECK(access(tpath("never.tks"), F_OK) != 0);
}

// Runs the writer in a child whose stdout is a pipe; returns the read end.
static int pipe_writer(const tks_schema *s, uint64_t n, size_t rpf, pid_t *pid) {
    int p[2];
    if (pipe(p)) abort();
    *pid = fork();
    if (*pid == 0) {
        close(p[0]);
        dup2(p[1], 1);
        close(p[1]);
        _exit(write_file("-", s, n, rpf, 1000) ? 1 : 0);
    }
    close(p[1]);
    return p[0];
}

static uint8_t *slurp_fd(int fd, size_t *n) {
    size_t cap = 1 << 16;
    uint8_t *b = malloc(cap);
    *n = 0;
    ssize_t k;
    while ((k = read(fd, b + *n, cap - *n)) > 0) {
        *n += (size_t)k;
        if (*n == cap) b = realloc(b, cap *= 2);
    }
    return b;
}

static uint8_t *slurp(const char *path, size_t *n) {
    int fd = open(path, O_RDONLY);
    uint8_t *b = slurp_fd(fd, n);
    close(fd);
    return b;
}

TK_TEST(pipe_bytes_equal_file_bytes_and_stream_reads) {
    tks_schema s = wide_schema();
    tk_err e;
    tks_schema_finish(&s, &e);
    CHECK_EQ_INT(write_file(tpath("p.tks"), &s, 5000, 700, 1000), 0);
    pid_t pid;
    int fd = pipe_writer(&s, 5000, 700, &pid);
    size_t np, nf;
    uint8_t *bp = slurp_fd(fd, &np);
    close(fd);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    uint8_t *bf = slurp(tpath("p.tks"), &nf);
    CHECK(np == nf && memcmp(bp, bf, nf) == 0);
    free(bp);
    free(bf);
    fd = pipe_writer(&s, 5000, 700, &pid);
    char dev[64];
    snprintf(dev, sizeof dev, "/dev/fd/%d", fd);
    CHECK_EQ_INT(check_file(dev, &s, 5000, 1), 0);
    close(fd);
    waitpid(pid, &st, 0);
}

// read_frame from many threads at once (pread, a decompression context per call) gives the same
// bytes as reading alone.
TK_TEST(read_frame_is_thread_safe) {
    tks_schema s = small_schema();
    tk_err e;
    tks_schema_finish(&s, &e);
    CHECK_EQ_INT(write_file(tpath("mt.tks"), &s, 20000, 500, 20000), 0);
    tks_reader *r;
    CHECK_EQ_INT(tks_reader_open(&r, tpath("mt.tks"), &e), 0);
    int bad = 0;
#pragma omp parallel for num_threads(4) reduction(+ : bad)
    for (int k = 0; k < 160; k++) {
        size_t i = (size_t)(k * 7) % tks_reader_nframes(r), n = 0;
        uint8_t lab[500], x[500 * 12];
        void *cols[2] = {lab, x};
        tk_err te;
        if (tks_reader_read_frame(r, i, cols, &n, &te) || n != 500) {
            bad++;
            continue;
        }
        for (size_t j = 0; j < n; j++)
            if (lab[j] != val(0, i * 500 + j, 0) || x[j * 12 + 11] != val(1, i * 500 + j, 11)) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    tks_reader_close(r);
}

// --- corruption -------------------------------------------------------------------------------

static size_t fsize;

static void copy_with(const char *src, const char *dst, long off, uint8_t xor_mask, long truncate_to) {
    size_t n;
    uint8_t *b = slurp(src, &n);
    if (off >= 0) b[off] ^= xor_mask;
    if (truncate_to >= 0) n = (size_t)truncate_to;
    FILE *f = fopen(dst, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    free(b);
    fsize = n;
}

// Opens and reads the whole file (random access); returns the error text "WHERE: WHAT".
static int read_all(const char *path, char *msg, size_t cap) {
    tks_reader *r;
    tk_err e;
    tk_err_clear(&e);
    int rc = tks_reader_open(&r, path, &e);
    if (!rc) {
        const tks_schema *s = tks_reader_schema(r);
        void *cols[TKS_MAX_FIELDS];
        for (int f = 0; f < s->nfields; f++) cols[f] = malloc(tks_reader_max_frame_records(r) * s->f[f].bytes);
        size_t k;
        for (size_t i = 0; i < tks_reader_nframes(r) && !rc; i++) rc = tks_reader_read_frame(r, i, cols, &k, &e);
        for (int f = 0; f < s->nfields; f++) free(cols[f]);
        tks_reader_close(r);
    }
    snprintf(msg, cap, "%s: %s", e.where, e.what);
    return rc;
}

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

TK_TEST(corruption_each_case_exact_error) {
    tks_schema s = small_schema();
    tk_err e;
    tks_schema_finish(&s, &e);
    const char *good = tpath("good.tks"), *bad = tpath("bad.tks");
    CHECK_EQ_INT(write_file(good, &s, 1000, 300, 1000), 0); // frames of 300, 300, 300, 100
    size_t n;
    uint8_t *b = slurp(good, &n);
    uint32_t slen = le32(b + 16);
    long P = 24 + (long)slen;
    long io = (long)(b[n - 32] | b[n - 31] << 8 | b[n - 30] << 16); // index_offset (small file)
    char msg[1024], want[1024];

    copy_with(good, bad, 0, 0x01, -1);
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset 0: bad magic (not a .tks file)", bad);
    CHECK_STR(msg, want);

    copy_with(good, bad, 8, 0x02, -1);
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset 8: unsupported version 3 (this reader knows versions 1 and 2)", bad);
    CHECK_STR(msg, want);

    copy_with(good, bad, 30, 0x10, -1); // a bit inside the schema JSON
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset 20: header checksum mismatch", bad);
    CHECK_STR(msg, want);

    // The last byte of frame 1's zstd frame is part of its XXH64 content checksum.
    long f1 = P + 16 + (long)le32(b + P + 8); // block header of frame 1
    long f1_end = f1 + 16 + (long)le32(b + f1 + 8);
    copy_with(good, bad, f1_end - 1, 0x40, -1);
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset %ld: frame 1: checksum mismatch", bad, f1 + 16);
    CHECK_STR(msg, want);

    copy_with(good, bad, f1 + 16 + 12, 0x04, -1); // a bit in the middle of the compressed data
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset %ld: frame 1: ", bad, f1 + 16);
    CHECK(strncmp(msg, want, strlen(want)) == 0);

    copy_with(good, bad, f1 + 4, 0x01, -1); // the block header's record count
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset %ld: frame 1: bad block header", bad, f1);
    CHECK_STR(msg, want);

    copy_with(good, bad, -1, 0, (long)n - 5); // truncated: the trailer is gone
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset %zu: truncated file (no trailer)", bad, n - 5);
    CHECK_STR(msg, want);

    copy_with(good, bad, -1, 0, io + 20); // truncated inside the index
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset %ld: truncated file (no trailer)", bad, io + 20);
    CHECK_STR(msg, want);

    copy_with(good, bad, io + 16 + 32 + 16, 0x01, -1); // entry 1's first_record, CRC not fixed
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset %zu: bad index: index checksum mismatch", bad, n - 8);
    CHECK_STR(msg, want);

    // Entry 2's offset moved, with the index CRC recomputed: the range check must catch it.
    b[io + 16 + 64] ^= 0x08;
    uint32_t c = (uint32_t)crc32(0, b + io + 16, (uInt)(n - (size_t)io - 16 - 8));
    for (int i = 0; i < 4; i++) b[n - 8 + i] = (uint8_t)(c >> (8 * i));
    FILE *fp = fopen(bad, "wb");
    fwrite(b, 1, n, fp);
    fclose(fp);
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    snprintf(want, sizeof want, "%s: offset %ld: index entry 2 out of range", bad, io + 16 + 64);
    CHECK_STR(msg, want);

    copy_with(good, bad, (long)n - 32, 0xff, -1); // index_offset out of range (and CRC)
    CHECK_EQ_INT(read_all(bad, msg, sizeof msg), TK_EDATA);
    CHECK(strstr(msg, "bad index: ") != NULL);
    free(b);
}

// A stream that stops early is "truncated stream" at the offset where bytes are missing.
TK_TEST(truncated_stream_and_garbage) {
    const char *good = tpath("good.tks"); // written by the previous test
    size_t n;
    uint8_t *b = slurp(good, &n);
    for (int mode = 0; mode < 2; mode++) {
        int p[2];
        if (pipe(p)) abort();
        size_t len = mode == 0 ? n - 40 : n;
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            if (write(p[1], b, len) != (ssize_t)len) _exit(1);
            if (mode == 1 && write(p[1], "x", 1) != 1) _exit(1);
            _exit(0);
        }
        close(p[1]);
        char dev[64];
        snprintf(dev, sizeof dev, "/dev/fd/%d", p[0]);
        tks_reader *r;
        tk_err e;
        CHECK_EQ_INT(tks_reader_open(&r, dev, &e), 0);
        void *cols[2] = {malloc(300), malloc(300 * 12)};
        size_t k = 1;
        int rc = 0;
        while (!rc && k) rc = tks_reader_next(r, cols, &k, &e);
        CHECK_EQ_INT(rc, TK_EDATA);
        char want[256];
        if (mode == 0) {
            snprintf(want, sizeof want, "%s: offset %zu", dev, n - 40);
            CHECK_STR(e.where, want);
            CHECK_STR(e.what, "truncated stream");
        } else {
            snprintf(want, sizeof want, "%s: offset %zu", dev, n);
            CHECK_STR(e.where, want);
            CHECK_STR(e.what, "trailing garbage after the trailer");
        }
        free(cols[0]);
        free(cols[1]);
        tks_reader_close(r);
        close(p[0]);
        waitpid(pid, NULL, 0);
    }
    free(b);
}

TK_TEST(write_error_leaves_no_file) {
    tks_schema s = small_schema();
    tk_err e;
    tks_schema_finish(&s, &e);
    tks_writer *w;
    CHECK(tks_writer_open(&w, "/nonexistent-dir/x.tks", &s, NULL, &e) == TK_EIO);
    CHECK_EQ_INT(tks_writer_open(&w, tpath("aborted.tks"), &s, NULL, &e), 0);
    void **cols = make_cols(&s, 0, 10);
    CHECK_EQ_INT(tks_writer_append(w, (const void *const *)cols, 10, &e), 0);
    free_cols(&s, cols);
    tks_writer_abort(w);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q aborted", tmpdir);
    CHECK(system(cmd) != 0); // neither the file nor its temporary remains
}

TK_TEST(zz_cleanup) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    CHECK_EQ_INT(system(cmd), 0);
}
