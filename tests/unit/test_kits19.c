// KiTS19 preprocessing on small exact cases. Expected values are worked out by hand from the
// definitions (ramps, indices) or were printed by the reference's own libraries (torch 2.15's
// interpolate on an AVX2 CPU, numpy 2.4's clip/divide and np.save), as noted at each.
#include <stdint.h>

#include "kits19/kits19.h"
#include "kits19/md5.h"
#include "tk_test.h"

static float *ramp(const int64_t s[3], int cord) { // value 2d + 4h + 8w; cord: 1 C order, 0 NIfTI order
    float *x = malloc((size_t)(s[0] * s[1] * s[2]) * sizeof(float));
    for (int64_t d = 0; d < s[0]; d++)
        for (int64_t h = 0; h < s[1]; h++)
            for (int64_t w = 0; w < s[2]; w++)
                x[cord ? (d * s[1] + h) * s[2] + w : d + s[0] * (h + s[1] * w)] = (float)(2 * d + 4 * h + 8 * w);
    return x;
}

TK_TEST(resample_same_shape_is_identity_after_nifti_to_c_order) {
    int64_t s[3] = {3, 4, 5};
    float *x = ramp(s, 0); // NIfTI order: D fastest
    x[1] = -0.1f;          // (d, h, w) = (1, 0, 0): not a ramp value, must pass unchanged
    float c[60], out[60];
    kits19_to_c_order(x, s, c, sizeof(float));
    tk_err e;
    CHECK_EQ_INT(kits19_resample_linear(c, s, out, s, &e), 0);
    for (int d = 0; d < 3; d++)
        for (int h = 0; h < 4; h++)
            for (int w = 0; w < 5; w++) {
                float want = d == 1 && h == 0 && w == 0 ? -0.1f : (float)(2 * d + 4 * h + 8 * w);
                CHECK(out[(d * 4 + h) * 5 + w] == want);
            }
    free(x);
}

TK_TEST(resample_reproduces_linear_ramps_exactly) {
    // 5 -> 9 per axis: source position k * 4/8 = k/2, exact in float; a ramp interpolates to
    // itself: 2(d/2) + 4(h/2) + 8(w/2) = d + 2h + 4w
    int64_t s[3] = {5, 5, 5}, o[3] = {9, 9, 9};
    float *x = ramp(s, 1);
    float *out = malloc(9 * 9 * 9 * sizeof(float));
    tk_err e;
    CHECK_EQ_INT(kits19_resample_linear(x, s, out, o, &e), 0);
    int bad = 0;
    for (int d = 0; d < 9; d++)
        for (int h = 0; h < 9; h++)
            for (int w = 0; w < 9; w++) bad += out[(d * 9 + h) * 9 + w] != (float)(d + 2 * h + 4 * w);
    CHECK_EQ_INT(bad, 0);
    // 9 -> 5 on D only (scale 8/4 = 2: every other slice, weight 0 on the next), H and W kept
    int64_t s2[3] = {9, 2, 3}, o2[3] = {5, 2, 3};
    float *y = ramp(s2, 1);
    CHECK_EQ_INT(kits19_resample_linear(y, s2, out, o2, &e), 0);
    bad = 0;
    for (int d = 0; d < 5; d++)
        for (int h = 0; h < 2; h++)
            for (int w = 0; w < 3; w++) bad += out[(d * 2 + h) * 3 + w] != (float)(4 * d + 4 * h + 8 * w);
    CHECK_EQ_INT(bad, 0);
    free(x);
    free(y);
    free(out);
}

TK_TEST(resample_rounds_as_torch_on_avx2) {
    // torch.nn.functional.interpolate(x (1,1,1,1,5), size=[1,1,7], mode='trilinear',
    // align_corners=True) with torch 2.15 (CPU capability AVX2). Output 5 is where rounding both
    // products (torch under ATEN_CPU_CAPABILITY=default) gives another float.
    const float x[5] = {0.1f, -7.3f, 100.7f, 3.3f, -0.9f};
    const float want[7] = {0x1.99999ap-4f, -0x1.355556p+2f, 0x1.cb3336p+4f, 0x1.92ccccp+6f,
                           0x1.1e221ep+5f, 0x1.e6665ap+0f, -0x1.ccccccp-1f};
    int64_t s[3] = {1, 1, 5}, o[3] = {1, 1, 7};
    float out[7];
    tk_err e;
    CHECK_EQ_INT(kits19_resample_linear(x, s, out, o, &e), 0);
    for (int i = 0; i < 7; i++) CHECK(out[i] == want[i]);
    // the same along H and along D (torch printed the same values for those shapes)
    int64_t sh[3] = {1, 5, 1}, oh[3] = {1, 7, 1}, sd[3] = {5, 1, 1}, od[3] = {7, 1, 1};
    CHECK_EQ_INT(kits19_resample_linear(x, sh, out, oh, &e), 0);
    for (int i = 0; i < 7; i++) CHECK(out[i] == want[i]);
    CHECK_EQ_INT(kits19_resample_linear(x, sd, out, od, &e), 0);
    for (int i = 0; i < 7; i++) CHECK(out[i] == want[i]);
}

