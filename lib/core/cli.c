#include "core/cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TK_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <cudnn_version.h>
#include <nccl.h>
#endif

int tk_parse_i64(const char *s, int64_t lo, int64_t hi, const char *opt, int64_t *out, tk_err *e) {
    char *end = NULL;
    errno = 0;
    long long v = s && *s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno == ERANGE || v < lo || v > hi)
        return tk_err_set(e, TK_EUSAGE, "%s: expected an integer in [%lld, %lld], got '%s'", opt,
                          (long long)lo, (long long)hi, s ? s : "");
    *out = v;
    return 0;
}

int tk_parse_f64(const char *s, double lo, double hi, const char *opt, double *out, tk_err *e) {
    char *end = NULL;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno == ERANGE || !isfinite(v) || v < lo || v > hi)
        return tk_err_set(e, TK_EUSAGE, "%s: expected a number in [%g, %g], got '%s'", opt, lo, hi,
                          s ? s : "");
    *out = v;
    return 0;
}

int tk_parse_i64_list(const char *s, int64_t lo, int64_t hi, const char *opt, int64_t *out, int cap,
                      int *n, tk_err *e) {
    *n = 0;
    if (!s || !*s) return tk_err_set(e, TK_EUSAGE, "%s: expected a comma-separated list", opt);
    const char *p = s;
    while (1) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof item || *n >= cap)
            return tk_err_set(e, TK_EUSAGE, "%s: bad list '%s' (at most %d integers)", opt, s, cap);
        memcpy(item, p, len);
        item[len] = 0;
        TRY(tk_parse_i64(item, lo, hi, opt, &out[*n], e));
        (*n)++;
        if (!c) break;
        p = c + 1;
    }
    return 0;
}

int tk_cli_fail(const char *prog, const tk_err *e) {
    char buf[1400];
    tk_err_format(e, buf, sizeof buf);
    fprintf(stderr, "%s: error: %s\n", prog, buf);
    return e->code ? e->code : TK_EINTERNAL;
}

int tk_cli_usage_error(const char *prog, const char *usage, const char *fmt, ...) {
    fprintf(stderr, "%s: ", prog);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%sTry '%s --help' for more information.\n", usage ? usage : "", prog);
    return TK_EUSAGE;
}

void tk_cli_version(const char *prog) {
    printf("%s (trainkit) %s\n", prog, TK_VERSION);
#ifdef TK_HAVE_CUDA
    printf("built with CUDA %d.%d, cuDNN %d.%d.%d, NCCL %d.%d.%d\n", CUDART_VERSION / 1000,
           (CUDART_VERSION % 1000) / 10, CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL, NCCL_MAJOR,
           NCCL_MINOR, NCCL_PATCH);
#else
    printf("built without CUDA (CPU backend only)\n");
#endif
}

int tk_cli_common_option(const char *prog, const char *usage, void (*help)(void), int c,
                         char *const *argv) {
    tk_err e;
    switch (c) {
    case 'h': help(); return tk_cli_close_stdout(&e) ? tk_cli_fail(prog, &e) : 0;
    case 'V': tk_cli_version(prog); return tk_cli_close_stdout(&e) ? tk_cli_fail(prog, &e) : 0;
    case ':': return tk_cli_usage_error(prog, usage, "option '%s' needs a value", argv[optind - 1]);
    default: return tk_cli_usage_error(prog, usage, "unknown option '%s'", argv[optind - 1]);
    }
}

int tk_cli_close_stdout(tk_err *e) {
    int bad = ferror(stdout);
    if (fflush(stdout) != 0) bad = 1;
    int saved = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    if (bad) return tk_err_errno(e, saved ? saved : EIO, "cannot write to standard output");
    return 0;
}

int tk_cli_refuse_tty(FILE *f, const char *what, tk_err *e) {
    if (isatty(fileno(f))) {
        tk_err_set(e, TK_EUSAGE, "refusing to write %s to a terminal", what);
        return tk_err_hint(e, "redirect standard output to a file or a pipe, or use -o FILE");
    }
    return 0;
}
