#include "core/jsonl.h"

#include "core/json_text.h"

#include <errno.h>
#include <stdlib.h>

int tk_jsonl_emit(FILE *fp, json_t *obj, tk_err *e) {
    if (!obj) return tk_err_set(e, TK_EINTERNAL, "out of memory building a JSON object");
    char *s = tk_json_dumps_compact(obj);
    json_decref(obj);
    if (!s) return tk_err_set(e, TK_EINTERNAL, "cannot serialize a JSON object");
    int bad = fputs(s, fp) < 0 || fputc('\n', fp) < 0 || fflush(fp) != 0;
    free(s);
    if (bad) return tk_err_errno(e, errno ? errno : EIO, "cannot write JSON Lines output");
    return 0;
}
