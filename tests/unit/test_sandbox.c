// core/sandbox.h: a child that answers, crashes, spins, allocates without bound, blocks, exits,
// or looks for the parent's files; and the limits' rule with its environment overrides.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/progress.h"
#include "core/sandbox.h"
#include "tk_test.h"

static const tk_sandbox_limits quick = {.cpu_s = 2, .mem_bytes = 64 << 20, .wall_s = 20};

// Doubles each 32-bit number the parent sends.
static int doubler(void *arg, int fd) {
    (void)arg;
    uint32_t v;
    while (tk_sandbox_get(fd, &v, sizeof v) == 0) {
        v *= 2;
        if (tk_sandbox_put(fd, &v, sizeof v)) return 1;
    }
    return 0;
}

static int crasher(void *arg, int fd) {
    (void)arg, (void)fd;
    raise(SIGSEGV);
    return 0;
}

static int spinner(void *arg, int fd) {
    (void)arg, (void)fd;
    volatile uint64_t x = 0;
    for (;;) x++;
    return 0;
}

// Allocates and touches 1 GiB in 1 MiB pieces; answers 'n' when an allocation fails.
static int eater(void *arg, int fd) {
    (void)arg;
    for (int i = 0; i < 1024; i++) {
        char *p = malloc(1 << 20);
        if (!p) return tk_sandbox_put(fd, "n", 1) ? 1 : 0;
        memset(p, 1, 1 << 20);
    }
    tk_sandbox_put(fd, "y", 1);
    return 0;
}

static int sleeper(void *arg, int fd) {
    (void)arg, (void)fd;
    sleep(30);
    return 0;
}

static int exits(void *arg, int fd) {
    (void)fd;
    return *(int *)arg;
}

// Answers 1 when the parent's file descriptor *arg is closed here and stdout is not the parent's.
static int fd_checker(void *arg, int fd) {
    char ok = fcntl(*(int *)arg, F_GETFD) == -1 && fd == 3 && fcntl(4, F_GETFD) == -1;
    return tk_sandbox_put(fd, &ok, 1) ? 1 : 0;
}

// Runs fn and returns the error of the first 1-byte answer (or 0 with *got set).
static int answer(tk_sandbox_fn fn, void *arg, const tk_sandbox_limits *lim, char *got, tk_err *e) {
    tk_sandbox *sb;
    int rc = tk_sandbox_start(&sb, lim, fn, arg, e);
    if (!rc) rc = tk_sandbox_recv(sb, got, 1, e);
    tk_sandbox_stop(sb);
    return rc;
}

TK_TEST(sandbox_child_answers_requests) {
    tk_sandbox *sb;
    tk_err e;
    CHECK_EQ_INT(tk_sandbox_start(&sb, &quick, doubler, NULL, &e), 0);
    for (uint32_t v = 1; v < 100; v += 7) {
        uint32_t got = 0;
        CHECK_EQ_INT(tk_sandbox_send(sb, &v, sizeof v, &e), 0);
        CHECK_EQ_INT(tk_sandbox_recv(sb, &got, sizeof got, &e), 0);
        CHECK_EQ_INT(got, 2 * v);
    }
    tk_sandbox_stop(sb);
}

TK_TEST(sandbox_crash_is_an_error_not_the_parents_death) {
    tk_err e;
    char got;
    CHECK_EQ_INT(answer(crasher, NULL, &quick, &got, &e), TK_EDATA);
    CHECK_STR(e.what, "crashed (signal 11, Segmentation fault)");
}

TK_TEST(sandbox_spinning_child_runs_out_of_cpu_time) {
    tk_err e;
    char got;
    tk_sandbox_limits lim = {.cpu_s = 1, .wall_s = 60};
    CHECK_EQ_INT(answer(spinner, NULL, &lim, &got, &e), TK_EDATA);
    CHECK_STR(e.what, "ran out of CPU time (1 s)");
    lim.cpu_s = 0.3; // a fraction of a second, as the fuzz target's
    tk_sandbox *sb;
    CHECK_EQ_INT(tk_sandbox_start(&sb, &lim, spinner, NULL, &e), 0);
    CHECK_EQ_INT(tk_sandbox_recv(sb, &got, 1, &e), TK_EDATA);
    CHECK_STR(e.what, "ran out of CPU time (0.3 s)");
    tk_sandbox_stop(sb);
}

