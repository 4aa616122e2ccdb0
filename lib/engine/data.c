// Dataset paths and the first file's schema meta (data.h).
#include "engine/data.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tks/tks.h"

static int add(char ***list, int *n, const char *p, tk_err *e) {
    char **np = realloc(*list, (size_t)(*n + 1) * sizeof *np);
    if (!np) return tk_err_set(e, TK_EIO, "out of memory");
    *list = np;
    if (!(np[*n] = strdup(p))) return tk_err_set(e, TK_EIO, "out of memory");
    (*n)++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int expand(char ***list, int *n, const char *p, tk_err *e) {
    struct stat st;
    if (stat(p, &st) != 0) return tk_err_errno(e, errno, "%s: cannot open", p);
    if (!S_ISDIR(st.st_mode)) return add(list, n, p, e);
    DIR *dir = opendir(p);
    if (!dir) return tk_err_errno(e, errno, "%s: cannot open directory", p);
    int first = *n, rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(dir))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".tks") != 0 || de->d_name[0] == '.') continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", p, de->d_name);
        rc = add(list, n, full, e);
    }
    closedir(dir);
    if (rc) return rc;
    if (*n == first) return tk_err_set(e, TK_EDATA, "%s: no .tks files in the directory", p);
    qsort(*list + first, (size_t)(*n - first), sizeof **list, cmp_str);
    return 0;
}

int tk_data_paths(char *const *paths, int npaths, char ***out, int *nout, tk_err *e) {
    char **list = NULL;
    int n = 0, rc = 0;
    for (int i = 0; !rc && i < npaths; i++) rc = expand(&list, &n, paths[i], e);
    if (!rc && n == 0) rc = tk_err_set(e, TK_EUSAGE, "no input files");
    if (rc) {
        tk_data_paths_free(list, n);
        return rc;
    }
    *out = list;
    *nout = n;
    return 0;
}

void tk_data_paths_free(char **list, int n) {
    for (int i = 0; list && i < n; i++) free(list[i]);
    free(list);
}

int tk_data_meta(char *const *paths, int npaths, char **meta, tk_err *e) {
    char **list;
    int n;
    *meta = NULL;
    TRY(tk_data_paths(paths, npaths, &list, &n, e));
    tks_reader *r;
    int rc = tks_reader_open(&r, list[0], e);
    if (!rc) {
        const char *m = tks_reader_schema(r)->meta_json;
        *meta = strdup(m && *m ? m : "{}");
        if (!*meta) rc = tk_err_set(e, TK_EIO, "out of memory");
        tks_reader_close(r);
    }
    tk_data_paths_free(list, n);
    return rc;
}

struct tk_records {
    int n, nf;
    char **path;
    tks_reader **r;
    uint64_t *first;              // each file's first record; first[n] = total
    int *fidx;                    // per file: the fields' indices in its schema
    int64_t *len;                 // per file: the fields' elements a record (1 for a scalar)
    void **cols;                  // the buffered frame's columns (every field of the widest schema)
    int ncols;
    size_t cap;                   // records the columns hold
    int cur;                      // the file of the buffered frame
    size_t frame;                 // next frame of it (the buffered one is frame - 1)
    size_t fn, fpos;              // records in the buffered frame; the next to hand out
    size_t esize[TK_RECORDS_MAX_FIELDS]; // an element's bytes
};

static int check_field(const tks_schema *s, const char *path, const tk_record_field *f, const char *what, int *idx,
                       int64_t *len, tk_err *e) {
    int i = tks_schema_field(s, f->name);
    int ok = i >= 0 && s->f[i].dtype == f->dtype &&
             (f->len == 0 ? s->f[i].ndim == 0
                          : s->f[i].ndim == 1 && (f->len < 0 ? s->f[i].shape[0] >= 1 : s->f[i].shape[0] == f->len));
    if (!ok) {
        char n[32] = "";
        if (f->len) snprintf(n, sizeof n, f->len < 0 ? "[N]" : "[%lld]", (long long)f->len);
        tk_err_set(e, TK_EDATA, "schema: field '%s' must be %s%s (%s)", f->name, tks_dtype_name(f->dtype), n, what);
        tk_err_where(e, "%s", path);
        return TK_EDATA;
    }
    *idx = i;
    *len = f->len ? s->f[i].shape[0] : 1;
    return 0;
}

// The lengths that TK_RECORDS_AS ties together, in file i.
static int check_same(const tk_records *r, int i, const tk_record_field *fields, const char *what, tk_err *e) {
    for (int f = 0; f < r->nf; f++) {
        if (fields[f].len > TK_RECORDS_AS(0)) continue;
        const int64_t g = TK_RECORDS_AS(0) - fields[f].len;
        if (g >= f) return tk_err_set(e, TK_EINTERNAL, "records: field %d as long as field %lld", f, (long long)g);
        if (r->len[i * r->nf + f] != r->len[i * r->nf + g]) {
            tk_err_set(e, TK_EDATA, "schema: field '%s' must be as long as '%s' (%s)", fields[f].name, fields[g].name,
                       what);
            tk_err_where(e, "%s", r->path[i]);
            return TK_EDATA;
        }
    }
    return 0;
}

void tk_records_close(tk_records *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++)
        if (r->r && r->r[i]) tks_reader_close(r->r[i]);
    for (int f = 0; r->cols && f < r->ncols; f++) free(r->cols[f]);
    tk_data_paths_free(r->path, r->n);
    free(r->cols);
    free(r->r);
    free(r->first);
    free(r->fidx);
    free(r->len);
    free(r);
}

