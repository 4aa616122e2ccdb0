// The reference's LibriSpeech manifests (librispeech.h): librispeech-{subset}-wav.json as
// utils/convert_librispeech.py writes it and common/data/dali/data_loader.py reads it.
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "librispeech/librispeech.h"

void ls_manifest_free(ls_manifest_entry *m, size_t n) {
    for (size_t i = 0; m && i < n; i++) {
        free(m[i].transcript);
        free(m[i].fname);
    }
    free(m);
}

static int bad(tk_err *e, const char *path, size_t i, const char *field, const char *what) {
    tk_err_set(e, TK_EDATA, "%s", what);
    return tk_err_where(e, "%s: $[%zu]%s", path, i, field);
}

// The speed-1 file of entry i (the reference's converted original; other speeds are its offline
// perturbations, which the MLPerf config ignores).
static int speed1_file(const json_t *files, const char *path, size_t i, const char **fname, tk_err *e) {
    if (!json_is_array(files) || !json_array_size(files))
        return bad(e, path, i, ".files", "\"files\" must be a non-empty array");
    size_t k;
    json_t *f;
    *fname = NULL;
    json_array_foreach(files, k, f) {
        char field[64];
        snprintf(field, sizeof field, ".files[%zu]", k);
        json_t *fn = json_object_get(f, "fname"), *sp = json_object_get(f, "speed");
        if (!json_is_object(f) || !json_is_string(fn) || !json_string_length(fn) ||
            strlen(json_string_value(fn)) != json_string_length(fn))
            return bad(e, path, i, field, "each file needs a \"fname\" string");
        if (sp && !json_is_number(sp)) return bad(e, path, i, field, "\"speed\" must be a number");
        if ((!sp || json_number_value(sp) == 1.0) && !*fname) *fname = json_string_value(fn);
    }
    if (!*fname) return bad(e, path, i, ".files", "no file of speed 1");
    return 0;
}

int ls_manifest_load(const char *path, ls_manifest_entry **out, size_t *n, tk_err *e) {
    *out = NULL;
    *n = 0;
    char *buf;
    size_t len;
    TRY(ls_read_file(path, &buf, &len, e));
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!root) {
        tk_err_set(e, TK_EDATA, "not valid JSON: %s", je.text);
        return tk_err_where(e, "%s: line %d, column %d", path, je.line, je.column);
    }
    int rc = 0;
    if (!json_is_array(root)) {
        rc = tk_err_set(e, TK_EDATA, "a manifest is a JSON array of utterances");
        tk_err_where(e, "%s: $", path);
    }
    size_t cnt = rc ? 0 : json_array_size(root);
    ls_manifest_entry *m = calloc(cnt ? cnt : 1, sizeof *m);
    if (!rc && !m) rc = tk_err_errno(e, ENOMEM, "%s", path);
    for (size_t i = 0; i < cnt && !rc; i++) {
        json_t *u = json_array_get(root, i);
        if (!json_is_object(u)) {
            rc = bad(e, path, i, "", "each utterance is a JSON object");
            break;
        }
        json_t *tr = json_object_get(u, "transcript"), *od = json_object_get(u, "original_duration"),
               *ns = json_object_get(u, "original_num_samples");
        const char *fname = NULL;
        if (!json_is_string(tr) || strlen(json_string_value(tr)) != json_string_length(tr))
            rc = bad(e, path, i, ".transcript", "\"transcript\" must be a string (without NUL)");
        else if (!json_is_number(od) || !isfinite(json_number_value(od)) || json_number_value(od) < 0)
            rc = bad(e, path, i, ".original_duration", "\"original_duration\" must be a number >= 0");
        else if (!json_is_integer(ns) || json_integer_value(ns) < 0)
            rc = bad(e, path, i, ".original_num_samples", "\"original_num_samples\" must be an integer >= 0");
        else if (!(rc = speed1_file(json_object_get(u, "files"), path, i, &fname, e))) {
            m[i].transcript = strdup(json_string_value(tr));
            m[i].fname = strdup(fname);
            m[i].duration = json_number_value(od);
            m[i].num_samples = (uint64_t)json_integer_value(ns);
            if (!m[i].transcript || !m[i].fname) rc = tk_err_errno(e, ENOMEM, "%s", path);
        }
    }
    json_decref(root);
    if (rc) {
        ls_manifest_free(m, cnt);
        return rc;
    }
    *out = m;
    *n = cnt;
    return 0;
}