TK_TEST(resample_nearest_picks_torch_indices) {
    // torch's 'nearest' printed [0 0 0 1 1 2 2] (3 -> 7), [0 2] (4 -> 2), [0 1 2 4 5 7 8] (10 -> 7)
    const uint8_t v[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    uint8_t out[8];
    tk_err e;
    int64_t a[3] = {3, 1, 1}, oa[3] = {7, 1, 1};
    CHECK_EQ_INT(kits19_resample_nearest(v, a, out, oa, &e), 0);
    CHECK(memcmp(out, "\0\0\0\1\1\2\2", 7) == 0);
    int64_t b[3] = {1, 1, 4}, ob[3] = {1, 1, 2};
    CHECK_EQ_INT(kits19_resample_nearest(v, b, out, ob, &e), 0);
    CHECK(out[0] == 0 && out[1] == 2);
    int64_t c[3] = {1, 10, 1}, oc[3] = {1, 7, 1};
    CHECK_EQ_INT(kits19_resample_nearest(v, c, out, oc, &e), 0);
    CHECK(memcmp(out, "\0\1\2\4\5\7\10", 7) == 0);
}

TK_TEST(new_shape_truncates_like_numpy) {
    tk_err e;
    int64_t o[3];
    // float32 pixdims as nibabel gives them; 3/1.6*50 = 93.75, 0.78125/1.2*512 = 333.33
    double sp[3] = {3.0, 0.78125, 0.78125};
    int64_t s[3] = {50, 512, 512};
    CHECK_EQ_INT(kits19_new_shape(sp, s, o, &e), 0);
    CHECK(o[0] == 93 && o[1] == 333 && o[2] == 333);
    // the float32 nearest 1.6 and 1.2 are a hair above: the shape stays
    double sp2[3] = {(double)1.6f, (double)1.2f, (double)1.2f};
    int64_t s2[3] = {100, 7, 300};
    CHECK_EQ_INT(kits19_new_shape(sp2, s2, o, &e), 0);
    CHECK(o[0] == 100 && o[1] == 7 && o[2] == 300);
    double bad[3] = {0.0, 1, 1};
    CHECK_EQ_INT(kits19_new_shape(bad, s, o, &e), TK_EDATA);
    double tiny[3] = {0.01, 1, 1}; // 50 * 0.01 / 1.6 < 1 voxel
    CHECK_EQ_INT(kits19_new_shape(tiny, s, o, &e), TK_EDATA);
}

TK_TEST(normalize_matches_numpy_float32) {
    // numpy: (np.clip(v, -79.0, 304.0) - 101.0) / 76.9 on float32 v
    float v[8] = {-1000, -79, 0, 101, 177.9f, 304, 5000, NAN};
    const float want[7] = {-0x1.2b9c2p+1f, -0x1.2b9c2p+1f, -0x1.503a96p+0f, 0.0f, 0x1.fffffcp-1f, 0x1.51e4b4p+1f,
                           0x1.51e4b4p+1f};
    kits19_normalize(v, 8);
    for (int i = 0; i < 7; i++) CHECK(v[i] == want[i]);
    CHECK(isnan(v[7]));
}

TK_TEST(pad_edge_to_128) {
    int64_t s[3] = {2, 3, 130}, p[3], b[3];
    kits19_pad_shape(s, p, b);
    CHECK(p[0] == 128 && p[1] == 128 && p[2] == 130);
    CHECK(b[0] == 63 && b[1] == 62 && b[2] == 0); // 126 -> 63 + 63; 125 -> 62 + 63 (odd one after)
    uint8_t in[2 * 3 * 130];
    for (int i = 0; i < 2 * 3 * 130; i++) in[i] = (uint8_t)(i % 251);
    uint8_t *out = malloc(128 * 128 * 130);
    kits19_pad_edge(in, s, out, p, b, 1);
    // (d, h, w) of the output -> the input voxel (clamp(d - 63), clamp(h - 62), w)
    CHECK(out[0] == in[0]);
    CHECK(out[(size_t)(62 * 128 + 61) * 130 + 5] == in[5]);            // before both pads
    CHECK(out[(size_t)(63 * 128 + 62) * 130 + 7] == in[7]);            // first real voxel row
    CHECK(out[(size_t)(64 * 128 + 64) * 130 + 9] == in[(1 * 3 + 2) * 130 + 9]); // last real (1, 2)
    CHECK(out[(size_t)(127 * 128 + 127) * 130 + 129] == in[(1 * 3 + 2) * 130 + 129]);
    CHECK(out[(size_t)(127 * 128 + 63) * 130 + 0] == in[(1 * 3 + 1) * 130]);
    free(out);
    // float voxels, a W pad: shape (128, 128, 1) -> 63 copies before, 64 after
    int64_t s2[3] = {128, 128, 1}, p2[3], b2[3];
    kits19_pad_shape(s2, p2, b2);
    CHECK(p2[2] == 128 && b2[2] == 63);
    float *f = malloc(128 * 128 * sizeof(float)), *g = malloc(128 * 128 * 128 * sizeof(float));
    for (int i = 0; i < 128 * 128; i++) f[i] = (float)i + 0.5f;
    kits19_pad_edge(f, s2, g, p2, b2, sizeof(float));
    int bad = 0;
    for (int i = 0; i < 128 * 128; i++)
        for (int w = 0; w < 128; w++) bad += g[(size_t)i * 128 + w] != (float)i + 0.5f;
    CHECK_EQ_INT(bad, 0);
    free(f);
    free(g);
}

TK_TEST(npy_header_is_numpys) {
    // np.save(f, np.zeros((1, 128, 128, 128), np.float32)) and ((1, 300, 1000, 128), np.uint8):
    // 128 bytes, header length 118 ('v'), the dict, spaces, '\n'
    char h[256];
    int64_t s[3] = {128, 128, 128};
    CHECK_EQ_INT(kits19_npy_header(h, sizeof h, "<f4", s), 128);
    const char *d = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 128, 128, 128), }";
    CHECK(memcmp(h, "\x93NUMPY\x01\x00v\x00", 10) == 0);
    CHECK(memcmp(h + 10, d, strlen(d)) == 0);
    int spaces = 0;
    for (size_t i = 10 + strlen(d); i < 127; i++) spaces += h[i] == ' ';
    CHECK_EQ_INT(spaces, 127 - 10 - (int)strlen(d));
    CHECK(h[127] == '\n');
    int64_t s2[3] = {300, 1000, 128};
    CHECK_EQ_INT(kits19_npy_header(h, sizeof h, "|u1", s2), 128);
    CHECK(memcmp(h + 10, "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 300, 1000, 128), }  ", 74) == 0);
    CHECK_EQ_INT(kits19_npy_header(h, 100, "|u1", s2), 0); // too small a buffer
}

