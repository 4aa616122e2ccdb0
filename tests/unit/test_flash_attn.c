// kernels/flash_attn.h's reference (the cpu backend): by hand, against the unfused padded path
// (kernels/attention.h through tk_attention_fwd/_bwd on the cpu), and packed sequences against
// the same sequences padded (the same values, the same dropout mask: bit for bit).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "core/philox.h"
#include "flash_attn.h"
#include "sgd.h"
#include "tk_test.h"
#include "tk_test_cpu.h"

// ||a - b|| / ||b|| over rows of width w where keep[row]
static double relerr_rows(const float *a, const float *b, size_t rows, size_t w, const char *keep) {
    double num = 0, den = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t k = 0; k < (keep[r] ? w : 0); k++) {
            double d = (double)a[r * w + k] - b[r * w + k];
            if (a[r * w + k] != a[r * w + k]) return INFINITY;
            num += d * d, den += (double)b[r * w + k] * b[r * w + k];
        }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

TK_TEST(flash_forward_by_hand) {
    // one sequence of 2 tokens in a slot of 3, one head of D = 1: q = (1, 2), k = (0, ln 3),
    // v = (2, 4): row 0: P = (1/4, 3/4), ctx 3.5, lse ln 4; row 1: P = (1/10, 9/10), ctx 3.8, lse ln 10
    float qkv[3 * 3] = {1, 0, 2, 2, logf(3), 4, 7, 7, 7}, ctx[3] = {-1, -1, -1}, lse[3] = {-1, -1, -1};
    int32_t start[1] = {0}, len[1] = {2};
    tk_err e = {0};
    CHECK(tk_flash_attn_fwd(tk_test_cpu(), TK_F32, 1, 1, 1, 3, start, len, qkv, NULL, ctx, lse, &e) == 0);
    CHECK_NEAR(ctx[0], 3.5, 1e-6);
    CHECK_NEAR(ctx[1], 3.8, 1e-6);
    CHECK_NEAR(lse[0], log(4.0), 1e-6);
    CHECK_NEAR(lse[1], log(10.0), 1e-6);
    CHECK(ctx[2] == -1 && lse[2] == -1); // the row outside the sequence is not written
    // a length past Lstride is refused
    len[0] = 4;
    CHECK(tk_flash_attn_fwd(tk_test_cpu(), TK_F32, 1, 1, 1, 3, start, len, qkv, NULL, ctx, lse, &e) == TK_EINTERNAL);
}

// The flash reference against tk_attention_fwd/_bwd on the padded layout (start[b] = b L): ctx
// and dqkv of the rows i < len[b] (dctx is 0 on the other rows, which the padded path also
// computes and back-propagates), fp32, ||flash - padded|| / ||padded|| <= 1e-5.
static void vs_padded(int B, int L, int NH, int D, float p, const int32_t *len, int *tk_failed_) {
    const int H = NH * D;
    const size_t rows = (size_t)B * L, nq = rows * 3 * H, nc = rows * H, np = (size_t)B * NH * L * L;
    float *qkv = malloc(nq * 4), *dctx = malloc(nc * 4), *c1 = malloc(nc * 4), *c2 = malloc(nc * 4);
    float *g1 = malloc(nq * 4), *g2 = malloc(nq * 4), *lse = malloc((size_t)B * NH * L * 4);
    void *ws = malloc(tk_flash_attn_bwd_ws_bytes((int)rows, B, NH, D, L));
    int32_t *start = malloc(B * 4);
    char *keep = malloc(rows);
    tk_test_fill(qkv, nq, 11, 1, -2, 2), tk_test_fill(dctx, nc, 11, 2, -1, 1);
    for (int b = 0; b < B; b++) {
        start[b] = b * L;
        for (int i = 0; i < L; i++) {
            keep[(size_t)b * L + i] = i < len[b];
            if (i >= len[b]) memset(dctx + ((size_t)b * L + i) * H, 0, (size_t)H * 4);
        }
    }
    int64_t step = 7;
    tk_dropout d = {.p = p, .seed = 99, .site = 4, .step = &step, .offset = 24};
    tk_attn_bufs ab = {.qkvh = malloc(nq * 4), .P = malloc(np * 4), .S = malloc(np * 4), .ctxh = malloc(nc * 4),
                       .dqkvh = malloc(nq * 4)};
    tk_err e = {0};
    CHECK(tk_attention_fwd(tk_test_cpu(), TK_F32, B, L, NH, D, start, len, qkv, &d, &ab, c1, &e) == 0);
    CHECK(tk_attention_bwd(tk_test_cpu(), TK_F32, B, L, NH, D, start, len, qkv, &d, &ab, dctx, g1, &e) == 0);
    CHECK(tk_flash_attn_fwd(tk_test_cpu(), TK_F32, B, NH, D, L, start, len, qkv, &d, c2, lse, &e) == 0);
    CHECK(tk_flash_attn_bwd(tk_test_cpu(), TK_F32, B, NH, D, L, start, len, qkv, c2, lse, dctx, &d, ws, g2, &e) == 0);
    double ec = relerr_rows(c2, c1, rows, H, keep), eg = relerr_rows(g2, g1, rows, 3 * H, keep);
    printf("# B%d L%d NH%d D%d p%.1f: ctx %.2e dqkv %.2e\n", B, L, NH, D, p, ec, eg);
    CHECK(ec <= 1e-5);
    CHECK(eg <= 1e-5);
    void *f[] = {qkv, dctx, c1, c2, g1, g2, lse, ws, start, keep, ab.qkvh, ab.P, ab.S, ab.ctxh, ab.dqkvh};
    for (int i = 0; i < 15; i++) free(f[i]);
}

