// kernels/rows.cu against kernels/rows_ref.c on fresh random inputs: gathers with repeated source
// rows, scatters to a random permutation (rows not named stay as they were: the output is poisoned
// on both sides first), every type pair, D = 128 (16-byte chunks), 16 and 13 (one element at a
// time), pointers off by one element (the scalar fallback); segment sums with random boundaries,
// empty segments and one hot row's segment of 20,000 items. All bitwise: a conversion is a
// function of one value and both sides add each column's items in the same order.
#include "gpu_test.h"
#include "rows.h"

static uint64_t rnd_n_;
static uint32_t rnd_below(uint32_t m) { return (uint32_t)(((uint64_t)gt_u32(rnd_n_++) * m) >> 32); }

// n random values in [-1, 1) (not exact in bf16: the rounding is exercised), as type t.
static void *rand_rows(tk_dtype t, size_t n) {
    float *x = gt_host(4 * n);
    gt_fill(x, n, -1, 1, 0);
    if (t == TK_F32) return x;
    uint16_t *h = gt_host(2 * n);
    for (size_t i = 0; i < n; i++) h[i] = tk_f32_to_bf16(x[i]);
    free(x);
    return h;
}
// The first n entries of a random permutation of [0, m): distinct rows.
static int32_t *rand_perm(int64_t m, int64_t n) {
    int32_t *p = gt_host(4 * (size_t)m);
    for (int64_t i = 0; i < m; i++) p[i] = (int32_t)i;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i + rnd_below((uint32_t)(m - i));
        int32_t t = p[i];
        p[i] = p[j], p[j] = t;
    }
    return p;
}
static int32_t *dev_i32(const int32_t *h, int64_t n) {
    if (!h) return NULL;
    int32_t *d = gt_dev(4 * (size_t)n + 1);
    gt_up(d, h, 4 * (size_t)n);
    return d;
}

// gather: spos random with repeats over n/2 + 1 source rows, one in 16 a pad (-1: a zero row);
// scatter: dpos a permutation into
// n + n/4 + 1 destination rows; off: both pointers one element past an aligned address.
static int copy_case(tk_dtype st, tk_dtype dt, int64_t n, int D, int gather, int scatter, int off) {
    int64_t sr = gather ? n / 2 + 1 : n, dr = scatter ? n + n / 4 + 1 : n;
    size_t ss = tk_dtype_size(st), ds = tk_dtype_size(dt);
    size_t ns = (size_t)(sr * D + off), nd = (size_t)(dr * D + off);
    void *hs = rand_rows(st, ns);
    int32_t *spos = NULL, *dpos = NULL;
    if (gather) {
        spos = gt_host(4 * (size_t)n);
        for (int64_t k = 0; k < n; k++) spos[k] = rnd_below(16) == 0 ? -1 : (int32_t)rnd_below((uint32_t)sr);
    }
    if (scatter) dpos = rand_perm(dr, n);
    void *hr = gt_host(nd * ds), *hg = gt_host(nd * ds);
    memset(hr, 0xff, nd * ds);
    tk_err e = {0};
    if (tk_rows_copy_ref((char *)hs + off * ss, st, spos, (char *)hr + off * ds, dt, dpos, n, NULL, D, &e))
        gt_die_("rows_copy ref", &e);
    void *s = gt_dev(ns * ss), *d = gt_dev(nd * ds);
    int32_t *sp = dev_i32(spos, n), *dp = dev_i32(dpos, n);
    gt_up(s, hs, ns * ss);
    gt_poison(d, nd * ds, 0xff);
    if (tk_rows_copy(gt_ctx_, (char *)s + off * ss, st, sp, (char *)d + off * ds, dt, dp, n, NULL, D, &e) || gt_sync(&e))
        gt_die_("rows_copy cuda", &e);
    gt_down(hg, d, nd * ds);
    int bad = memcmp(hg, hr, nd * ds) != 0;
    printf("# table rows_copy %s -> %s n %lld D %d%s%s%s: %s\n", tk_dtype_name(st), tk_dtype_name(dt), (long long)n, D,
           gather ? " spos" : "", scatter ? " dpos" : "", off ? " unaligned" : "", bad ? "DIFFER" : "identical");
    tk_free(gt_ctx_, s), tk_free(gt_ctx_, d);
    if (sp) tk_free(gt_ctx_, sp);
    if (dp) tk_free(gt_ctx_, dp);
    free(hs), free(hr), free(hg), free(spos), free(dpos);
    return bad;
}

