// JSON Lines on stdout: one compact object per line, each with a "type".
#ifndef TK_JSONL_H
#define TK_JSONL_H

#include <jansson.h>
#include <stdio.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// Write obj as one line and flush; takes ownership of obj (decref'd). Fails with TK_EIO.
int tk_jsonl_emit(FILE *fp, json_t *obj, tk_err *e);
// Doubles are written as the shortest text that reads back to the same value (json_text.h).

#ifdef __cplusplus
}
#endif

#endif
