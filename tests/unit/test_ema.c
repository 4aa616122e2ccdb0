// The weights' moving average (kernels/ema_ref.c, kernels/ema.h) on values worked out by hand.
#include "ema.h"
#include "tk_test.h"

TK_TEST(ema_update_hand_values) {
    tk_err e = {0};
    // 0.75 and 0.25 are exact: 0.75 * 8 + 0.25 * 4 = 7, 0.75 * -8 + 0.25 * 4 = -5
    float a[2] = {8, -8}, w[2] = {4, 4};
    CHECK_EQ_INT(tk_ema_update_ref(a, w, 2, 0.75, &e), 0);
    CHECK(a[0] == 7 && a[1] == -5);
    // The reference's factors at 0.999: (float)0.999 and (float)(1 - 0.999) = 0.001f (not
    // 1 - 0.999f, which is 0.00099998713f)
    float b[2] = {0, 1}, v[2] = {1, 0};
    CHECK_EQ_INT(tk_ema_update_ref(b, v, 2, 0.999, &e), 0);
    CHECK(b[0] == 0.001f && b[1] == 0.999f);
    // decay 0: the weights; 1: unchanged
    float c[1] = {3}, u[1] = {5};
    CHECK_EQ_INT(tk_ema_update_ref(c, u, 1, 1.0, &e), 0);
    CHECK(c[0] == 3);
    CHECK_EQ_INT(tk_ema_update_ref(c, u, 1, 0.0, &e), 0);
    CHECK(c[0] == 5);
}

TK_TEST(ema_swap_there_and_back) {
    tk_err e = {0};
    float a[3] = {1, 2, 3}, w[3] = {4, 5, 6};
    CHECK_EQ_INT(tk_ema_swap_ref(a, w, 3, &e), 0);
    CHECK(a[0] == 4 && a[2] == 6 && w[0] == 1 && w[2] == 3);
    CHECK_EQ_INT(tk_ema_swap_ref(a, w, 3, &e), 0);
    CHECK(a[0] == 1 && a[1] == 2 && w[1] == 5);
}