int tk_records_open(tk_records **out, char *const *paths, int npaths, const tk_record_field *fields, int nfields,
                    const char *what, tk_err *e) {
    *out = NULL;
    if (nfields < 1 || nfields > TK_RECORDS_MAX_FIELDS) return tk_err_set(e, TK_EINTERNAL, "records: %d fields", nfields);
    tk_records *r = calloc(1, sizeof *r);
    if (!r) return tk_err_set(e, TK_EIO, "out of memory");
    r->nf = nfields;
    for (int f = 0; f < nfields; f++) r->esize[f] = tks_dtype_size(fields[f].dtype);
    int rc = tk_data_paths(paths, npaths, &r->path, &r->n, e);
    if (!rc) {
        r->r = calloc((size_t)r->n, sizeof *r->r);
        r->first = calloc((size_t)r->n + 1, sizeof *r->first);
        r->fidx = calloc((size_t)r->n * nfields, sizeof *r->fidx);
        r->len = calloc((size_t)r->n * nfields, sizeof *r->len);
        if (!r->r || !r->first || !r->fidx || !r->len) rc = tk_err_set(e, TK_EIO, "out of memory");
    }
    for (int i = 0; !rc && i < r->n; i++) {
        if ((rc = tks_reader_open(&r->r[i], r->path[i], e))) break;
        const tks_schema *s = tks_reader_schema(r->r[i]);
        for (int f = 0; !rc && f < nfields; f++)
            rc = check_field(s, r->path[i], &fields[f], what, &r->fidx[i * nfields + f], &r->len[i * nfields + f], e);
        if (rc || (rc = check_same(r, i, fields, what, e))) break;
        r->first[i + 1] = r->first[i] + tks_reader_nrecords(r->r[i]);
        size_t mf = tks_reader_max_frame_records(r->r[i]);
        if (mf > r->cap) r->cap = mf;
        if (s->nfields > r->ncols) r->ncols = s->nfields;
    }
    if (!rc && !(r->cols = calloc((size_t)r->ncols, sizeof *r->cols))) rc = tk_err_set(e, TK_EIO, "out of memory");
    for (int f = 0; !rc && f < r->ncols; f++) {
        size_t maxb = 0;
        for (int i = 0; i < r->n; i++) {
            const tks_schema *s = tks_reader_schema(r->r[i]);
            if (f < s->nfields && s->f[f].bytes > maxb) maxb = s->f[f].bytes;
        }
        if (!(r->cols[f] = malloc(r->cap * maxb + 1))) rc = tk_err_set(e, TK_EIO, "out of memory");
    }
    if (!rc) rc = tk_records_seek(r, 0, e);
    if (rc) {
        tk_records_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

uint64_t tk_records_count(const tk_records *r) { return r->first[r->n]; }

const char *tk_records_meta(const tk_records *r) { return tks_reader_schema(r->r[0])->meta_json; }

static int load_frame(tk_records *r, tk_err *e) {
    TRY(tks_reader_read_frame(r->r[r->cur], r->frame, r->cols, &r->fn, e));
    r->fpos = 0;
    r->frame++;
    return 0;
}

int tk_records_seek(tk_records *r, uint64_t rec, tk_err *e) {
    if (rec > r->first[r->n]) return tk_err_set(e, TK_EINTERNAL, "records: seek past the end of the data");
    int f = 0;
    while (f < r->n - 1 && rec >= r->first[f + 1]) f++;
    uint64_t local = rec - r->first[f];
    if (f == r->cur && r->frame > 0 && r->fn > 0) {
        const tks_frame_info *fi = tks_reader_frame(r->r[f], r->frame - 1);
        if (local >= fi->first_record && local < fi->first_record + fi->nrecords) {
            r->fpos = (size_t)(local - fi->first_record);
            return 0;
        }
    }
    r->fn = r->fpos = 0;
    r->cur = f;
    size_t nf = tks_reader_nframes(r->r[f]);
    for (size_t i = 0; i < nf; i++) {
        const tks_frame_info *fi = tks_reader_frame(r->r[f], i);
        if (local < fi->first_record + fi->nrecords) {
            r->frame = i;
            TRY(load_frame(r, e));
            r->fpos = (size_t)(local - fi->first_record);
            return 0;
        }
    }
    r->frame = nf; // at the end of this file
    return 0;
}

int tk_records_next(tk_records *r, size_t max, const void **cols, size_t *n, const char **file,
                    uint64_t *rec_in_file, tk_err *e) {
    *n = 0;
    while (r->fpos == r->fn) {
        while (r->cur < r->n && r->frame >= tks_reader_nframes(r->r[r->cur])) {
            r->cur++;
            r->frame = 0;
        }
        if (r->cur >= r->n) return 0;
        TRY(load_frame(r, e));
    }
    size_t take = r->fn - r->fpos < max ? r->fn - r->fpos : max;
    for (int f = 0; f < r->nf; f++) {
        const int k = r->cur * r->nf + f;
        cols[f] = (const char *)r->cols[r->fidx[k]] + r->fpos * r->esize[f] * (size_t)r->len[k];
    }
    if (file) *file = r->path[r->cur];
    if (rec_in_file) *rec_in_file = tks_reader_frame(r->r[r->cur], r->frame - 1)->first_record + r->fpos;
    r->fpos += take;
    *n = take;
    return 0;
}

int64_t tk_records_len(const tk_records *r, int f) { return r->len[r->cur * r->nf + f]; }
