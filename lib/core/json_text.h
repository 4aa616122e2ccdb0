// JSON text the way Python writes it: members in insertion order, non-ASCII escaped, and each
// double as the shortest text that reads back to the same value (Python's repr: 0.8025, not
// 0.80249999999999999). MLLOG lines use json.dumps' separators; JSON Lines output is compact.
#ifndef TK_JSON_TEXT_H
#define TK_JSON_TEXT_H

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

// As Python's json.dumps(v): ", " and ": " separators. Returns a malloc'd string or NULL.
char *tk_json_dumps_py(const json_t *v);
// As json.dumps(v, separators=(",", ":")).
char *tk_json_dumps_compact(const json_t *v);
// jansson's error text made printable for a message: it quotes the offending input raw ("near
// '\x01'" would print as "near ''"), so control bytes become \xNN and latin-1 controls \uNNNN.
// Writes at most n bytes (NUL included) into out and returns out.
char *tk_json_err_text(char *out, size_t n, const json_error_t *je);

#ifdef __cplusplus
}
#endif

#endif
