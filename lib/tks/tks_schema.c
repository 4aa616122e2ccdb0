// The .tks schema: dtypes, derived sizes, and its JSON form (man/man5/tks.5, "SCHEMA-JSON").
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tks/tks_internal.h"
#include "core/json_text.h"

static const char *const dtype_names[] = {NULL, "u8", "i8", "i16", "i32", "i64",
                                          "f16", "bf16", "f32", "f64"};
static const size_t dtype_sizes[] = {0, 1, 1, 2, 4, 8, 2, 2, 4, 8};

size_t tks_dtype_size(tks_dtype t) { return t >= TKS_U8 && t <= TKS_F64 ? dtype_sizes[t] : 0; }

const char *tks_dtype_name(tks_dtype t) {
    return t >= TKS_U8 && t <= TKS_F64 ? dtype_names[t] : "?";
}

static tks_dtype dtype_from_name(const char *s) {
    for (int t = TKS_U8; t <= TKS_F64; t++)
        if (strcmp(s, dtype_names[t]) == 0) return (tks_dtype)t;
    return 0;
}

int tks_schema_finish(tks_schema *s, tk_err *e) {
    if (s->nfields < 1 || s->nfields > TKS_MAX_FIELDS)
        return tk_err_set(e, TK_EUSAGE, "a schema needs 1 to %d fields, got %d", TKS_MAX_FIELDS,
                          s->nfields);
    s->record_bytes = 0;
    s->nragged = 0;
    for (int i = 0; i < s->nfields; i++) {
        tks_field *f = &s->f[i];
        size_t len = strnlen(f->name, sizeof f->name);
        if (len == 0 || len >= sizeof f->name)
            return tk_err_set(e, TK_EUSAGE, "field %d: name must be 1 to 63 bytes", i);
        for (int j = 0; j < i; j++)
            if (strcmp(s->f[j].name, f->name) == 0)
                return tk_err_set(e, TK_EUSAGE, "field '%s' appears twice", f->name);
        if (!tks_dtype_size(f->dtype))
            return tk_err_set(e, TK_EUSAGE, "field '%s': unknown dtype %d", f->name, (int)f->dtype);
        if (f->ndim < 0 || f->ndim > TKS_MAX_DIMS)
            return tk_err_set(e, TK_EUSAGE, "field '%s': %d dimensions (at most %d)", f->name,
                              f->ndim, TKS_MAX_DIMS);
        f->ragged = f->ndim > 0 && f->shape[0] == TKS_RAGGED;
        uint64_t bytes = tks_dtype_size(f->dtype);
        for (int d = f->ragged; d < f->ndim; d++) {
            if (f->shape[d] < 1 || f->shape[d] > (int64_t)TKS_MAX_COUNT)
                return tk_err_set(e, TK_EUSAGE, "field '%s': dimension %d is %lld%s", f->name, d,
                                  (long long)f->shape[d], f->shape[d] == TKS_RAGGED ?
                                  " (only the first dimension can be ragged)" : "");
            bytes *= (uint64_t)f->shape[d];
            if (bytes > TKS_MAX_RECORD_BYTES) break;
        }
        if (bytes > TKS_MAX_RECORD_BYTES || s->record_bytes + bytes > TKS_MAX_RECORD_BYTES)
            return tk_err_set(e, TK_EUSAGE, "records larger than 64 MiB are not supported");
        f->row_bytes = f->ragged ? (size_t)bytes : 0;
        f->bytes = f->ragged ? 0 : (size_t)bytes;
        s->record_bytes += f->bytes;
        s->nragged += f->ragged;
    }
    if (!s->meta_json[0]) snprintf(s->meta_json, sizeof s->meta_json, "{}");
    return 0;
}

int tks_schema_field(const tks_schema *s, const char *name) {
    for (int i = 0; i < s->nfields; i++)
        if (strcmp(s->f[i].name, name) == 0) return i;
    return -1;
}