TK_TEST(rows_copy_random) {
    tk_dtype t[2] = {TK_F32, TK_BF16};
    int Ds[3] = {128, 16, 13};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 3; i++) {
                int64_t n = Ds[i] == 128 ? 1 << 16 : 1 << 18;
                CHECK_EQ_INT(copy_case(t[a], t[b], n, Ds[i], 1, 0, 0), 0);
                CHECK_EQ_INT(copy_case(t[a], t[b], n, Ds[i], 0, 1, 0), 0);
                CHECK_EQ_INT(copy_case(t[a], t[b], 1000 + i, Ds[i], 1, 1, 0), 0);
                CHECK_EQ_INT(copy_case(t[a], t[b], 777, Ds[i], 0, 0, 0), 0);
                CHECK_EQ_INT(copy_case(t[a], t[b], 999, Ds[i], 1, 1, 1), 0);
            }
    // the sizes of a step: 2^20 rows of 128 (more rows than one grid pass covers)
    CHECK_EQ_INT(copy_case(TK_BF16, TK_BF16, 1 << 20, 128, 1, 0, 0), 0);
    CHECK_EQ_INT(copy_case(TK_F32, TK_BF16, 1 << 20, 128, 0, 1, 0), 0);
    CHECK_EQ_INT(copy_case(TK_BF16, TK_F32, 1 << 20, 128, 1, 1, 0), 0);
}

// nseg segments over nseg + nseg/4 + 1 destination rows; lengths 0 (one in 6) or 1..12, segment
// `hot` (if >= 0) holds 20,000 items; pos repeats over R source rows.
static int segsum_case(tk_dtype st, int nseg, int D, int hot, int R, int off) {
    int dr = nseg + nseg / 4 + 1;
    int32_t *seg_off = gt_host(4 * ((size_t)nseg + 1));
    seg_off[0] = 0;
    for (int g = 0; g < nseg; g++) {
        uint32_t u = rnd_below(6 * 12);
        int len = g == hot ? 20000 : u < 12 ? 0 : 1 + (int)(u % 12);
        seg_off[g + 1] = seg_off[g] + len;
    }
    int64_t m = seg_off[nseg];
    int32_t *pos = gt_host(4 * (size_t)m + 4), *seg_row = rand_perm(dr, nseg);
    for (int64_t k = 0; k < m; k++) pos[k] = (int32_t)rnd_below((uint32_t)R);
    size_t ss = tk_dtype_size(st), ns = (size_t)R * D + off, nd = (size_t)dr * D + off;
    void *hs = rand_rows(st, ns);
    float *hr = gt_host(4 * nd), *hg = gt_host(4 * nd);
    memset(hr, 0xff, 4 * nd);
    tk_err e = {0};
    if (tk_rows_segsum_ref((char *)hs + off * ss, st, pos, seg_off, seg_row, nseg, NULL, m, D, hr + off, &e))
        gt_die_("rows_segsum ref", &e);
    void *s = gt_dev(ns * ss);
    float *d = gt_dev(4 * nd);
    int32_t *dpos = dev_i32(pos, m), *doff = dev_i32(seg_off, nseg + 1), *drow = dev_i32(seg_row, nseg);
    gt_up(s, hs, ns * ss);
    gt_poison(d, 4 * nd, 0xff);
    void *ws = gt_dev(tk_rows_segsum_ws_bytes(TK_BACKEND_CUDA, m, D));
    if (tk_rows_segsum(gt_ctx_, (char *)s + off * ss, st, dpos, doff, drow, nseg, NULL, m, D, d + off, ws, &e) ||
        gt_sync(&e))
        gt_die_("rows_segsum cuda", &e);
    tk_free(gt_ctx_, ws);
    gt_down(hg, d, 4 * nd);
    int bad = memcmp(hg, hr, 4 * nd) != 0;
    printf("# table rows_segsum %s nseg %d items %lld D %d%s%s: %s\n", tk_dtype_name(st), nseg, (long long)m, D,
           hot >= 0 ? " hot" : "", off ? " unaligned" : "", bad ? "DIFFER" : "identical");
    tk_free(gt_ctx_, s), tk_free(gt_ctx_, d), tk_free(gt_ctx_, dpos), tk_free(gt_ctx_, doff), tk_free(gt_ctx_, drow);
    free(seg_off), free(pos), free(seg_row), free(hs), free(hr), free(hg);
    return bad;
}

