// The end of a test binary's driver mode (an oracle test runs the binary with TK_*_DRIVE set: a
// constructor does the work before main and exits): stdout flushed, the error printed as
// "PROG: error: ..." on stderr, exit with the status.
#ifndef TK_DRIVE_H
#define TK_DRIVE_H

#include <stdio.h>
#include <stdlib.h>
#include "core/err.h"

static inline void tk_drive_exit(const char *prog, int rc, tk_err *e) {
    if (!rc && fflush(stdout)) rc = tk_err_set(e, TK_EIO, "stdout: write failed");
    if (rc) {
        char buf[1200];
        tk_err_format(e, buf, sizeof buf);
        fprintf(stderr, "%s: error: %s\n", prog, buf);
    }
    exit(rc);
}

#endif
