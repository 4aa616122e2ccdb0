// Criteo TSV parsing, line input (plain/gzip/zstd), dictionaries, AUC and the synthetic generator.
#include <stdio.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "criteo/criteo.h"
#include "tk_test.h"

// A line with label y, I1 = a, I2 = b, C1 = c1, C2 = c2 and every other field empty.
static int make_line(char *buf, size_t cap, const char *y, const char *a, const char *b, const char *c1,
                     const char *c2) {
    int k = snprintf(buf, cap, "%s\t%s\t%s", y, a, b);
    for (int i = 0; i < 11; i++) k += snprintf(buf + k, cap - (size_t)k, "\t");
    k += snprintf(buf + k, cap - (size_t)k, "\t%s\t%s", c1, c2);
    for (int i = 0; i < 24; i++) k += snprintf(buf + k, cap - (size_t)k, "\t");
    return k;
}

TK_TEST(parse_good_lines) {
    char s[512];
    criteo_row r;
    tk_err e;
    int n = make_line(s, sizeof s, "1", "17", "-3", "68fd1e64", "FFFFFFFF");
    CHECK_EQ_INT(criteo_parse_tsv(s, (size_t)n, 0, &r, &e), 0);
    CHECK_EQ_INT(r.label, 1);
    CHECK_EQ_INT(r.dense[0], 17);
    CHECK_EQ_INT(r.dense[1], 0); // negative -> 0
    CHECK_EQ_INT(r.dense[12], 0); // empty -> 0
    CHECK(r.cat[0] == 0x68fd1e64u);
    CHECK(r.cat[1] == 0xffffffffu);
    CHECK_EQ_INT(r.cat[25], 0);
    s[n] = '\r'; // CRLF files
    CHECK_EQ_INT(criteo_parse_tsv(s, (size_t)n + 1, 0, &r, &e), 0);
    n = make_line(s, sizeof s, "0", "2147483647", "", "a", "");
    CHECK_EQ_INT(criteo_parse_tsv(s, (size_t)n, 1, &r, &e), 0);
    CHECK_EQ_INT(r.dense[0], 2147483647);
    CHECK_EQ_INT(r.cat[0], 10);
}

TK_TEST(parse_bad_lines_exact_errors) {
    char s[512];
    criteo_row r;
    tk_err e;
    int n = make_line(s, sizeof s, "1", "2147483648", "", "", "");
    CHECK_EQ_INT(criteo_parse_tsv(s, (size_t)n, 0, &r, &e), TK_EDATA);
    CHECK_STR(e.what, "field 2: integer '2147483648' out of range");
    n = make_line(s, sizeof s, "1", "-", "", "", "");
    CHECK_EQ_INT(criteo_parse_tsv(s, (size_t)n, 0, &r, &e), TK_EDATA);
    CHECK_STR(e.what, "field 2: expected an integer, got '-'");
    n = make_line(s, sizeof s, "1", "1", "2", "0x1f", "");
    CHECK_EQ_INT(criteo_parse_tsv(s, (size_t)n, 0, &r, &e), TK_EDATA);
    CHECK_STR(e.what, "field 15: expected up to 8 hex digits, got '0x1f'");
    n = make_line(s, sizeof s, "", "1", "2", "", "");
    CHECK_EQ_INT(criteo_parse_tsv(s, (size_t)n, 0, &r, &e), TK_EDATA);
    CHECK_STR(e.what, "field 1: label must be 0 or 1, got ''");
    CHECK_EQ_INT(criteo_parse_tsv("1\t2", 3, 0, &r, &e), TK_EDATA);
    CHECK_STR(e.what, "expected 40 tab-separated fields, got 2");
    CHECK_EQ_INT(criteo_parse_tsv("1\t2", 3, 1, &r, &e), TK_EDATA);
    CHECK_STR(e.what, "truncated line: expected 40 tab-separated fields, got 2");
    CHECK_EQ_INT(criteo_parse_tsv("", 0, 0, &r, &e), TK_EDATA);
}

TK_TEST(dictionary_first_appearance_order) {
    criteo_dict *d = criteo_dict_new();
    tk_err e;
    uint32_t vals[] = {7, 3, 7, 0, 3, 0xffffffffu, 9};
    for (int i = 0; i < 7; i++) CHECK_EQ_INT(criteo_dict_add(d, 4, vals[i], &e), 0);
    CHECK_EQ_INT(criteo_dict_size(d, 4), 5);
    CHECK_EQ_INT(criteo_dict_get(d, 4, 7), 0);
    CHECK_EQ_INT(criteo_dict_get(d, 4, 3), 1);
    CHECK_EQ_INT(criteo_dict_get(d, 4, 0), 2);
    CHECK_EQ_INT(criteo_dict_get(d, 4, 0xffffffffu), 3);
    CHECK_EQ_INT(criteo_dict_get(d, 4, 9), 4);
    CHECK_EQ_INT(criteo_dict_get(d, 4, 8), -1);
    CHECK_EQ_INT(criteo_dict_get(d, 5, 7), -1);
    for (uint32_t v = 0; v < 100000; v++) criteo_dict_add(d, 0, v * 2654435761u, &e); // growth
    CHECK_EQ_INT(criteo_dict_size(d, 0), 100000);
    CHECK_EQ_INT(criteo_dict_get(d, 0, 99999u * 2654435761u), 99999);
    criteo_dict_free(d);
}