TK_TEST(rows_segsum_random) {
    tk_dtype t[2] = {TK_F32, TK_BF16};
    int Ds[3] = {128, 16, 13};
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < 3; i++) {
            int nseg = Ds[i] == 128 ? 1 << 15 : 1 << 17;
            CHECK_EQ_INT(segsum_case(t[a], nseg, Ds[i], (int)rnd_below((uint32_t)nseg), 100000, 0), 0);
            CHECK_EQ_INT(segsum_case(t[a], 1000, Ds[i], -1, 50, 0), 0); // many repeats of few rows
            CHECK_EQ_INT(segsum_case(t[a], 333, Ds[i], 7, 5000, 1), 0);
        }
    CHECK_EQ_INT(segsum_case(TK_BF16, 1 << 20, 128, 12345, 1 << 18, 0), 0);
}

// Small integers computed by hand (the same cases as tests/unit/test_ops_dlrm.c), on the device.
TK_TEST(rows_exact) {
    tk_err e = {0};
    float src[4 * 3], out[4 * 3];
    for (int r = 0; r < 4; r++) src[3 * r] = 10.0f * r, src[3 * r + 1] = 10.0f * r + 1, src[3 * r + 2] = 10.0f * r + 2;
    int32_t sp[2] = {1, 3}, dp[2] = {3, 1};
    float *s = gt_dev(sizeof src), *d = gt_dev(sizeof out);
    int32_t *dsp = dev_i32(sp, 2), *ddp = dev_i32(dp, 2);
    gt_up(s, src, sizeof src);
    gt_poison(d, sizeof out, 0);
    CHECK_EQ_INT(tk_rows_copy(gt_ctx_, s, TK_F32, dsp, d, TK_F32, ddp, 2, NULL, 3, &e), 0);
    gt_down(out, d, sizeof out);
    float want[12] = {0, 0, 0, 30, 31, 32, 0, 0, 0, 10, 11, 12};
    for (int i = 0; i < 12; i++) CHECK(out[i] == want[i]);
    // f32 -> bf16: 1 + 3*2^-9 -> 0x3f81 (up), 1 + 2^-8 -> 0x3f80 (tie to even), 1 + 3*2^-8 -> 0x3f82
    float v[4] = {1.005859375f, 1.00390625f, 1.01171875f, -2.5f};
    uint16_t hb[4];
    gt_up(s, v, sizeof v);
    CHECK_EQ_INT(tk_rows_copy(gt_ctx_, s, TK_F32, NULL, d, TK_BF16, NULL, 1, NULL, 4, &e), 0);
    gt_down(hb, d, sizeof hb);
    CHECK(hb[0] == 0x3f81 && hb[1] == 0x3f80 && hb[2] == 0x3f82 && hb[3] == 0xc020);
    // segments: row 2 = rows 4 + 1 + 1 of (r, 10r), row 0 empty, row 5 = rows 0 + 3 + 2; and
    // ((1e8 + 1) - 1e8) + 1 = 1 in item order
    float sv[5 * 2], so[6 * 2];
    for (int r = 0; r < 5; r++) sv[2 * r] = (float)r, sv[2 * r + 1] = 10.0f * r;
    int32_t pos[6] = {4, 1, 1, 0, 3, 2}, off[4] = {0, 3, 3, 6}, row[3] = {2, 0, 5};
    int32_t *dpos = dev_i32(pos, 6), *doff = dev_i32(off, 4), *drow = dev_i32(row, 3);
    gt_up(s, sv, sizeof sv);
    float *d2 = gt_dev(sizeof so);
    gt_poison(d2, sizeof so, 0);
    void *ws = gt_dev(tk_rows_segsum_ws_bytes(TK_BACKEND_CUDA, 612, 2));
    CHECK_EQ_INT(tk_rows_segsum(gt_ctx_, s, TK_F32, dpos, doff, drow, 3, NULL, 6, 2, d2, ws, &e), 0);
    gt_down(so, d2, sizeof so);
    float wseg[12] = {0, 0, 0, 0, 6, 60, 0, 0, 0, 0, 5, 50};
    for (int i = 0; i < 12; i++) CHECK(so[i] == wseg[i]);
    float big[3] = {1e8f, 1, -1e8f}, one = 0;
    int32_t bp[4] = {0, 1, 2, 1}, boff[2] = {0, 4};
    gt_up(s, big, sizeof big), gt_up(dpos, bp, sizeof bp), gt_up(doff, boff, sizeof boff);
    CHECK_EQ_INT(tk_rows_segsum(gt_ctx_, s, TK_F32, dpos, doff, drow + 1, 1, NULL, 4, 1, d2, ws, &e), 0); // into row 0
    gt_down(&one, d2, 4);
    CHECK(one == 1);
    // Pieces of 256 items cut at the multiples of 256 of k (kernels/rows.h), worked by hand in
    // tests/unit/test_ops_dlrm.c: segment [0, 100) of ones = 100; segment [100, 612), 2^24 then
    // 511 ones, by pieces [100, 256) + [256, 512) + [512, 612) = 2^24 + 256 + 100 = 16,777,572
    // (one chain of adds would give 2^24). Source row 0 = 2^24, row 1 = 1; D = 1.
    {
        float ones[2] = {16777216.0f, 1.0f}, got[2] = {0, 0};
        int32_t *op = gt_host(612 * 4), ooff[3] = {0, 100, 612}, orow[2] = {1, 0};
        for (int k = 0; k < 612; k++) op[k] = k == 100 ? 0 : 1;
        int32_t *dop = dev_i32(op, 612), *dooff = dev_i32(ooff, 3), *dorow = dev_i32(orow, 2);
        float *dsrc = gt_dev(sizeof ones), *dgot = gt_dev(sizeof got);
        gt_up(dsrc, ones, sizeof ones);
        gt_poison(dgot, sizeof got, 0xff);
        CHECK_EQ_INT(tk_rows_segsum(gt_ctx_, dsrc, TK_F32, dop, dooff, dorow, 2, NULL, 612, 1, dgot, ws, &e), 0);
        gt_down(got, dgot, sizeof got);
        CHECK(got[0] == 16777572.0f && got[1] == 100.0f);
        void *q[] = {dop, dooff, dorow, dsrc, dgot};
        for (int i = 0; i < 5; i++) tk_free(gt_ctx_, q[i]);
        free(op);
    }
    // counts read on the device: rows_copy of 2 with *dn = 1 moves the first row only; segsum of
    // 3 segments with *dnseg = 2 writes rows 2 and 0, not 5; a negative count moves nothing
    int64_t cnt[3] = {1, 2, -4};
    int64_t *dcnt = gt_dev(sizeof cnt);
    gt_up(dcnt, cnt, sizeof cnt);
    gt_up(s, src, sizeof src);
    gt_poison(d, sizeof out, 0);
    CHECK_EQ_INT(tk_rows_copy(gt_ctx_, s, TK_F32, dsp, d, TK_F32, ddp, 2, dcnt, 3, &e), 0);
    gt_down(out, d, sizeof out);
    for (int i = 0; i < 12; i++) CHECK(out[i] == (i >= 9 ? want[i] : 0));
    gt_poison(d, sizeof out, 0);
    CHECK_EQ_INT(tk_rows_copy(gt_ctx_, s, TK_F32, dsp, d, TK_F32, ddp, 2, dcnt + 2, 3, &e), 0);
    gt_down(out, d, sizeof out);
    for (int i = 0; i < 12; i++) CHECK(out[i] == 0);
    gt_up(s, sv, sizeof sv), gt_up(dpos, pos, sizeof pos), gt_up(doff, off, sizeof off);
    gt_poison(d2, sizeof so, 0xff); // NaN
    CHECK_EQ_INT(tk_rows_segsum(gt_ctx_, s, TK_F32, dpos, doff, drow, 3, dcnt + 1, 6, 2, d2, ws, &e), 0);
    gt_down(so, d2, sizeof so);
    for (int i = 0; i < 12; i++) { // rows 0 and 2 written; 1, 3, 4 and 5 untouched (still NaN)
        int written = i < 2 || (i >= 4 && i < 6);
        CHECK(written ? so[i] == wseg[i] : so[i] != so[i]);
    }
    void *p[] = {s, d, dsp, ddp, dpos, doff, drow, d2, dcnt, ws};
    for (int i = 0; i < 10; i++) tk_free(gt_ctx_, p[i]);
}

