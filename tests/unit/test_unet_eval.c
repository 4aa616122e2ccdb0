// The 3D U-Net's sliding-window evaluation on the cpu backend (kernels/swin.h, kernels/dice_score.h):
// window grids worked out here by hand from MLPerf's inference.py (its crop, its padding, its
// windows), the importance map against the closed form of a 3-D Gaussian, and small volumes whose
// weighted sums, argmax and Dice are known.
//
// Also the C side of tests/cli/unet-eval-oracle.bats: `test_unet_eval --drive DIR` reads
// DIR/params.txt ("D H W roi overlap B"), DIR/image.f32 (D H W), DIR/label.u8 (D H W) and
// DIR/net.f32 (a stand-in network: w[3], b[3], then P (roi, roi, roi, 3); the logits of a window
// voxel with input x at window position l are fl(fl(fl(w_k x) + b_k) + P[l][k])), evaluates the
// volume with the cpu ops in batches of B windows, writes DIR/pred.u8 (the cropped region's argmax)
// DIR/result.f32 (its sums divided, (voxels, 3)) and DIR/map.f32 (the importance map), and prints "grid n0 n1 n2 crop c0 c1 c2 out
// o0 o1 o2 pad p0 p1 p2" and "dice KIDNEY TUMOR" (%.9g); an error goes to stderr with its code.
// `test_unet_eval --mean RANKS` reads "kidney tumor" lines (the cases in order) from stdin and prints
// tk_dice_mean's "mean KIDNEY TUMOR MEAN_DICE".
#include <math.h>
#include <string.h>

#include "core/bf16.h"
#include "dice_score.h"
#include "swin.h"

#define main tk_test_main
#include "tk_test.h"
#undef main
#include "tk_test_cpu.h"

// ---- the grid ----

typedef struct {
    int64_t n;             // voxels on the axis
    int64_t crop, out, p0; // expected crop in front, kept voxels, padding in front
    int nw;                // windows
} axis_case;

// One axis at a time (the other two 128, which roi 128 leaves alone), by hand from inference.py:
// s = int(r (1 - o)); b = n % s kept if b < s // 2; c = n - b; p = (s - c % s) % s (+ s if c + p < r);
// windows (c + p - r) // s + 1.
TK_TEST(grid_axes_by_hand) {
    tk_err e = {0};
    const axis_case roi128[] = {
        {128, 0, 128, 0, 1},  // a multiple of 64: nothing to do
        {130, 1, 128, 0, 1},  // b = 2 < 32: one voxel off each end
        {131, 1, 128, 0, 1},  // b = 3: 1 in front, 2 behind
        {160, 0, 160, 16, 2}, // b = 32 is not < 32: pad 32 (16 + 16) to 192, windows at 0, 64
        {200, 4, 192, 0, 2},  // b = 8: crop to 192
        {255, 0, 255, 0, 3},  // b = 63: pad 1 (0 in front, 1 behind) to 256
        {100, 0, 100, 14, 1}, // smaller than the roi: pad 28 to 128
        {320, 0, 320, 0, 4},
        {383, 0, 383, 0, 5}, // pad 1 to 384
    };
    for (size_t i = 0; i < sizeof roi128 / sizeof *roi128; i++) {
        const axis_case *a = &roi128[i];
        for (int ax = 0; ax < 3; ax++) {
            int64_t n[3] = {128, 128, 128};
            n[ax] = a->n;
            tk_swin_grid g;
            CHECK_EQ_INT(tk_swin_grid_init(&g, n[0], n[1], n[2], 128, 0.5, &e), 0);
            CHECK_EQ_INT(g.stride, 64);
            CHECK_EQ_INT(g.crop[ax], a->crop);
            CHECK_EQ_INT(g.out[ax], a->out);
            CHECK_EQ_INT(g.pad0[ax], a->p0);
            CHECK_EQ_INT(g.out[ax] + g.pad0[ax] + g.pad1[ax], (a->out + 63) / 64 * 64 < 128 ? 128 : (a->out + 63) / 64 * 64);
            CHECK_EQ_INT(g.n[ax], a->nw);
            CHECK_EQ_INT(g.count, a->nw);
            for (int o = 0; o < 3; o++)
                if (o != ax) CHECK(g.crop[o] == 0 && g.out[o] == 128 && g.pad0[o] == 0 && g.pad1[o] == 0 && g.n[o] == 1);
        }
    }
    // overlap 0: stride 128. 300 = 2 128 + 44, 44 < 64: crop 22 in front, 22 behind, 2 windows.
    tk_swin_grid g;
    CHECK_EQ_INT(tk_swin_grid_init(&g, 300, 256, 128, 128, 0.0, &e), 0);
    CHECK(g.stride == 128 && g.crop[0] == 22 && g.out[0] == 256 && g.n[0] == 2 && g.n[1] == 2 && g.n[2] == 1);
    // roi 64, overlap 0.5: stride 32; 96 = 3 32: windows at 0, 32 (96 - 64 = 32)
    CHECK_EQ_INT(tk_swin_grid_init(&g, 96, 64, 70, 64, 0.5, &e), 0);
    CHECK(g.stride == 32 && g.n[0] == 2 && g.n[1] == 1 && g.out[2] == 64 && g.crop[2] == 3 && g.n[2] == 1);
    // roi 30, overlap 0.8: 30 * (1 - 0.8) = 5.999999999999998 -> stride 5, as Python's int(); 40: 3 windows
    CHECK_EQ_INT(tk_swin_grid_init(&g, 40, 30, 30, 30, 0.8, &e), 0);
    CHECK(g.stride == 5 && g.n[0] == 3 && g.n[1] == 1 && g.pad0[0] == 0 && g.crop[0] == 0);
}

