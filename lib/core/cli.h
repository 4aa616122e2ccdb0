// Helpers for the thin programs in cmd/: number parsing with range checks, the common error and
// usage messages, --version, and checking that stdout was really written.
#ifndef TK_CLI_H
#define TK_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_VERSION "0.1.0"

// Parse a whole string as a base-10 integer in [lo, hi]. Returns 0, or TK_EUSAGE with e filled
// ("--batch: expected an integer in [1, 1048576], got '12x'"). opt names the option for the message.
int tk_parse_i64(const char *s, int64_t lo, int64_t hi, const char *opt, int64_t *out, tk_err *e);
// Parse a whole string as a finite double in [lo, hi].
int tk_parse_f64(const char *s, double lo, double hi, const char *opt, double *out, tk_err *e);
// Parse a comma-separated list of integers ("1,10,100") into out (at most cap); *n gets the count.
int tk_parse_i64_list(const char *s, int64_t lo, int64_t hi, const char *opt, int64_t *out, int cap,
                      int *n, tk_err *e);

// Print "PROG: error: <record>" to stderr and return the record's exit code.
int tk_cli_fail(const char *prog, const tk_err *e);
// Print "PROG: <message>" and the short usage to stderr; return TK_EUSAGE (2).
int tk_cli_usage_error(const char *prog, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// The options every binary shares, for getopt_long's return value c (optstring starting with
// ':'): -h/--help (help() to stdout, exit 0), -V/--version, a missing value (':') and an unknown
// option. Returns the exit code main must return: 0, TK_EUSAGE, or TK_EIO if stdout failed.
int tk_cli_common_option(const char *prog, const char *usage, void (*help)(void), int c,
                         char *const *argv);
// Print the version of trainkit and of the CUDA, cuDNN and NCCL it was built with, to stdout.
void tk_cli_version(const char *prog);
// Flush and close stdout; a failed write (disk full, closed pipe) becomes an error record (TK_EIO).
int tk_cli_close_stdout(tk_err *e);
// Refuse to write a binary format to a terminal (TK_EUSAGE) unless forced.
int tk_cli_refuse_tty(FILE *f, const char *what, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