int tks_schema_to_json(const tks_schema *s, size_t frame_records, char **out, size_t *len,
                       tk_err *e) {
    json_error_t jerr;
    json_t *meta = json_loads(s->meta_json, 0, &jerr);
    if (!json_is_object(meta)) {
        json_decref(meta);
        return tk_err_set(e, TK_EUSAGE, "schema meta is not a JSON object: %s", s->meta_json);
    }
    json_t *fields = json_array();
    for (int i = 0; i < s->nfields; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < s->f[i].ndim; d++) json_array_append_new(shape, json_integer(s->f[i].shape[d]));
        json_array_append_new(fields, json_pack("{s:s,s:s,s:o}", "name", s->f[i].name, "dtype",
                                                tks_dtype_name(s->f[i].dtype), "shape", shape));
    }
    json_t *root = json_pack("{s:o,s:I,s:o}", "fields", fields, "frame_records",
                             (json_int_t)frame_records, "meta", meta);
    *out = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!*out) return tk_err_set(e, TK_EINTERNAL, "cannot encode the schema as JSON");
    *len = strlen(*out);
    return 0;
}

#define BAD(...) tk_err_set(e, TK_EDATA, "bad schema: " __VA_ARGS__)

static int field_from_json(tks_field *f, json_t *jf, int i, tk_err *e) {
    json_t *name = json_object_get(jf, "name"), *dtype = json_object_get(jf, "dtype");
    json_t *shape = json_object_get(jf, "shape");
    if (!json_is_string(name) || !json_is_string(dtype) || !json_is_array(shape))
        return BAD("field %d needs a string name, a string dtype and a shape array", i);
    if (json_string_length(name) < 1 || json_string_length(name) >= sizeof f->name ||
        strlen(json_string_value(name)) != json_string_length(name))
        return BAD("field %d: name must be 1 to 63 bytes", i);
    snprintf(f->name, sizeof f->name, "%s", json_string_value(name));
    f->dtype = dtype_from_name(json_string_value(dtype));
    if (!f->dtype) return BAD("field '%s': unknown dtype '%s'", f->name, json_string_value(dtype));
    if (json_array_size(shape) > TKS_MAX_DIMS)
        return BAD("field '%s': more than %d dimensions", f->name, TKS_MAX_DIMS);
    f->ndim = (int)json_array_size(shape);
    for (int d = 0; d < f->ndim; d++) {
        json_t *v = json_array_get(shape, (size_t)d);
        if (!json_is_integer(v)) return BAD("field '%s': shape holds a non-integer", f->name);
        f->shape[d] = json_integer_value(v);
    }
    return 0;
}

int tks_schema_from_json(tks_schema *s, size_t *frame_records, const char *buf, size_t len,
                         tk_err *e) {
    memset(s, 0, sizeof *s);
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    char msg[4 * JSON_ERROR_TEXT_LENGTH];
    if (!root) return BAD("%s", tk_json_err_text(msg, sizeof msg, &jerr));
    int rc = 0;
    json_t *fields = json_object_get(root, "fields"), *meta = json_object_get(root, "meta");
    json_t *fr = json_object_get(root, "frame_records");
    if (!json_is_object(root) || !json_is_array(fields) || !json_is_integer(fr) ||
        (meta && !json_is_object(meta))) {
        rc = BAD("expected {\"fields\":[...],\"frame_records\":N,\"meta\":{...}}");
        goto out;
    }
    if (json_integer_value(fr) < 1 || json_integer_value(fr) > (json_int_t)TKS_MAX_COUNT) {
        rc = BAD("frame_records out of range");
        goto out;
    }
    *frame_records = (size_t)json_integer_value(fr);
    if (json_array_size(fields) < 1 || json_array_size(fields) > TKS_MAX_FIELDS) {
        rc = BAD("1 to %d fields expected", TKS_MAX_FIELDS);
        goto out;
    }
    s->nfields = (int)json_array_size(fields);
    for (int i = 0; i < s->nfields && !rc; i++)
        rc = field_from_json(&s->f[i], json_array_get(fields, (size_t)i), i, e);
    if (rc) goto out;
    char *m = meta ? json_dumps(meta, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (m && strlen(m) >= sizeof s->meta_json) {
        free(m);
        rc = BAD("meta longer than %zu bytes", sizeof s->meta_json - 1);
        goto out;
    }
    snprintf(s->meta_json, sizeof s->meta_json, "%s", m ? m : "{}");
    free(m);
    if (tks_schema_finish(s, e)) {
        char why[sizeof e->what];
        snprintf(why, sizeof why, "%s", e->what);
        rc = BAD("%s", why);
    }
    if (!rc && tks_frame_fixed_bytes(s, *frame_records) > TKS_MAX_FRAME_BYTES)
        rc = BAD("frame_records x record size exceeds 2 GiB");
out:
    json_decref(root);
    return rc;
}
