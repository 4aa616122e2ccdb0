// A minimal TAP unit-test harness: TK_TEST(name) { ... CHECK(cond) ... } and a main that runs
// every test in the file (or those named on the command line) and prints "ok N - name" /
// "not ok N - name" lines, which tests/run counts.
#ifndef TK_TEST_H
#define TK_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*tk_test_fn)(int *failed);
typedef struct { const char *name; tk_test_fn fn; } tk_test_case;
#define TK_TEST_MAX 512
static tk_test_case tk_tests_[TK_TEST_MAX];
static int tk_ntests_;

#define TK_TEST(name)                                                                              \
    static void name(int *tk_failed_);                                                             \
    __attribute__((constructor)) static void name##_register(void) {                               \
        if (tk_ntests_ < TK_TEST_MAX) tk_tests_[tk_ntests_++] = (tk_test_case){#name, name};       \
    }                                                                                              \
    static void name(int *tk_failed_)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("#   %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                   \
            *tk_failed_ = 1;                                                                       \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long tk_a_ = (long long)(a), tk_b_ = (long long)(b);                                  \
        if (tk_a_ != tk_b_) {                                                                      \
            printf("#   %s:%d: %s == %s failed: %lld vs %lld\n", __FILE__, __LINE__, #a, #b,      \
                   tk_a_, tk_b_);                                                                  \
            *tk_failed_ = 1;                                                                       \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *tk_a_ = (a), *tk_b_ = (b);                                                     \
        if (!tk_a_ || !tk_b_ || strcmp(tk_a_, tk_b_) != 0) {                                       \
            printf("#   %s:%d: strings differ:\n#     got:  %s\n#     want: %s\n", __FILE__,       \
                   __LINE__, tk_a_ ? tk_a_ : "(null)", tk_b_ ? tk_b_ : "(null)");                  \
            *tk_failed_ = 1;                                                                       \
        }                                                                                          \
    } while (0)

// |a-b| <= tol * max(1, |b|)
#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double tk_a_ = (double)(a), tk_b_ = (double)(b);                                           \
        double tk_s_ = fabs(tk_b_) > 1 ? fabs(tk_b_) : 1;                                          \
        if (!(fabs(tk_a_ - tk_b_) <= (tol) * tk_s_)) {                                             \
            printf("#   %s:%d: %s ~= %s failed: %.17g vs %.17g\n", __FILE__, __LINE__, #a, #b,    \
                   tk_a_, tk_b_);                                                                  \
            *tk_failed_ = 1;                                                                       \
        }                                                                                          \
    } while (0)

// Files of a test binary in one temporary directory, /tmp/PREFIX.XXXXXX, made by the first call
// (a flag says so: the random name may itself end in 'X'); name's path in one of 8 buffers, so 8
// paths live at a time. tk_test_rmdir removes the directory (a last test calls it).
static inline char *tk_test_dir_(void) {
    static char d[128];
    return d;
}
static inline const char *tk_test_path(const char *prefix, const char *name) {
    static char buf[8][512];
    static int k, made;
    char *d = tk_test_dir_();
    if (!made) {
        snprintf(d, 128, "/tmp/%s.XXXXXX", prefix);
        if (!mkdtemp(d)) {
            perror(d);
            abort();
        }
        made = 1;
    }
    char *b = buf[k++ % 8];
    snprintf(b, 512, "%s/%s", d, name);
    return b;
}
static inline int tk_test_rmdir(void) {
    char cmd[160];
    if (!tk_test_dir_()[0]) return 0;
    snprintf(cmd, sizeof cmd, "rm -rf %s", tk_test_dir_());
    return system(cmd);
}

int main(int argc, char **argv) {
    int fails = 0, n = 0;
    setvbuf(stdout, NULL, _IOLBF, 0); // a test that aborts keeps the lines before it
    printf("1..%d\n", tk_ntests_);
    for (int i = 0; i < tk_ntests_; i++) {
        int run = argc < 2;
        for (int a = 1; a < argc; a++) run |= strcmp(argv[a], tk_tests_[i].name) == 0;
        if (!run) {
            printf("ok %d - %s # skip not selected\n", ++n, tk_tests_[i].name);
            continue;
        }
        int failed = 0;
        tk_tests_[i].fn(&failed);
        printf("%s %d - %s\n", failed ? "not ok" : "ok", ++n, tk_tests_[i].name);
        fflush(stdout);
        fails += failed;
    }
    return fails ? 1 : 0;
}

#endif