TK_TEST(auc_known_values) {
    double s1[] = {0.1, 0.4, 0.35, 0.8};
    uint8_t y1[] = {0, 0, 1, 1};
    CHECK_NEAR(criteo_auc(s1, y1, 4), 0.75, 1e-15); // scikit-learn's roc_auc_score example
    double s2[] = {0.5, 0.5, 0.5, 0.2};
    uint8_t y2[] = {1, 0, 0, 0}; // ties count one half: (0.5 + 0.5 + 1) / 3
    CHECK_NEAR(criteo_auc(s2, y2, 4), 2.0 / 3.0, 1e-15);
    uint8_t y3[] = {0, 0, 0, 0};
    CHECK(isnan(criteo_auc(s1, y3, 4)));
}

static void write_file(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

static int count_lines(const char *path, char *last, size_t cap, int *last_nl) {
    tk_lines *l;
    tk_err e;
    if (tk_lines_open(&l, path, &e)) return -1;
    const char *s;
    size_t len;
    int n = 0, nl;
    while (tk_lines_next(l, &s, &len, &nl, &e) == 0 && s) {
        n++;
        snprintf(last, cap, "%.*s", (int)len, s);
        *last_nl = nl;
    }
    int bad = e.code != 0;
    tk_lines_close(l);
    return bad ? -1 : n;
}

TK_TEST(lines_plain_gzip_zstd_same) {
    char text[400000];
    size_t n = 0;
    for (int i = 0; i < 30000; i++) n += (size_t)snprintf(text + n, sizeof text - n, "line %d\n", i);
    n += (size_t)snprintf(text + n, sizeof text - n, "last");
    char dir[] = "/tmp/test_criteo.XXXXXX", p[3][256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(p[0], 256, "%s/plain", dir);
    snprintf(p[1], 256, "%s/gz", dir);
    snprintf(p[2], 256, "%s/zst", dir);
    write_file(p[0], text, n);
    gzFile g = gzopen(p[1], "wb");
    gzwrite(g, text, (unsigned)n);
    gzclose(g);
    size_t cap = ZSTD_compressBound(n);
    void *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, text, n, 3);
    write_file(p[2], z, zn);
    for (int k = 0; k < 3; k++) {
        char last[64] = "";
        int nl = 1;
        CHECK_EQ_INT(count_lines(p[k], last, sizeof last, &nl), 30001);
        CHECK_STR(last, "last");
        CHECK_EQ_INT(nl, 0);
    }
    write_file(p[2], z, zn - 5); // truncated zstd
    char last[64];
    int nl;
    CHECK_EQ_INT(count_lines(p[2], last, sizeof last, &nl), -1);
    free(z);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

static char *synth_day(int threads, uint64_t seed, int day, size_t *len, criteo_synth_day *out) {
    criteo_synth_opts o = {.days = 2, .rows_per_day = 20000, .seed = seed, .signal = 1, .click_rate = 0.03,
                           .threads = threads};
    criteo_synth *g;
    tk_err e;
    if (criteo_synth_new(&g, &o, &e)) return NULL;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    int rc = criteo_synth_write_day(g, day, f, "mem", out, &e);
    fclose(f);
    criteo_synth_free(g);
    if (rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

TK_TEST(synth_reproducible_across_threads_and_parses) {
    size_t n1, n2;
    criteo_synth_day d1, d2;
    char *a = synth_day(1, 42, 1, &n1, &d1), *b = synth_day(2, 42, 1, &n2, &d2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    CHECK_EQ_INT(d1.rows, 20000);
    CHECK_EQ_INT(d1.clicks, d2.clicks);
    CHECK(d1.clicks > 450 && d1.clicks < 750); // 3% of 20000 = 600
    CHECK(d1.auc > 0.8 && d1.auc < 0.95);
    // Every line parses, and the labels agree with the count.
    uint64_t ones = 0, lines = 0;
    for (char *p = a; p < a + n1;) {
        char *nl = memchr(p, '\n', (size_t)(a + n1 - p));
        criteo_row r;
        tk_err e;
        CHECK_EQ_INT(criteo_parse_tsv(p, (size_t)(nl - p), 0, &r, &e), 0);
        ones += r.label;
        lines++;
        p = nl + 1;
    }
    CHECK_EQ_INT(lines, 20000);
    CHECK_EQ_INT(ones, d1.clicks);
    size_t n3;
    char *c = synth_day(1, 43, 1, &n3, &d2);
    CHECK(c && (n3 != n1 || memcmp(a, c, n1) != 0));
    free(a);
    free(b);
    free(c);
}
