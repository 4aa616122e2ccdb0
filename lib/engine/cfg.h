// Parsing a section of a workload configuration file (config.h): every config error reads the
// same, "FILE: $.model.embedding_dim: expected an integer in [1, 4096]" (TK_EDATA).
#ifndef TK_ENGINE_CFG_H
#define TK_ENGINE_CFG_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

json_t *tk_cfg_get(json_t *root, const char *dotted);     // the member at "a.b.c", or NULL
// TK_EDATA "FILE: $.PATH: WHAT".
int tk_cfg_bad(tk_err *e, const char *file, const char *jpath, const char *what);
int tk_cfg_int(json_t *root, const char *file, const char *p, int64_t lo, int64_t hi, int64_t *out, tk_err *e);
int tk_cfg_num(json_t *root, const char *file, const char *p, double lo, double hi, double *out, tk_err *e);
// Optional members: *out keeps its value when the member is absent or null.
int tk_cfg_int_opt(json_t *root, const char *file, const char *p, int64_t lo, int64_t hi, int64_t *out, tk_err *e);
int tk_cfg_num_opt(json_t *root, const char *file, const char *p, double lo, double hi, double *out, tk_err *e);
int tk_cfg_bool_opt(json_t *root, const char *file, const char *p, int *out, tk_err *e);
// The compute precision of a model (the config's TK_PRECISION_KEY, train-step --precision): every
// word of tk_precision_names, in this order. A workload supports some of them (its table's
// precisions, a NULL-terminated subset of the names) and reads the key with tk_cfg_precision: one
// of its words, TK_PRECISION_FP32 when absent, else TK_EDATA naming the file and key.
typedef enum { TK_PRECISION_FP32, TK_PRECISION_TF32, TK_PRECISION_BF16 } tk_precision;
#define TK_PRECISION_KEY "model.precision"
extern const char *const tk_precision_names[]; // "fp32", "tf32", "bf16", NULL
int tk_cfg_precision(json_t *root, const char *file, const char *const *supported, tk_precision *out, tk_err *e);
// A string member that must be one of choices (NULL terminated); *out = its index. Absent: def.
int tk_cfg_enum(json_t *root, const char *file, const char *p, const char *const *choices, int def, int *out,
                tk_err *e);
// Every key of the object at p (absent: fine) must be in allowed (NULL terminated).
int tk_cfg_keys(json_t *root, const char *file, const char *p, const char *const *allowed, tk_err *e);

// s is one of list (NULL terminated, may be NULL).
int tk_cfg_in_list(const char *s, const char *const *list);

#ifdef __cplusplus
}
#endif

#endif
