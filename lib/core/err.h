// Error records and exit codes shared by every library and binary.
// Libraries never print or exit: they fill a tk_err and return its code.
// Only cmd/ turns a record into "NAME: error: WHERE: WHAT (hint: HINT)" and an exit code.
#ifndef TK_ERR_H
#define TK_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Exit codes, the same in every man page (man7/trainkit.7, DESIGN.md section 5).
enum {
    TK_OK = 0,         // success
    TK_NO = 1,         // ran, and the answer is no (violations, target not reached, mismatch)
    TK_EUSAGE = 2,     // bad command line
    TK_EDATA = 3,      // bad input data
    TK_EIO = 4,        // I/O or system error
    TK_EDEVICE = 5,    // CUDA, cuBLAS, cuDNN, NCCL error
    TK_ENUMERIC = 6,   // NaN/Inf
    TK_EINTERNAL = 70, // a bug in trainkit
};

typedef struct tk_err {
    int code;          // one of the exit codes above; 0 = no error
    int lib_code;      // the failing library's own code (errno, cudaError_t, ...) or 0
    char lib[16];      // "errno", "zstd", "cuda", "cublas", "cudnn", "nccl", "jansson" or ""
    char where[384];   // "FILE: line 12", "FILE: offset 4096", "FILE: $.images[3].id", or ""
    char what[512];    // what failed, one sentence without a trailing period
    char hint[256];    // what the user can do about it, or ""
} tk_err;

// All setters return e->code so call sites can write `return tk_err_set(e, TK_EDATA, ...)`.
// e may be NULL (the error is then only returned).
int tk_err_set(tk_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Like tk_err_set, and records errnum (strerror is appended to the message when printed).
int tk_err_errno(tk_err *e, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Records the library code and name (e.g. "cuda", 700) beside an already set message.
int tk_err_lib(tk_err *e, const char *lib, int lib_code);
int tk_err_where(tk_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int tk_err_hint(tk_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tk_err_clear(tk_err *e);
// Formats the record as one line (no program name, no newline) into buf.
void tk_err_format(const tk_err *e, char *buf, size_t n);
// The name of an exit code ("bad input data", ...).
const char *tk_exit_name(int code);

// Propagate a nonzero status.
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        int tk_try_rc_ = (expr);                                                                   \
        if (tk_try_rc_) return tk_try_rc_;                                                         \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