TK_TEST(sandbox_memory_is_limited) {
    tk_err e;
    char got = 0;
    int rc = answer(eater, NULL, &quick, &got, &e);
    // Either its malloc fails (the address-space limit) or it is killed (the resident watch).
    if (rc) CHECK_STR(e.what, "ran out of memory (64 MiB)");
    else CHECK_EQ_INT(got, 'n');
}

TK_TEST(sandbox_silent_child_is_killed_at_the_wall_clock_bound) {
    tk_err e;
    char got;
    tk_sandbox_limits lim = {.cpu_s = 10, .wall_s = 0.5};
    double t0 = tk_now();
    CHECK_EQ_INT(answer(sleeper, NULL, &lim, &got, &e), TK_EDATA);
    CHECK_STR(e.what, "gave no answer within 0.5 s");
    CHECK(tk_now() - t0 < 10);
}

TK_TEST(sandbox_exit_without_an_answer) {
    tk_err e;
    char got;
    int status = 7;
    CHECK_EQ_INT(answer(exits, &status, &quick, &got, &e), TK_EDATA);
    CHECK_STR(e.what, "exited with status 7");
    status = 0;
    CHECK_EQ_INT(answer(exits, &status, &quick, &got, &e), TK_EDATA);
    CHECK_STR(e.what, "ended before it answered");
}

TK_TEST(sandbox_writing_to_a_gone_child_is_an_error_not_sigpipe) {
    tk_sandbox *sb;
    tk_err e;
    int status = 0;
    CHECK_EQ_INT(tk_sandbox_start(&sb, &quick, exits, &status, &e), 0);
    static char big[4 << 20];
    int rc = 0;
    for (int i = 0; i < 8 && !rc; i++) rc = tk_sandbox_send(sb, big, sizeof big, &e);
    CHECK_EQ_INT(rc, TK_EDATA);
    tk_sandbox_stop(sb);
}

TK_TEST(sandbox_child_has_none_of_the_parents_files) {
    tk_err e;
    char got = 0;
    int fd0 = open("/dev/zero", O_RDONLY), fd = fcntl(fd0, F_DUPFD, 20), fd3 = fcntl(fd0, F_DUPFD, 3);
    CHECK(fd >= 20 && fd3 >= 3);
    CHECK_EQ_INT(answer(fd_checker, &fd, &quick, &got, &e), 0);
    CHECK_EQ_INT(got, 1);
    close(fd);
    close(fd3);
    close(fd0);
}

TK_TEST(sandbox_limits_rule_and_environment) {
    tk_sandbox_limits lim;
    tk_err e;
    unsetenv("TK_TEST_SB_CPU");
    unsetenv("TK_TEST_SB_MEM");
    CHECK_EQ_INT(tk_sandbox_limits_for(&lim, 300ull << 20, 10, 1, 512, 8, "TK_TEST_SB_CPU", "TK_TEST_SB_MEM", &e), 0);
    CHECK_NEAR(lim.cpu_s, 310, 0);
    CHECK_EQ_INT(lim.mem_bytes, (512ull + 2400) << 20);
    CHECK_NEAR(lim.wall_s, 940, 0);
    CHECK_EQ_INT(tk_sandbox_limits_for(&lim, 8192, 10, 1, 512, 8, "TK_TEST_SB_CPU", "TK_TEST_SB_MEM", &e), 0);
    CHECK_NEAR(lim.cpu_s, 10, 0);
    CHECK_EQ_INT(lim.mem_bytes, 512ull << 20);
    setenv("TK_TEST_SB_CPU", "2.5", 1);
    setenv("TK_TEST_SB_MEM", "100", 1);
    CHECK_EQ_INT(tk_sandbox_limits_for(&lim, 8192, 10, 1, 512, 8, "TK_TEST_SB_CPU", "TK_TEST_SB_MEM", &e), 0);
    CHECK_NEAR(lim.cpu_s, 2.5, 0);
    CHECK_EQ_INT(lim.mem_bytes, 100ull << 20);
    setenv("TK_TEST_SB_MEM", "-1", 1);
    CHECK_EQ_INT(tk_sandbox_limits_for(&lim, 8192, 10, 1, 512, 8, "TK_TEST_SB_CPU", "TK_TEST_SB_MEM", &e), TK_EUSAGE);
    CHECK_STR(e.what, "TK_TEST_SB_MEM=-1: expected a positive number");
    unsetenv("TK_TEST_SB_CPU");
    unsetenv("TK_TEST_SB_MEM");
}
