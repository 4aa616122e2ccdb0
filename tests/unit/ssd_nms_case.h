// What the SSD post-processing tests share (tests/unit/test_ssd_nms.c, tests/gpu/test_ssd_nms.c):
// the 8732 default boxes of SSD300 (the reference's dboxes300_coco(): utils.py DefaultBoxes with
// fig_size 300, feature maps 38 19 10 5 3 1, steps 8 16 32 64 100 300, scales 21 45 99 153 207
// 261 315, aspect ratios {2} {2,3} {2,3} {2,3} {2} {2}; per map the sizes (sk1, sk1), (sk3, sk3),
// then (sk1 sqrt a, sk1 / sqrt a) and its transpose per ratio, each over all positions row by row;
// computed in fp64, stored as fp32 and clamped to [0, 1]) in (cx, cy, w, h). A local generator:
// the op takes the boxes as an input (kernels/ssd_box makes them for training).
#ifndef TK_TEST_SSD_NMS_CASE_H
#define TK_TEST_SSD_NMS_CASE_H

#include <math.h>

#define SSD300_ANCHORS 8732
#define SSD300_CLASSES 81

static inline float ssd_case_clamp01(double v) {
    float f = (float)v;
    return f < 0 ? 0.0f : f > 1 ? 1.0f : f;
}

// d (8732, 4); returns the number of boxes written.
static inline int ssd_case_dboxes300(float *d) {
    static const int feat[6] = {38, 19, 10, 5, 3, 1}, steps[6] = {8, 16, 32, 64, 100, 300};
    static const int scales[7] = {21, 45, 99, 153, 207, 261, 315}, nratio[6] = {1, 2, 2, 2, 1, 1};
    int n = 0;
    for (int m = 0; m < 6; m++) {
        const double fk = 300.0 / steps[m], sk1 = scales[m] / 300.0, sk2 = scales[m + 1] / 300.0;
        const double sk3 = sqrt(sk1 * sk2);
        double sz[6][2] = {{sk1, sk1}, {sk3, sk3}};
        int ns = 2;
        for (int r = 0; r < nratio[m]; r++) {
            const double a = sqrt((double)(r + 2));
            sz[ns][0] = sk1 * a, sz[ns][1] = sk1 / a, ns++;
            sz[ns][0] = sk1 / a, sz[ns][1] = sk1 * a, ns++;
        }
        for (int s = 0; s < ns; s++)
            for (int i = 0; i < feat[m]; i++)
                for (int j = 0; j < feat[m]; j++, n++) {
                    d[n * 4] = ssd_case_clamp01((j + 0.5) / fk);
                    d[n * 4 + 1] = ssd_case_clamp01((i + 0.5) / fk);
                    d[n * 4 + 2] = ssd_case_clamp01(sz[s][0]);
                    d[n * 4 + 3] = ssd_case_clamp01(sz[s][1]);
                }
    }
    return n;
}

#endif
