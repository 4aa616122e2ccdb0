#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>

#define ENOSPC_HINT_ERRNO ENOSPC

static void vset(char *dst, size_t n, const char *fmt, va_list ap) { vsnprintf(dst, n, fmt, ap); }

int tk_err_set(tk_err *e, int code, const char *fmt, ...) {
    if (!e) return code;
    memset(e, 0, sizeof *e);
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vset(e->what, sizeof e->what, fmt, ap);
    va_end(ap);
    return code;
}

int tk_err_errno(tk_err *e, int errnum, const char *fmt, ...) {
    if (!e) return TK_EIO;
    memset(e, 0, sizeof *e);
    e->code = TK_EIO;
    va_list ap;
    va_start(ap, fmt);
    vset(e->what, sizeof e->what, fmt, ap);
    va_end(ap);
    e->lib_code = errnum;
    snprintf(e->lib, sizeof e->lib, "errno");
    if (errnum == ENOSPC_HINT_ERRNO) snprintf(e->hint, sizeof e->hint, "free some disk space");
    return e->code;
}

int tk_err_lib(tk_err *e, const char *lib, int lib_code) {
    if (!e) return TK_EINTERNAL;
    snprintf(e->lib, sizeof e->lib, "%s", lib ? lib : "");
    e->lib_code = lib_code;
    return e->code;
}

int tk_err_where(tk_err *e, const char *fmt, ...) {
    if (!e) return TK_EINTERNAL;
    va_list ap;
    va_start(ap, fmt);
    vset(e->where, sizeof e->where, fmt, ap);
    va_end(ap);
    return e->code;
}

int tk_err_hint(tk_err *e, const char *fmt, ...) {
    if (!e) return TK_EINTERNAL;
    va_list ap;
    va_start(ap, fmt);
    vset(e->hint, sizeof e->hint, fmt, ap);
    va_end(ap);
    return e->code;
}

void tk_err_clear(tk_err *e) {
    if (e) memset(e, 0, sizeof *e);
}

void tk_err_format(const tk_err *e, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (k < n) {                                                                               \
            int w_ = snprintf(buf + k, n - k, __VA_ARGS__);                                        \
            if (w_ > 0) k += (size_t)w_;                                                           \
        }                                                                                          \
    } while (0)
    if (e->where[0]) PUT("%s: ", e->where);
    PUT("%s", e->what[0] ? e->what : "unknown error");
    if (e->lib[0] && strcmp(e->lib, "errno") == 0)
        PUT(": %s", strerror(e->lib_code));
    else if (e->lib[0])
        PUT(" [%s %d]", e->lib, e->lib_code);
    if (e->hint[0]) PUT(" (hint: %s)", e->hint);
#undef PUT
}

const char *tk_exit_name(int code) {
    switch (code) {
    case TK_OK: return "success";
    case TK_NO: return "answer is no";
    case TK_EUSAGE: return "usage error";
    case TK_EDATA: return "bad input data";
    case TK_EIO: return "I/O or system error";
    case TK_EDEVICE: return "device or library error";
    case TK_ENUMERIC: return "numerical failure";
    case TK_EINTERNAL: return "internal error";
    default: return "unknown";
    }
}