TK_TEST(flash_ref_matches_padded_path) {
    const int32_t len[4] = {37, 1, 20, 36};
    vs_padded(4, 37, 2, 5, 0.0f, len, tk_failed_);
    vs_padded(4, 37, 2, 5, 0.3f, len, tk_failed_);
    const int32_t len2[2] = {64, 9};
    vs_padded(2, 64, 3, 16, 0.1f, len2, tk_failed_);
}

// Packed back to back (with an unused slot) = the same sequences at s L: ctx, lse and dqkv bit
// for bit, in fp32 and bf16; rows outside the sequences untouched.
TK_TEST(flash_ref_packed_equals_padded) {
    enum { NS = 5, L = 19, NH = 2, D = 4, H = NH * D };
    const int32_t len[NS] = {19, 0, 1, 12, 18};
    int32_t pstart[NS], start[NS];
    int rows = 0;
    for (int s = 0; s < NS; s++) start[s] = s * L, pstart[s] = rows, rows += len[s];
    float qkv[NS * L * 3 * H], dctx[NS * L * H], pq[NS * L * 3 * H], pdc[NS * L * H];
    tk_test_fill(qkv, sizeof qkv / 4, 11, 3, -2, 2), tk_test_fill(dctx, sizeof dctx / 4, 11, 4, -1, 1);
    for (int s = 0; s < NS; s++) // the packed copies of the rows
        for (int i = 0; i < len[s]; i++) {
            memcpy(pq + (size_t)(pstart[s] + i) * 3 * H, qkv + (size_t)(start[s] + i) * 3 * H, 3 * H * 4);
            memcpy(pdc + (size_t)(pstart[s] + i) * H, dctx + (size_t)(start[s] + i) * H, H * 4);
        }
    int64_t step = 1;
    tk_dropout d = {.p = 0.25f, .seed = 5, .site = 2, .step = &step, .offset = 0};
    static char ws[1 << 16];
    CHECK(tk_flash_attn_bwd_ws_bytes(NS * L, NS, NH, D, L) <= sizeof ws);
    for (int t = 0; t < 2; t++) {
        tk_dtype act = t ? TK_BF16 : TK_F32;
        const size_t es = tk_dtype_size(act);
        static char aq[NS * L * 3 * H * 4], adc[NS * L * H * 4], apq[NS * L * 3 * H * 4], apdc[NS * L * H * 4];
        static char c1[NS * L * H * 4], c2[NS * L * H * 4], g1[NS * L * 3 * H * 4], g2[NS * L * 3 * H * 4];
        float l1[NS * NH * L], l2[NS * NH * L];
        const float *src[4] = {qkv, dctx, pq, pdc};
        char *dst[4] = {aq, adc, apq, apdc};
        const size_t cnt[4] = {NS * L * 3 * H, NS * L * H, NS * L * 3 * H, NS * L * H};
        for (int k = 0; k < 4; k++)
            for (size_t i = 0; i < cnt[k]; i++)
                if (act == TK_F32) ((float *)dst[k])[i] = src[k][i];
                else ((uint16_t *)dst[k])[i] = tk_f32_to_bf16(src[k][i]);
        memset(c1, 0x5a, sizeof c1), memset(g1, 0x5a, sizeof g1), memset(l1, 0x5a, sizeof l1);
        memset(c2, 0x5a, sizeof c2), memset(g2, 0x5a, sizeof g2), memset(l2, 0x5a, sizeof l2);
        tk_err e = {0};
        CHECK(tk_flash_attn_fwd(tk_test_cpu(), act, NS, NH, D, L, start, len, aq, &d, c1, l1, &e) == 0);
        CHECK(tk_flash_attn_bwd(tk_test_cpu(), act, NS, NH, D, L, start, len, aq, c1, l1, adc, &d, ws, g1, &e) == 0);
        CHECK(tk_flash_attn_fwd(tk_test_cpu(), act, NS, NH, D, L, pstart, len, apq, &d, c2, l2, &e) == 0);
        CHECK(tk_flash_attn_bwd(tk_test_cpu(), act, NS, NH, D, L, pstart, len, apq, c2, l2, apdc, &d, ws, g2, &e) == 0);
        size_t diff = 0, untouched = 0, outside = 0;
        for (int s = 0; s < NS; s++)
            for (int i = 0; i < L; i++) {
                const char *a = c1 + (size_t)(start[s] + i) * H * es, *ga = g1 + (size_t)(start[s] + i) * 3 * H * es;
                const float *la = l1 + ((size_t)s * NH) * L + i, *lb = l2 + ((size_t)s * NH) * L + i;
                if (i < len[s]) {
                    diff += memcmp(a, c2 + (size_t)(pstart[s] + i) * H * es, H * es) != 0;
                    diff += memcmp(ga, g2 + (size_t)(pstart[s] + i) * 3 * H * es, 3 * H * es) != 0;
                    for (int h = 0; h < NH; h++) diff += memcmp(la + h * L, lb + h * L, 4) != 0;
                } else { // the padded rows keep the fill
                    outside++;
                    for (size_t k = 0; k < H * es; k++) untouched += a[k] == 0x5a;
                    for (size_t k = 0; k < 3 * H * es; k++) untouched += ga[k] == 0x5a;
                }
            }
        printf("# %s: %zu rows differ; %zu rows outside, %zu of %zu bytes untouched\n", tk_dtype_name(act), diff,
               outside, untouched, outside * 4 * H * es);
        CHECK(diff == 0);
        CHECK(untouched == outside * 4 * H * es);
    }
}

