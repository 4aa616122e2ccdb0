// Core helpers: error records, number parsing, Philox known answers, MLLOG/json formatting,
// atomic files.
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "core/afile.h"
#include "core/cli.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/fastmod.h"
#include "core/mllog.h"
#include "core/philox.h"
#include "tk_test.h"

TK_TEST(err_format_has_where_what_hint) {
    tk_err e;
    tk_err_set(&e, TK_EDATA, "expected 40 fields, got %d", 39);
    tk_err_where(&e, "day_0.tsv: line %d", 7);
    tk_err_hint(&e, "is the file truncated?");
    char buf[512];
    tk_err_format(&e, buf, sizeof buf);
    CHECK_STR(buf, "day_0.tsv: line 7: expected 40 fields, got 39 (hint: is the file truncated?)");
    CHECK_EQ_INT(e.code, TK_EDATA);
    tk_err_errno(&e, ENOSPC, "out.tks: write failed");
    tk_err_format(&e, buf, sizeof buf);
    CHECK_STR(buf, "out.tks: write failed: No space left on device (hint: free some disk space)");
    CHECK_EQ_INT(e.code, TK_EIO);
}

TK_TEST(parse_numbers_range_checked) {
    tk_err e;
    int64_t v = 0;
    double d = 0;
    CHECK_EQ_INT(tk_parse_i64("42", 1, 100, "--n", &v, &e), 0);
    CHECK_EQ_INT(v, 42);
    CHECK_EQ_INT(tk_parse_i64("42x", 1, 100, "--n", &v, &e), TK_EUSAGE);
    CHECK_STR(e.what, "--n: expected an integer in [1, 100], got '42x'");
    CHECK_EQ_INT(tk_parse_i64("101", 1, 100, "--n", &v, &e), TK_EUSAGE);
    CHECK_EQ_INT(tk_parse_i64("", 1, 100, "--n", &v, &e), TK_EUSAGE);
    CHECK_EQ_INT(tk_parse_i64("99999999999999999999", 1, 100, "--n", &v, &e), TK_EUSAGE);
    CHECK_EQ_INT(tk_parse_f64("0.5", 0, 1, "--lr", &d, &e), 0);
    CHECK(d == 0.5);
    CHECK_EQ_INT(tk_parse_f64("nan", 0, 1, "--lr", &d, &e), TK_EUSAGE);
    int64_t list[4];
    int n = 0;
    CHECK_EQ_INT(tk_parse_i64_list("1,10,100", 0, 1000, "--max-dets", list, 4, &n, &e), 0);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(list[2], 100);
    CHECK_EQ_INT(tk_parse_i64_list("1,,3", 0, 1000, "--max-dets", list, 4, &n, &e), TK_EUSAGE);
}