static void md5_of(const char *s, size_t chunk, char out[33]) {
    kits19_md5 m;
    kits19_md5_init(&m);
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i += chunk) kits19_md5_update(&m, s + i, n - i < chunk ? n - i : chunk);
    kits19_md5_hex(&m, out);
}

TK_TEST(md5_rfc1321_vectors) {
    char h[33];
    md5_of("", 1, h);
    CHECK_STR(h, "d41d8cd98f00b204e9800998ecf8427e");
    md5_of("abc", 1, h);
    CHECK_STR(h, "900150983cd24fb0d6963f7d28e17f72");
    md5_of("message digest", 5, h);
    CHECK_STR(h, "f96b697d7cb7938d525a2f31aaf161d0");
    const char *num = "12345678901234567890123456789012345678901234567890123456789012345678901234567890";
    for (size_t c = 1; c <= 80; c += 13) {
        md5_of(num, c, h);
        CHECK_STR(h, "57edf4a22be3c955ac49da2e2107b67a");
    }
}

TK_TEST(case_key_and_builtin_split) {
    CHECK_STR(kits19_case_key("case_00123"), "00123");
    CHECK_EQ_INT(KITS19_EVAL_CASES, 42);
    CHECK_STR(kits19_eval_cases[0], "00000");
    CHECK_STR(kits19_eval_cases[41], "00207");
}