// bf16 storage (values rounded once) against fp32 on the same rounded inputs: <= 1e-2.
TK_TEST(flash_ref_bf16_close_to_f32) {
    enum { NS = 3, L = 33, NH = 2, D = 8, H = NH * D, R = NS * L };
    int32_t start[NS] = {0, 33, 66}, len[NS] = {33, 17, 5};
    static float qkv[R * 3 * H], dctx[R * H], c[R * H], g[R * 3 * H], cb[R * H], gb[R * 3 * H], lse[NS * NH * L];
    static uint16_t bq[R * 3 * H], bdc[R * H], bc[R * H], bg[R * 3 * H];
    static char ws[1 << 16], keep[R];
    tk_test_fill(qkv, R * 3 * H, 11, 5, -2, 2), tk_test_fill(dctx, R * H, 11, 6, -1, 1);
    for (int i = 0; i < R * 3 * H; i++) bq[i] = tk_f32_to_bf16(qkv[i]), qkv[i] = tk_bf16_to_f32(bq[i]);
    for (int i = 0; i < R * H; i++) bdc[i] = tk_f32_to_bf16(dctx[i]), dctx[i] = tk_bf16_to_f32(bdc[i]);
    for (int r = 0; r < R; r++) keep[r] = r % L < len[r / L];
    int64_t step = 3;
    tk_dropout d = {.p = 0.1f, .seed = 1, .site = 0, .step = &step, .offset = 8};
    tk_err e = {0};
    CHECK(tk_flash_attn_fwd(tk_test_cpu(), TK_F32, NS, NH, D, L, start, len, qkv, &d, c, lse, &e) == 0);
    CHECK(tk_flash_attn_bwd(tk_test_cpu(), TK_F32, NS, NH, D, L, start, len, qkv, c, lse, dctx, &d, ws, g, &e) == 0);
    CHECK(tk_flash_attn_fwd(tk_test_cpu(), TK_BF16, NS, NH, D, L, start, len, bq, &d, bc, lse, &e) == 0);
    CHECK(tk_flash_attn_bwd(tk_test_cpu(), TK_BF16, NS, NH, D, L, start, len, bq, bc, lse, bdc, &d, ws, bg, &e) == 0);
    for (int i = 0; i < R * H; i++) cb[i] = tk_bf16_to_f32(bc[i]);
    for (int i = 0; i < R * 3 * H; i++) gb[i] = tk_bf16_to_f32(bg[i]);
    double ec = relerr_rows(cb, c, R, H, keep), eg = relerr_rows(gb, g, R, 3 * H, keep);
    printf("# bf16 vs f32: ctx %.2e dqkv %.2e\n", ec, eg);
    CHECK(ec <= 1e-2 && ec > 0);
    CHECK(eg <= 1e-2 && eg > 0);
}