// Known-answer vectors of Philox4x32-10 published with Random123 (kat_vectors).
TK_TEST(philox_known_answers) {
    tk_philox_ctr c = {{0, 0, 0, 0}};
    tk_philox_key k = {{0, 0}};
    tk_philox_ctr r = tk_philox4x32(c, k);
    CHECK(r.v[0] == 0x6627e8d5u && r.v[1] == 0xe169c58du && r.v[2] == 0xbc57ac4cu &&
          r.v[3] == 0x9b00dbd8u);
    c = (tk_philox_ctr){{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}};
    k = (tk_philox_key){{0xffffffffu, 0xffffffffu}};
    r = tk_philox4x32(c, k);
    CHECK(r.v[0] == 0x408f276du && r.v[1] == 0x41c83b0eu && r.v[2] == 0xa20bc7c6u &&
          r.v[3] == 0x6d5451fdu);
    c = (tk_philox_ctr){{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
    k = (tk_philox_key){{0xa4093822u, 0x299f31d0u}};
    r = tk_philox4x32(c, k);
    CHECK(r.v[0] == 0xd16cfe09u && r.v[1] == 0x94fdccebu && r.v[2] == 0x5001e420u &&
          r.v[3] == 0x24126ea1u);
}

TK_TEST(philox_uniform_range_and_mean) {
    double s = 0;
    float lo = 1, hi = 0;
    for (int i = 0; i < 100000; i++) {
        float u = tk_philox_uniform(1234, TK_RNG_INIT, (uint64_t)i);
        s += u;
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    CHECK(lo >= 0.0f && hi < 1.0f);
    CHECK(fabs(s / 100000 - 0.5) < 0.005);
}

// tk_fastmod against the % operator: edge divisors and dividends, then random pairs (fresh per
// run from the clock, printed) over the whole 32-bit range and the table sizes loaders use.
TK_TEST(fastmod_equals_division) {
    const uint32_t ds[] = {1, 2, 3, 7, 26, 1024, 65536, 4000000, 39884406, 40000000,
                           0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
    const uint32_t as[] = {0, 1, 2, 3, 25, 26, 27, 65535, 3999999, 4000000, 39999999,
                           0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
    int bad = 0;
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
        for (size_t j = 0; j < sizeof as / sizeof *as; j++)
            bad += tk_fastmod(as[j], tk_fastmod_m(ds[i]), ds[i]) != as[j] % ds[i];
    uint64_t seed = (uint64_t)time(NULL);
    printf("# fastmod seed %llu\n", (unsigned long long)seed);
    for (uint64_t i = 0; i < 2000000; i++) {
        tk_philox_ctr r = tk_philox_draw(seed, TK_RNG_INIT, i);
        uint32_t d = r.v[0] >> (r.v[2] % 32), a = r.v[1] >> (r.v[3] % 8);
        if (d == 0) d = 1;
        bad += tk_fastmod(a, tk_fastmod_m(d), d) != a % d;
    }
    CHECK(bad == 0);
}

static void check_py(int *tk_failed_, json_t *v, const char *want) {
    char *s = tk_json_dumps_py(v);
    CHECK_STR(s, want);
    free(s);
    json_decref(v);
}

// Expected strings are what CPython 3.11's json.dumps prints for the same values.
TK_TEST(json_dumps_like_python) {
    check_py(tk_failed_, json_real(0.8025), "0.8025");
    check_py(tk_failed_, json_real(1.0), "1.0");
    check_py(tk_failed_, json_real(1e-05), "1e-05");
    check_py(tk_failed_, json_real(0.0001), "0.0001");
    check_py(tk_failed_, json_real(1.5499420000000002), "1.5499420000000002");
    check_py(tk_failed_, json_real(1e16), "1e+16");
    check_py(tk_failed_, json_real(123456789012345.6), "123456789012345.6");
    check_py(tk_failed_, json_real(-2.5e-7), "-2.5e-07");
    check_py(tk_failed_, json_real(36895473.79), "36895473.79");
    check_py(tk_failed_, json_pack("{s:i,s:n,s:b,s:[i,s]}", "a", 1, "b", "c", 1, "d", 2, "x\"\n"),
             "{\"a\": 1, \"b\": null, \"c\": true, \"d\": [2, \"x\\\"\\n\"]}");
    check_py(tk_failed_, json_string("\xc3\xa9\xf0\x9f\x98\x80"), "\"\\u00e9\\ud83d\\ude00\"");
}

TK_TEST(mllog_line_format) {
    char path[] = "/tmp/tk_mllog_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    unlink(path);
    tk_mllog log;
    tk_err e;
    CHECK_EQ_INT(tk_mllog_open(&log, path, 0, &e), 0);
    log.fixed_time_ms = 1634246972617LL;
    CHECK_EQ_INT(tk_mllog_write(&log, "x.c", 4, "POINT_IN_TIME", "cache_clear", json_true(), NULL,
                                0, &e),
                 0);
    CHECK_EQ_INT(tk_mllog_write(&log, "x.c", 9, "INTERVAL_START", "epoch_start", NULL,
                                json_pack("{s:i}", "epoch_num", 1), 0, &e),
                 0);
    tk_mllog_close(&log);
    FILE *f = fopen(path, "r");
    char line[512];
    CHECK(fgets(line, sizeof line, f) != NULL);
    CHECK_STR(line, ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1634246972617, \"event_type\": "
                    "\"POINT_IN_TIME\", \"key\": \"cache_clear\", \"value\": true, \"metadata\": "
                    "{\"file\": \"x.c\", \"lineno\": 4}}\n");
    CHECK(fgets(line, sizeof line, f) != NULL);
    CHECK_STR(line, ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1634246972617, \"event_type\": "
                    "\"INTERVAL_START\", \"key\": \"epoch_start\", \"value\": null, \"metadata\": "
                    "{\"file\": \"x.c\", \"lineno\": 9, \"epoch_num\": 1}}\n");
    fclose(f);
    unlink(path);
}

TK_TEST(afile_commit_and_abort) {
    char dir[] = "/tmp/tk_afile_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    tk_afile f;
    tk_err e;
    CHECK_EQ_INT(tk_afile_open(&f, path, &e), 0);
    fputs("old", f.fp);
    CHECK_EQ_INT(tk_afile_commit(&f, &e), 0);
    CHECK_EQ_INT(tk_afile_open(&f, path, &e), 0);
    fputs("new but abandoned", f.fp);
    tk_afile_abort(&f);
    FILE *r = fopen(path, "r");
    char buf[64] = {0};
    CHECK(r && fgets(buf, sizeof buf, r));
    CHECK_STR(buf, "old");
    if (r) fclose(r);
    // Only out.bin is left: no temporary files.
    char cmd[300];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", dir);
    CHECK_EQ_INT(system(cmd), 0);
    unlink(path);
    rmdir(dir);
}

TK_TEST(afile_disk_full_is_eio_and_leaves_nothing) {
    // /dev/full cannot hold a temp file next to it, so exercise the write path directly.
    FILE *full = fopen("/dev/full", "wb");
    if (!full) return;
    tk_err e;
    char big[1 << 16];
    memset(big, 1, sizeof big);
    int rc = tk_write_all(full, big, sizeof big, "/dev/full", &e);
    if (rc == 0) rc = fflush(full) ? TK_EIO : 0;
    CHECK_EQ_INT(rc, TK_EIO);
    fclose(full);
}

TK_TEST(json_compact_for_json_lines) {
    json_t *o = json_pack("{s:f,s:[i,s],s:n}", "target", 0.8025, "b", 1, "x", "c");
    char *s = tk_json_dumps_compact(o);
    CHECK_STR(s, "{\"target\":0.8025,\"b\":[1,\"x\"],\"c\":null}");
    free(s);
    json_decref(o);
}

// CRC-32C: the check value of the catalogue ("123456789" -> e3069283, RFC 3720's vectors), and
// the hardware path (three interleaved streams on long inputs) equal to a bitwise definition.
static uint32_t crc32c_bitwise(const unsigned char *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

TK_TEST(crc32c_known_answers_and_long_inputs) {
    CHECK_EQ_INT(tk_crc32c(0, "123456789", 9), 0xe3069283u);
    unsigned char z[32] = {0}, o[32];
    memset(o, 0xff, sizeof o);
    CHECK_EQ_INT(tk_crc32c(0, z, 32), 0x8a9136aau);
    CHECK_EQ_INT(tk_crc32c(0, o, 32), 0x62a8ab43u);
    CHECK_EQ_INT(tk_crc32c(0, "", 0), 0);
    size_t n = 3 * 8192 * 2 + 1000;
    unsigned char *buf = malloc(n + 8);
    for (size_t i = 0; i < n + 8; i++) buf[i] = (unsigned char)(i * 2654435761u >> 13);
    for (size_t off = 0; off < 8; off += 3)      // unaligned starts
        for (size_t len = n - 20; len <= n; len += 7) {
            uint32_t want = crc32c_bitwise(buf + off, len);
            CHECK_EQ_INT(tk_crc32c(0, buf + off, len), want);
            // extension: crc(a || b) from crc(a)
            CHECK_EQ_INT(tk_crc32c(tk_crc32c(0, buf + off, 5000), buf + off + 5000, len - 5000), want);
        }
    free(buf);
}

TK_TEST(afile_stale_temporaries_of_dead_writers_removed) {
    char d[] = "/tmp/tk-stale-XXXXXX";
    if (!mkdtemp(d)) return;
    char p[256];
    // a dead writer's (pid 2^22 + 7 is above the default pid_max 4194304), a live one's (ours),
    // another suffix's, and names that only look like temporaries
    const char *names[] = {"step-4.safetensors.tmp.4194311.0", "x.safetensors.tmp.%d.3",
                           "step-4.eval.json.tmp.4194311.0", "step-4.safetensors.tmp.abc.0",
                           "step-4.safetensors"};
    for (int i = 0; i < 5; i++) {
        char nm[128];
        snprintf(nm, sizeof nm, names[i], (int)getpid());
        snprintf(p, sizeof p, "%s/%s", d, nm);
        FILE *f = fopen(p, "w");
        if (f) fclose(f);
    }
    tk_err e;
    int removed = -1;
    CHECK_EQ_INT(tk_afile_remove_stale(d, ".safetensors", &removed, &e), 0);
    CHECK_EQ_INT(removed, 1);
    snprintf(p, sizeof p, "%s/%s", d, names[0]);
    CHECK(access(p, F_OK) != 0);
    snprintf(p, sizeof p, "%s/x.safetensors.tmp.%d.3", d, (int)getpid());
    CHECK(access(p, F_OK) == 0);
    snprintf(p, sizeof p, "%s/%s", d, names[2]);
    CHECK(access(p, F_OK) == 0);
    CHECK_EQ_INT(tk_afile_remove_stale("/nonexistent-dir-tk", ".safetensors", &removed, &e), 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    CHECK(system(cmd) == 0);
}