// The order of the windows: raster, D outer; origins in padded coordinates.
TK_TEST(grid_window_order) {
    tk_err e = {0};
    tk_swin_grid g;
    // D 160: pad to 192, 2 windows; H 128: 1; W 255: pad to 256, 3 windows
    CHECK_EQ_INT(tk_swin_grid_init(&g, 160, 128, 255, 128, 0.5, &e), 0);
    CHECK_EQ_INT(g.count, 6);
    const int64_t want[6][3] = {{0, 0, 0}, {0, 0, 64}, {0, 0, 128}, {64, 0, 0}, {64, 0, 64}, {64, 0, 128}};
    for (int w = 0; w < 6; w++) {
        int64_t o[3];
        tk_swin_window(&g, w, o);
        CHECK(o[0] == want[w][0] && o[1] == want[w][1] && o[2] == want[w][2]);
    }
}

// Where the reference breaks, the grid refuses (TK_EDATA); arguments out of range are TK_EINTERNAL.
TK_TEST(grid_refusals) {
    tk_err e = {0};
    tk_swin_grid g;
    // 70: b = 6 < 32, crop to 64, then pad 64 to reach 128: the reference's output keeps 70 voxels,
    // its label 64 (Dice asserts on the shapes)
    CHECK_EQ_INT(tk_swin_grid_init(&g, 128, 70, 128, 128, 0.5, &e), TK_EDATA);
    CHECK(strstr(e.what, "axis 1 of 70 voxels") != NULL);
    // overlap 0.3: stride 89; 300: crop to 267, windows at 0 and 89 reach 217 < 267: 0 / 0
    e = (tk_err){0};
    CHECK_EQ_INT(tk_swin_grid_init(&g, 300, 128, 128, 128, 0.3, &e), TK_EDATA);
    CHECK(strstr(e.what, "uncovered") != NULL);
    CHECK_EQ_INT(tk_swin_grid_init(&g, 128, 128, 128, 128, 1.0, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_swin_grid_init(&g, 128, 128, 128, 128, -0.1, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_swin_grid_init(&g, 0, 128, 128, 128, 0.5, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_swin_grid_init(&g, 128, 128, 128, 0, 0.5, &e), TK_EINTERNAL);
}

// ---- the importance map ----

// cbrt(g(a) g(b) g(c)) / max is exp(-(da^2 + db^2 + dc^2) / (6 std^2)) / exp(-3 (1/2)^2 / (6 std^2)) for an even
// roi (the maximum sits at the 8 voxels half a voxel from the centre): the closed form within fp32 rounding; mirror
// symmetric bit for bit along each axis; exactly 1 at the centre voxels.
TK_TEST(gaussian_map) {
    const int rois[] = {128, 16, 7};
    for (int t = 0; t < 3; t++) {
        const int r = rois[t];
        float *m = malloc((size_t)r * r * r * sizeof(float));
        tk_swin_gaussian(r, m);
        const double sd = 0.125 * r, c = (r - 1) / 2.0, half = r % 2 ? 0 : 0.25;
        double err = 0, mx = 0;
        int asym = 0;
        for (int a = 0; a < r; a++)
            for (int b = 0; b < r; b++)
                for (int k = 0; k < r; k++) {
                    const float v = m[((size_t)a * r + b) * r + k];
                    const double d2 = (a - c) * (a - c) + (b - c) * (b - c) + (k - c) * (k - c);
                    err = fmax(err, fabs(v - exp(-(d2 - 3 * half) / (6 * sd * sd))) / v);
                    mx = fmax(mx, v);
                    asym += v != m[((size_t)(r - 1 - a) * r + b) * r + k] || v != m[((size_t)a * r + r - 1 - b) * r + k] ||
                            v != m[((size_t)a * r + b) * r + r - 1 - k];
                }
        CHECK(err < 2e-7);
        CHECK_EQ_INT(asym, 0);
        CHECK(mx == 1.0);
        CHECK(m[((size_t)(r / 2) * r + r / 2) * r + r / 2] == 1.0f);
        if (r == 128) { // the corner: exp(-63.5^2 / (2 16^2)) / exp(-0.5^2 / (2 16^2))
            const double want = exp(-(63.5 * 63.5 - 0.25) / 512.0);
            CHECK_NEAR(m[0], want, 1e-9);
            CHECK(m[0] > 3.7e-4 && m[0] < 3.9e-4);
        }
        free(m);
    }
}

// ---- accumulation and Dice on a known pattern ----

// roi 4, overlap 0.5 (stride 2) over 6 x 4 x 4: two windows along D at 0 and 2, overlapping on slices 2 and 3.
// Window 0 says class 1 everywhere (logits 0, 1, 0), window 1 class 2 (0, 0, 1). The 1-D Gaussian of roi 4 is
// low at the window's edges (0, 3) and high inside (1, 2): slice 2 sits inside window 0 and at window 1's edge ->
// class 1; slice 3 at window 0's edge and inside window 1 -> class 2. Prediction: slices 0-2 class 1, 3-5 class 2.
TK_TEST(accumulate_known_pattern) {
    tk_err e = {0};
    tk_ctx *c = tk_test_cpu();
    enum { R = 4, V = R * R * R, D = 6, HW = 16 };
    tk_swin_grid g;
    CHECK_EQ_INT(tk_swin_grid_init(&g, D, 4, 4, R, 0.5, &e), 0);
    CHECK(g.count == 2 && g.n[0] == 2 && g.pad0[0] == 0 && g.out[0] == D);
    float map[V], y[2 * V * 3], acc[D * HW * 3] = {0}, wsum[D * HW] = {0};
    tk_swin_gaussian(R, map);
    for (int b = 0; b < 2; b++)
        for (int l = 0; l < V; l++)
            for (int k = 0; k < 3; k++) y[(b * V + l) * 3 + k] = k == b + 1;
    CHECK_EQ_INT(tk_swin_accumulate(c, TK_F32, y, 3, &g, 0, 2, map, acc, wsum, &e), 0);
    // the sums: slice d of window 0 at local d, of window 1 at local d - 2
    int bad = 0;
    for (int d = 0; d < D; d++)
        for (int i = 0; i < HW; i++) {
            const float m0 = d < R ? map[d * HW + i] : 0, m1 = d >= 2 ? map[(d - 2) * HW + i] : 0;
            const float *a = &acc[(d * HW + i) * 3];
            bad += a[0] != 0 || a[1] != m0 || a[2] != m1 || wsum[d * HW + i] != m0 + m1;
        }
    CHECK_EQ_INT(bad, 0);
    // label: slices 0-1 kidney, slice 2 background, 3-5 tumor:
    // kidney I 32, T 32, P 48: (64 + 1e-6) / (80 + 1e-6) = 0.8; tumor I 48, T 48, P 48: 1
    uint8_t label[D * HW], pred[D * HW];
    for (int v = 0; v < D * HW; v++) label[v] = v / HW < 2 ? 1 : v / HW == 2 ? 0 : 2;
    float dice[2];
    CHECK_EQ_INT(tk_dice_score(c, &g, acc, wsum, label, pred, dice, NULL, &e), 0);
    bad = 0;
    for (int v = 0; v < D * HW; v++) bad += pred[v] != (v / HW <= 2 ? 1 : 2);
    CHECK_EQ_INT(bad, 0);
    CHECK(fabsf(dice[0] - 0.8f) <= 1e-7f && dice[1] == 1.0f);
    // in two batches of one window: the same sums
    float acc2[D * HW * 3] = {0}, wsum2[D * HW] = {0};
    CHECK_EQ_INT(tk_swin_accumulate(c, TK_F32, y, 3, &g, 0, 1, map, acc2, wsum2, &e), 0);
    CHECK_EQ_INT(tk_swin_accumulate(c, TK_F32, y + V * 3, 3, &g, 1, 1, map, acc2, wsum2, &e), 0);
    CHECK(memcmp(acc, acc2, sizeof acc) == 0 && memcmp(wsum, wsum2, sizeof wsum) == 0);
    // bf16 logits with ld 4 (a padded channel): the same values give the same sums
    uint16_t yb[2 * V * 4];
    for (int i = 0; i < 2 * V; i++)
        for (int k = 0; k < 4; k++) yb[i * 4 + k] = tk_f32_to_bf16(k < 3 ? y[i * 3 + k] : 99.0f);
    float acc3[D * HW * 3] = {0}, wsum3[D * HW] = {0};
    CHECK_EQ_INT(tk_swin_accumulate(c, TK_BF16, yb, 4, &g, 0, 2, map, acc3, wsum3, &e), 0);
    CHECK(memcmp(acc, acc3, sizeof acc) == 0 && memcmp(wsum, wsum3, sizeof wsum) == 0);
    // bad batches
    CHECK_EQ_INT(tk_swin_accumulate(c, TK_F32, y, 3, &g, 1, 2, map, acc, wsum, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_swin_accumulate(c, TK_F32, y, 2, &g, 0, 2, map, acc, wsum, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_swin_accumulate(c, TK_F16, y, 3, &g, 0, 2, map, acc, wsum, &e), TK_EINTERNAL);
}

// The Dice's conventions, from counts set up by hand: an empty label and an empty prediction give 1 (1e-6 / 1e-6);
// a class predicted where the label has none gives 1e-6 / (P + 1e-6); argmax ties go to the first class.
TK_TEST(dice_conventions) {
    tk_err e = {0};
    tk_ctx *c = tk_test_cpu();
    tk_swin_grid g;
    CHECK_EQ_INT(tk_swin_grid_init(&g, 2, 2, 2, 2, 0.5, &e), 0); // stride 1, one window: out 2 x 2 x 2
    CHECK_EQ_INT(g.count, 1);
    float acc[8 * 3], wsum[8], dice[2];
    uint8_t label[8] = {0}, pred[8];
    for (int v = 0; v < 8; v++) wsum[v] = 0.5f, acc[v * 3] = 1, acc[v * 3 + 1] = 0, acc[v * 3 + 2] = 0;
    CHECK_EQ_INT(tk_dice_score(c, &g, acc, wsum, label, pred, dice, NULL, &e), 0);
    CHECK(dice[0] == 1.0f && dice[1] == 1.0f);
    // voxel 3: a tie of classes 0 and 1 -> 0; voxel 5: a tie of 1 and 2 -> 1; voxel 6: class 2
    acc[3 * 3 + 1] = 1, acc[5 * 3] = -1, acc[5 * 3 + 1] = 2, acc[5 * 3 + 2] = 2, acc[6 * 3 + 2] = 3;
    label[1] = 2, label[2] = 2, label[6] = 2;
    CHECK_EQ_INT(tk_dice_score(c, &g, acc, wsum, label, pred, dice, NULL, &e), 0);
    CHECK(pred[3] == 0 && pred[5] == 1 && pred[6] == 2 && pred[0] == 0);
    // kidney: T 0, P 1 -> 1e-6 / (1 + 1e-6); tumor: I 1, T 3, P 1 -> (2 + 1e-6) / (4 + 1e-6)
    CHECK_NEAR(dice[0], 1e-6, 1e-12);
    CHECK_NEAR(dice[1], (2 + 1e-6) / (4 + 1e-6), 6e-8);
    // a label outside 0..2
    label[7] = 3;
    CHECK_EQ_INT(tk_dice_score(c, &g, acc, wsum, label, pred, dice, NULL, &e), TK_EINTERNAL);
    CHECK(strstr(e.what, "label 3 at voxel (1, 1, 1)") != NULL);
}

// A crop and a pad: the gather reads the image at the crop or gives the padding value; the Dice reads the label
// at the crop. roi 12, overlap 0.5 (stride 6): D 14: b = 2 < 3, crop 1 in front, 1 behind, out 12; H 6: b 0, pad 6
// (3 + 3) to 12; W 12: as is. One window.
TK_TEST(gather_crop_and_pad) {
    tk_err e = {0};
    tk_ctx *c = tk_test_cpu();
    enum { D = 14, H = 6, W = 12, R = 12 };
    tk_swin_grid g;
    CHECK_EQ_INT(tk_swin_grid_init(&g, D, H, W, R, 0.5, &e), 0);
    CHECK(g.count == 1 && g.crop[0] == 1 && g.out[0] == 12 && g.pad0[1] == 3 && g.pad1[1] == 3 && g.out[1] == 6);
    float img[D * H * W], x[R * R * R * 2];
    for (int i = 0; i < D * H * W; i++) img[i] = (float)i;
    CHECK_EQ_INT(tk_swin_gather(c, TK_F32, img, &g, 0, 1, TK_SWIN_PAD, 2, x, &e), 0);
    int bad = 0;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < R; j++)
            for (int k = 0; k < R; k++) {
                const float *v = &x[((i * R + j) * R + k) * 2];
                const float want = j < 3 || j >= 9 ? -2.2f : (float)(((i + 1) * H + j - 3) * W + k);
                bad += v[0] != want || v[1] != 0;
            }
    CHECK_EQ_INT(bad, 0);
    // the prediction: class 1 where the window's input is a voxel of the image with W index 0, else 0; the label
    // marks W index 0 kidney on every row of the volume, also on the cropped slices 0 and 13 (not counted)
    float map[R * R * R], y[R * R * R * 3], acc[12 * 6 * 12 * 3] = {0}, wsum[12 * 6 * 12] = {0}, dice[2];
    tk_swin_gaussian(R, map);
    for (int l = 0; l < R * R * R; l++) {
        const int j = l / R % R, k = l % R;
        y[l * 3] = 0.5f, y[l * 3 + 1] = j >= 3 && j < 9 && k == 0, y[l * 3 + 2] = 0;
    }
    CHECK_EQ_INT(tk_swin_accumulate(c, TK_F32, y, 3, &g, 0, 1, map, acc, wsum, &e), 0);
    uint8_t label[D * H * W], pred[12 * 6 * 12];
    for (int i = 0; i < D * H * W; i++) label[i] = i % W == 0;
    CHECK_EQ_INT(tk_dice_score(c, &g, acc, wsum, label, pred, dice, NULL, &e), 0);
    CHECK(dice[0] == 1.0f && dice[1] == 1.0f); // I = T = P = 72
    label[0] = 2, label[D * H * W - 1] = 2; // on the cropped slices: still not counted
    label[H * W + 1] = 1;                   // slice 1 (output slice 0), W 1: kidney not predicted
    CHECK_EQ_INT(tk_dice_score(c, &g, acc, wsum, label, pred, dice, NULL, &e), 0);
    CHECK(fabsf(dice[0] - 144.0f / 145.0f) <= 6e-8f && dice[1] == 1.0f);
}

// The mean over cases as the reference's ranks take it: 5 cases, kidney 1, 1, 1, 0, 0, tumor 0.5 each. One rank:
// 3 / 5; two ranks (np.array_split: 3, 2): (1 + 0) / 2; three (2, 2, 1): (1 + 0.5 + 0) / 3; five: 3 / 5.
TK_TEST(dice_mean_over_ranks) {
    tk_err e = {0};
    const float dice[10] = {1, 0.5f, 1, 0.5f, 1, 0.5f, 0, 0.5f, 0, 0.5f};
    const float want[6] = {0.6f, 0.5f, 0.5f, 0.6f, 0, 0}, *w = want;
    const int ranks[4] = {1, 2, 3, 5};
    for (int i = 0; i < 4; i++) {
        float out[3];
        CHECK_EQ_INT(tk_dice_mean(dice, 5, ranks[i], out, &e), 0);
        const float k = i == 0 || i == 3 ? w[0] : i == 1 ? w[1] : w[2];
        CHECK_NEAR(out[0], k, 1e-7);
        CHECK(out[1] == 0.5f);
        CHECK_NEAR(out[2], (k + 0.5) / 2, 1e-7);
    }
    float out[3];
    CHECK_EQ_INT(tk_dice_mean(dice, 5, 6, out, &e), TK_EDATA);
    CHECK_EQ_INT(tk_dice_mean(dice, 0, 1, out, &e), TK_EDATA);
}

// ---- the oracle driver (see the top of the file) ----

static int read_all(const char *dir, const char *name, void *p, size_t bytes, tk_err *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return tk_err_set(e, TK_EIO, "%s: cannot open", path);
    const size_t got = fread(p, 1, bytes, f);
    const int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != bytes || extra) return tk_err_set(e, TK_EDATA, "%s: %zu bytes, expected %zu", path, got, bytes);
    return 0;
}
static int write_all(const char *dir, const char *name, const void *p, size_t bytes, tk_err *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return tk_err_set(e, TK_EIO, "%s: cannot create", path);
    const int bad = fwrite(p, 1, bytes, f) != bytes;
    if (fclose(f) || bad) return tk_err_set(e, TK_EIO, "%s: write failed", path);
    return 0;
}

static int drive(const char *dir, tk_err *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/params.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) return tk_err_set(e, TK_EIO, "%s: cannot open", path);
    long long D, H, W;
    int roi, B;
    double overlap;
    const int n = fscanf(f, "%lld %lld %lld %d %lf %d", &D, &H, &W, &roi, &overlap, &B);
    fclose(f);
    if (n != 6 || D < 1 || H < 1 || W < 1 || D * H * W > 100000000 || roi < 1 || roi > 256 || B < 1)
        return tk_err_set(e, TK_EDATA, "%s: not \"D H W roi overlap B\"", path);
    tk_swin_grid g;
    TRY(tk_swin_grid_init(&g, D, H, W, roi, overlap, e));
    const size_t nv = (size_t)(D * H * W), rv = (size_t)roi * roi * roi, no = (size_t)tk_swin_out_numel(&g);
    float *img = malloc(nv * 4), *net = malloc((6 + rv * 3) * 4), *map = malloc(rv * 4), *x = malloc(B * rv * 4),
          *y = malloc(B * rv * 3 * 4), *acc = calloc(no * 3, 4), *wsum = calloc(no, 4);
    uint8_t *label = malloc(nv), *pred = malloc(no);
    int rc = !img || !net || !map || !x || !y || !acc || !wsum || !label || !pred ? tk_err_set(e, TK_EIO, "out of memory")
                                                                                  : 0;
    if (!rc) rc = read_all(dir, "image.f32", img, nv * 4, e);
    if (!rc) rc = read_all(dir, "label.u8", label, nv, e);
    if (!rc) rc = read_all(dir, "net.f32", net, (6 + rv * 3) * 4, e);
    if (!rc) tk_swin_gaussian(roi, map);
    tk_ctx *c = tk_test_cpu();
    for (int64_t w0 = 0; !rc && w0 < g.count; w0 += B) {
        const int nb = g.count - w0 < B ? (int)(g.count - w0) : B;
        rc = tk_swin_gather(c, TK_F32, img, &g, w0, nb, TK_SWIN_PAD, 1, x, e);
        for (size_t i = 0; !rc && i < nb * rv; i++)
            for (int k = 0; k < 3; k++) {
                float v = net[k] * x[i];
                v += net[3 + k];
                y[i * 3 + k] = v + net[6 + (i % rv) * 3 + k];
            }
        if (!rc) rc = tk_swin_accumulate(c, TK_F32, y, 3, &g, w0, nb, map, acc, wsum, e);
    }
    float dice[2];
    if (!rc) rc = tk_dice_score(c, &g, acc, wsum, label, pred, dice, NULL, e);
    for (size_t v = 0; !rc && v < no; v++)
        for (int k = 0; k < 3; k++) acc[v * 3 + k] /= wsum[v];
    if (!rc) rc = write_all(dir, "pred.u8", pred, no, e);
    if (!rc) rc = write_all(dir, "result.f32", acc, no * 3 * 4, e);
    if (!rc) rc = write_all(dir, "map.f32", map, rv * 4, e);
    if (!rc) {
        printf("grid %d %d %d crop %lld %lld %lld out %lld %lld %lld pad %lld %lld %lld\n", g.n[0], g.n[1], g.n[2],
               (long long)g.crop[0], (long long)g.crop[1], (long long)g.crop[2], (long long)g.out[0],
               (long long)g.out[1], (long long)g.out[2], (long long)g.pad0[0], (long long)g.pad0[1],
               (long long)g.pad0[2]);
        printf("dice %.9g %.9g\n", dice[0], dice[1]);
        if (fflush(stdout)) rc = tk_err_set(e, TK_EIO, "stdout: write failed");
    }
    free(img), free(net), free(map), free(x), free(y), free(acc), free(wsum), free(label), free(pred);
    return rc;
}

// --mean RANKS: "kidney tumor" lines on stdin -> "mean KIDNEY TUMOR MEAN_DICE".
static int drive_mean(const char *ranks, tk_err *e) {
    char *end;
    const long r = strtol(ranks, &end, 10);
    if (*end || r < 1 || r > 4096) return tk_err_set(e, TK_EUSAGE, "--mean: ranks \"%s\" not in 1..4096", ranks);
    float d[2 * 4096], out[3];
    int n = 0;
    while (n < 4096 && scanf("%f %f", &d[2 * n], &d[2 * n + 1]) == 2) n++;
    TRY(tk_dice_mean(d, n, (int)r, out, e));
    printf("mean %.9g %.9g %.9g\n", out[0], out[1], out[2]);
    return fflush(stdout) ? tk_err_set(e, TK_EIO, "stdout: write failed") : 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && (strcmp(argv[1], "--drive") == 0 || strcmp(argv[1], "--mean") == 0)) {
        tk_err e = {0};
        const int rc = argv[1][2] == 'd' ? drive(argv[2], &e) : drive_mean(argv[2], &e);
        if (rc) {
            char buf[1200];
            tk_err_format(&e, buf, sizeof buf);
            fprintf(stderr, "test_unet_eval: error: %s\n", buf);
        }
        return rc;
    }
    return tk_test_main(argc, argv);
}
