// Helpers for parsing a section of a configuration file (cfg.h).
#include "engine/cfg.h"

#include <stdio.h>
#include <string.h>

int tk_cfg_bad(tk_err *e, const char *file, const char *jpath, const char *what) {
    tk_err_set(e, TK_EDATA, "%s", what);
    tk_err_where(e, "%s: $.%s", file, jpath);
    return TK_EDATA;
}

json_t *tk_cfg_get(json_t *root, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = root;
    for (char *save, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_object_get(v, k);
    return v;
}

int tk_cfg_in_list(const char *s, const char *const *list) {
    for (; list && *list; list++)
        if (strcmp(s, *list) == 0) return 1;
    return 0;
}

static const char *range_msg(char *buf, size_t n, const char *kind, double lo, double hi, int integer) {
    if (integer) snprintf(buf, n, "expected %s in [%lld, %lld]", kind, (long long)lo, (long long)hi);
    else snprintf(buf, n, "expected %s in [%g, %g]", kind, lo, hi);
    return buf;
}

int tk_cfg_int(json_t *root, const char *file, const char *p, int64_t lo, int64_t hi, int64_t *out, tk_err *e) {
    json_t *v = tk_cfg_get(root, p);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char msg[160];
        snprintf(msg, sizeof msg, "expected an integer in [%lld, %lld]", (long long)lo, (long long)hi);
        return tk_cfg_bad(e, file, p, msg);
    }
    *out = json_integer_value(v);
    return 0;
}

int tk_cfg_num(json_t *root, const char *file, const char *p, double lo, double hi, double *out, tk_err *e) {
    json_t *v = tk_cfg_get(root, p);
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi) {
        char msg[160];
        return tk_cfg_bad(e, file, p, range_msg(msg, sizeof msg, "a number", lo, hi, 0));
    }
    *out = json_number_value(v);
    return 0;
}

int tk_cfg_int_opt(json_t *root, const char *file, const char *p, int64_t lo, int64_t hi, int64_t *out, tk_err *e) {
    json_t *v = tk_cfg_get(root, p);
    return !v || json_is_null(v) ? 0 : tk_cfg_int(root, file, p, lo, hi, out, e);
}

int tk_cfg_num_opt(json_t *root, const char *file, const char *p, double lo, double hi, double *out, tk_err *e) {
    json_t *v = tk_cfg_get(root, p);
    return !v || json_is_null(v) ? 0 : tk_cfg_num(root, file, p, lo, hi, out, e);
}

int tk_cfg_bool_opt(json_t *root, const char *file, const char *p, int *out, tk_err *e) {
    json_t *v = tk_cfg_get(root, p);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return tk_cfg_bad(e, file, p, "expected true or false");
    *out = json_is_true(v);
    return 0;
}

int tk_cfg_enum(json_t *root, const char *file, const char *p, const char *const *choices, int def, int *out,
                tk_err *e) {
    json_t *v = tk_cfg_get(root, p);
    const char *s = json_string_value(v);
    if (!v && def >= 0) {
        *out = def;
        return 0;
    }
    for (int i = 0; s && choices[i]; i++)
        if (strcmp(s, choices[i]) == 0) {
            *out = i;
            return 0;
        }
    char msg[256];
    size_t o = (size_t)snprintf(msg, sizeof msg, "expected ");
    for (int i = 0; choices[i] && o < sizeof msg; i++)
        o += (size_t)snprintf(msg + o, sizeof msg - o, "%s\"%s\"", i == 0 ? "" : choices[i + 1] ? ", " : " or ",
                              choices[i]);
    return tk_cfg_bad(e, file, p, msg);
}

const char *const tk_precision_names[] = {"fp32", "tf32", "bf16", NULL};

int tk_cfg_precision(json_t *root, const char *file, const char *const *supported, tk_precision *out, tk_err *e) {
    int i = 0;
    TRY(tk_cfg_enum(root, file, TK_PRECISION_KEY, supported, 0, &i, e));
    for (int k = 0; tk_precision_names[k]; k++)
        if (strcmp(supported[i], tk_precision_names[k]) == 0) return *out = (tk_precision)k, 0;
    return tk_err_set(e, TK_EINTERNAL, "precision \"%s\" is not one of tk_precision_names", supported[i]);
}

int tk_cfg_keys(json_t *root, const char *file, const char *p, const char *const *allowed, tk_err *e) {
    json_t *o = p && *p ? tk_cfg_get(root, p) : root;
    if (!o) return 0;
    if (!json_is_object(o)) return tk_cfg_bad(e, file, p, "expected an object");
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (tk_cfg_in_list(k, allowed)) continue;
        char jp[320], msg[300];
        snprintf(jp, sizeof jp, "%s%s%s", p && *p ? p : "", p && *p ? "." : "", k);
        snprintf(msg, sizeof msg, "unknown key \"%s\"", k);
        return tk_cfg_bad(e, file, jp, msg);
    }
    return 0;
}