TK_TEST(rows_bad_arguments) {
    tk_err e = {0};
    CHECK_EQ_INT(tk_rows_copy(gt_ctx_, NULL, TK_F16, NULL, NULL, TK_F32, NULL, 1, NULL, 4, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_rows_copy(gt_ctx_, NULL, TK_F32, NULL, NULL, TK_F32, NULL, 1, NULL, 0, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_rows_copy(gt_ctx_, NULL, TK_F32, NULL, NULL, TK_F32, NULL, 0, NULL, 4, &e), 0); // no-op
    CHECK_EQ_INT(tk_rows_segsum(gt_ctx_, NULL, TK_I32, NULL, NULL, NULL, 1, NULL, 0, 4, NULL, NULL, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_rows_segsum(gt_ctx_, NULL, TK_F32, NULL, NULL, NULL, -1, NULL, 0, 4, NULL, NULL, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_rows_segsum(gt_ctx_, NULL, TK_F32, NULL, NULL, NULL, 1, NULL, -1, 4, NULL, NULL, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_rows_segsum(gt_ctx_, NULL, TK_F32, NULL, NULL, NULL, 1, NULL, 5, 4, NULL, NULL, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "rows_segsum: no workspace");
    CHECK_EQ_INT(tk_rows_segsum(gt_ctx_, NULL, TK_F32, NULL, NULL, NULL, 0, NULL, 0, 4, NULL, NULL, &e), 0); // no-op
}

// Time of the step-sized cases (median of 11): rows moved, and the hot segment's latency.
struct rbench { void *s, *d, *ws; int32_t *pos, *off, *row; tk_dtype st, dt; int64_t n; int nseg, seg; };
static void rbench_run(void *a) {
    struct rbench *b = a;
    tk_err e = {0};
    int rc = b->seg ? tk_rows_segsum(gt_ctx_, b->s, b->st, b->pos, b->off, b->row, b->nseg, NULL, b->n, 128, b->d,
                                     b->ws, &e)
                    : tk_rows_copy(gt_ctx_, b->s, b->st, b->pos, b->d, b->dt, NULL, b->n, NULL, 128, &e);
    if (rc) gt_die_("rows bench", &e);
}

TK_TEST(rows_bench) {
    enum { N = 1 << 20, R = 1 << 18 };
    struct rbench b = {0};
    b.s = gt_dev((size_t)R * 128 * 4), b.d = gt_dev((size_t)N * 128 * 4);
    int32_t *pos = gt_host(4 * (size_t)N), off[2] = {0, 20000}, row = 0;
    for (int k = 0; k < N; k++) pos[k] = (int32_t)rnd_below(R);
    b.pos = dev_i32(pos, N), b.off = dev_i32(off, 2), b.row = dev_i32(&row, 1);
    gt_poison(b.s, (size_t)R * 128 * 4, 0x3c);
    b.n = N;
    b.st = b.dt = TK_BF16;
    double tb = gt_time_ms(rbench_run, &b, 11);
    b.st = TK_F32;
    double tf = gt_time_ms(rbench_run, &b, 11);
    printf("# table bench rows_copy gather n %d D 128: bf16 -> bf16 %.3f ms (%.0f GB/s), f32 -> bf16 %.3f ms (%.0f GB/s)\n",
           N, tb, (double)N * 128 * 4 / tb / 1e6, tf, (double)N * 128 * 6 / tf / 1e6);
    b.ws = gt_dev(tk_rows_segsum_ws_bytes(TK_BACKEND_CUDA, N, 128));
    b.seg = 1, b.nseg = 1, b.n = 20000;
    double th = gt_time_ms(rbench_run, &b, 11);
    b.st = TK_BF16;
    double thb = gt_time_ms(rbench_run, &b, 11);
    // 2^18 segments of 4 items (the sizes of a step's rarer rows)
    int32_t *soff = gt_host(4 * ((size_t)(N / 4) + 1));
    for (int g = 0; g <= N / 4; g++) soff[g] = 4 * g;
    tk_free(gt_ctx_, b.off), tk_free(gt_ctx_, b.row);
    int32_t *perm = rand_perm(N, N / 4); // distinct destination rows
    b.off = dev_i32(soff, N / 4 + 1), b.row = dev_i32(perm, N / 4);
    b.nseg = N / 4, b.n = N;
    double tmb = gt_time_ms(rbench_run, &b, 11);
    b.st = TK_F32;
    double tmf = gt_time_ms(rbench_run, &b, 11);
    printf("# table bench rows_segsum one segment of 20000 items D 128: f32 %.3f ms, bf16 %.3f ms\n", th, thb);
    printf("# table bench rows_segsum %d segments of 4 items D 128: f32 %.3f ms (%.0f GB/s), bf16 %.3f ms (%.0f GB/s)\n",
           N / 4, tmf, (double)N * 128 * 4 / tmf / 1e6, tmb, (double)N * 128 * 2 / tmb / 1e6);
    free(soff), free(perm);
    // one segment of all N items (a row every sample of the batch uses)
    int32_t whole[2] = {0, N}, row0 = 0;
    tk_free(gt_ctx_, b.off), tk_free(gt_ctx_, b.row);
    b.off = dev_i32(whole, 2), b.row = dev_i32(&row0, 1);
    b.nseg = 1;
    double t1f = gt_time_ms(rbench_run, &b, 11);
    printf("# table bench rows_segsum one segment of %d items D 128: f32 %.3f ms\n", N, t1f);
    void *p[] = {b.s, b.d, b.pos, b.off, b.row, b.ws};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, p[i]);
    free(pos);
    // The hybrid step's frequent sums: the gradients of a batch of 65,536 x 26 lookups in bf16
    // (436 MB, past L2), 32,768 replica rows used 130,000 / (g + 1) times each (zipf-like, 1.43 M
    // items in all), at random positions.
    const int RS = 65536 * 26, NS = 32768;
    int32_t *zoff = gt_host(4 * ((size_t)NS + 1)), *zrow = rand_perm(NS, NS);
    zoff[0] = 0;
    for (int g = 0; g < NS; g++) zoff[g + 1] = zoff[g] + 130000 / (g + 1);
    const int NZ = zoff[NS];
    int32_t *zpos = gt_host(4 * (size_t)NZ);
    for (int k = 0; k < NZ; k++) zpos[k] = (int32_t)rnd_below(RS);
    struct rbench z = {.s = gt_dev((size_t)RS * 128 * 2), .d = gt_dev((size_t)NS * 128 * 4),
                       .ws = gt_dev(tk_rows_segsum_ws_bytes(TK_BACKEND_CUDA, NZ, 128)), .pos = dev_i32(zpos, NZ),
                       .off = dev_i32(zoff, NS + 1), .row = dev_i32(zrow, NS), .st = TK_BF16, .n = NZ, .nseg = NS,
                       .seg = 1};
    gt_poison(z.s, (size_t)RS * 128 * 2, 0x3c);
    double tz = gt_time_ms(rbench_run, &z, 11);
    printf("# table bench rows_segsum zipf %d segments, %d items of bf16 128 from %d rows: %.3f ms (%.0f GB/s)\n", NS,
           NZ, RS, tz, (double)NZ * 128 * 2 / tz / 1e6);
    void *q[] = {z.s, z.d, z.pos, z.off, z.row, z.ws};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, q[i]);
    free(zoff), free(zrow), free(zpos);
    CHECK(1);
}
