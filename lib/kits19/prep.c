// prep kits19: every case of a KiTS19 data directory to .tks records (train.tks, eval.tks) and the
// reference's .npy pairs, with its split (evaluation_cases.txt) and its check (checksum.json: the
// md5 of each .npy file). Nothing is renamed into place before every case has passed.
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/afile.h"
#include "kits19/kits19.h"
#include "kits19/md5.h"

int kits19_schema(tks_schema *s, const char *split, tk_err *e) {
    memset(s, 0, sizeof *s);
    static const struct {
        const char *name;
        tks_dtype t;
        int ndim;
        int64_t dim0;
    } f[] = {{"case", TKS_I32, 0, 0}, {"shape", TKS_I32, 1, 3}, {"z", TKS_I32, 0, 0},
             {"image", TKS_F32, 1, TKS_RAGGED}, {"label", TKS_U8, 1, TKS_RAGGED}};
    s->nfields = 5;
    for (int i = 0; i < 5; i++) {
        snprintf(s->f[i].name, sizeof s->f[i].name, "%s", f[i].name);
        s->f[i].dtype = f[i].t;
        s->f[i].ndim = f[i].ndim;
        s->f[i].shape[0] = f[i].dim0;
    }
    snprintf(s->meta_json, sizeof s->meta_json,
             "{\"dataset\": \"kits19\", \"split\": \"%s\", \"spacing\": [1.6, 1.2, 1.2], \"clip\": [-79, 304], "
             "\"mean\": 101, \"std\": 76.9, \"min_shape\": [%d, %d, %d], \"layout\": \"a case is its records in "
             "z order; image and label hold the D-slices z .. z+n-1 of shape (H, W), C order\"}",
             split, KITS19_MIN_SHAPE, KITS19_MIN_SHAPE, KITS19_MIN_SHAPE);
    return tks_schema_finish(s, e);
}

// ---- the evaluation list and the checksums ---------------------------------------------------
void kits19_eval_list_free(kits19_eval_list *l) {
    for (int i = 0; i < l->n; i++) free(l->key[i]);
    free(l->key);
    free(l->line);
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

int kits19_eval_list_load(kits19_eval_list *l, const char *path, tk_err *e) {
    memset(l, 0, sizeof *l);
    if (!path) {
        l->key = calloc(KITS19_EVAL_CASES, sizeof *l->key);
        l->line = calloc(KITS19_EVAL_CASES, sizeof *l->line);
        if (!l->key || !l->line) return tk_err_errno(e, ENOMEM, "out of memory");
        for (int i = 0; i < KITS19_EVAL_CASES; i++, l->n++) {
            if (!(l->key[i] = strdup(kits19_eval_cases[i]))) return tk_err_errno(e, ENOMEM, "out of memory");
            l->line[i] = i + 1;
        }
        return 0;
    }
    FILE *f = fopen(path, "r");
    if (!f) return tk_err_errno(e, errno, "%s: cannot open the evaluation list", path);
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, cap_n = 0, rc = 0;
    while (!rc && (len = getline(&buf, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && buf[len - 1] == '\n') buf[--len] = 0;
        if (len == 0) continue; // an empty line names no case
        if (l->n == cap_n) {
            cap_n = cap_n ? 2 * cap_n : 64;
            char **k = realloc(l->key, (size_t)cap_n * sizeof *k);
            if (k) l->key = k;
            int *ln = k ? realloc(l->line, (size_t)cap_n * sizeof *ln) : NULL;
            if (ln) l->line = ln;
            if (!k || !ln) rc = tk_err_errno(e, ENOMEM, "out of memory");
        }
        if (!rc && !(l->key[l->n] = strdup(buf))) rc = tk_err_errno(e, ENOMEM, "out of memory");
        if (!rc) l->line[l->n++] = lineno;
    }
    if (!rc && ferror(f)) rc = tk_err_errno(e, errno, "%s: read error", path);
    free(buf);
    fclose(f);
    return rc;
}

int kits19_checksum_load(json_t **out, const char *path, tk_err *e) {
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        if (!file_exists(path)) return tk_err_errno(e, errno, "%s: cannot open the checksum file", path);
        tk_err_set(e, TK_EDATA, "not JSON: %s", je.text);
        return tk_err_where(e, "%s: line %d", path, je.line);
    }
    const char *k;
    json_t *v;
    if (!json_is_object(j)) {
        json_decref(j);
        tk_err_set(e, TK_EDATA, "expected a JSON object of file name -> md5");
        return tk_err_where(e, "%s", path);
    }
    json_object_foreach(j, k, v) {
        const char *h = json_string_value(v);
        size_t nh = json_is_string(v) ? json_string_length(v) : 0, x = 0;
        while (x < nh && isxdigit((unsigned char)h[x])) x++;
        if (nh != 32 || x != 32) {
            tk_err_set(e, TK_EDATA, "the md5 of '%s' is not 32 hex digits", k);
            json_decref(j);
            return tk_err_where(e, "%s", path);
        }
    }
    *out = j;
    return 0;
}

// One produced file against the checksums: its entry must exist and match; it is then removed,
// so what is left at the end was listed but not produced.
static int checksum_check(json_t *sums, const char *src, const char *name, const char *md5, tk_err *e) {
    json_t *v = json_object_get(sums, name);
    if (!v) {
        tk_err_set(e, TK_EDATA, "%s is not listed (the file lists what the reference's preprocessing writes)", name);
        return tk_err_where(e, "%s", src);
    }
    if (strcasecmp(json_string_value(v), md5) != 0) {
        tk_err_set(e, TK_EDATA, "%s has md5 %s, the checksum file says %s", name, md5, json_string_value(v));
        tk_err_hint(e, "the input differs from the one the checksums were made from");
        return tk_err_where(e, "%s", src);
    }
    json_object_del(sums, name);
    return 0;
}

// ---- .npy files ------------------------------------------------------------------------------
typedef struct {
    char (*tmp)[4200];
    char (*final)[4200];
    int n;
} staged;

static void staged_abort(staged *s) {
    for (int i = 0; i < s->n; i++) unlink(s->tmp[i]);
    s->n = 0;
}

// md5 of header + data, and (dir != NULL) the bytes written to a temporary file beside
// dir/name, renamed at the end (staged).
static int npy_out(const char *dir, const char *name, const char *descr, const int64_t shape[3], const void *data,
                   size_t bytes, staged *s, char md5[33], tk_err *e) {
    char hdr[256];
    size_t hl = kits19_npy_header(hdr, sizeof hdr, descr, shape);
    if (!hl) return tk_err_set(e, TK_EINTERNAL, "%s: NPY header too long", name);
    kits19_md5 m;
    kits19_md5_init(&m);
    kits19_md5_update(&m, hdr, hl);
    kits19_md5_update(&m, data, bytes);
    kits19_md5_hex(&m, md5);
    if (!dir) return 0;
    int i = s->n;
    snprintf(s->final[i], sizeof s->final[i], "%s/%s", dir, name);
    snprintf(s->tmp[i], sizeof s->tmp[i], "%s.tmp.%d.0", s->final[i], (int)getpid());
    int fd = open(s->tmp[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return tk_err_errno(e, errno, "%s: cannot create", s->tmp[i]);
    s->n++;
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        close(fd);
        return tk_err_errno(e, errno, "%s: cannot write", s->tmp[i]);
    }
    int rc = tk_write_all(fp, hdr, hl, s->tmp[i], e);
    if (!rc) rc = tk_write_all(fp, data, bytes, s->tmp[i], e);
    if (!rc && (fflush(fp) != 0 || fsync(fileno(fp)) != 0)) rc = tk_err_errno(e, errno, "%s: cannot write", s->tmp[i]);
    if (fclose(fp) != 0 && !rc) rc = tk_err_errno(e, errno, "%s: cannot write", s->tmp[i]);
    return rc;
}

// ---- records ---------------------------------------------------------------------------------
static int append_case(tks_writer *w, int id, const kits19_case *c, size_t record_bytes, tk_err *e) {
    size_t plane = (size_t)c->shape[1] * (size_t)c->shape[2];
    const size_t most = ((size_t)64 << 20) - 64; // a .tks record's limit, less the fixed fields
    size_t budget = record_bytes ? record_bytes : KITS19_SLAB_BYTES;
    if (budget > most) budget = most;
    if (plane * 5 > most)
        return tk_err_set(e, TK_EDATA, "a slice of %lld x %lld voxels does not fit a .tks record (64 MiB)",
                          (long long)c->shape[1], (long long)c->shape[2]);
    int64_t slab = (int64_t)(budget / (plane * 5));
    if (slab < 1) slab = 1;
    int32_t shape[3] = {(int32_t)c->shape[0], (int32_t)c->shape[1], (int32_t)c->shape[2]};
    for (int64_t z = 0; z < c->shape[0]; z += slab) {
        int64_t n = c->shape[0] - z < slab ? c->shape[0] - z : slab;
        int32_t z32 = (int32_t)z;
        uint64_t off_i[2] = {0, (uint64_t)n * plane * sizeof(float)}, off_l[2] = {0, (uint64_t)n * plane};
        tks_colref cols[5] = {{&id, NULL}, {shape, NULL}, {&z32, NULL},
                              {c->image + (size_t)z * plane, off_i}, {c->label + (size_t)z * plane, off_l}};
        TRY(tks_writer_append_ref(w, cols, 1, e));
    }
    return 0;
}

// *made: whether it was created here (a failed run removes it again when it is empty)
static int make_dir(const char *d, int *made, tk_err *e) {
    *made = mkdir(d, 0755) == 0;
    if (!*made && errno != EEXIST) return tk_err_errno(e, errno, "%s: cannot create", d);
    return 0;
}

static int write_checksums(const char *path, const kits19_prep_stats *st, tk_afile *af, tk_err *e) {
    json_t *o = json_object();
    for (int i = 0; i < st->cases; i++) {
        char n[80];
        snprintf(n, sizeof n, "%s_x.npy", st->info[i].name);
        json_object_set_new(o, n, json_string(st->info[i].md5_x));
        snprintf(n, sizeof n, "%s_y.npy", st->info[i].name);
        json_object_set_new(o, n, json_string(st->info[i].md5_y));
    }
    char *text = json_dumps(o, JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text) return tk_err_set(e, TK_EINTERNAL, "cannot encode the checksums");
    int rc = tk_afile_open(af, path, e);
    if (!rc) rc = tk_write_all(af->fp, text, strlen(text), path, e);
    if (!rc) rc = tk_write_all(af->fp, "\n", 1, path, e);
    free(text);
    return rc;
}

void kits19_prep_stats_free(kits19_prep_stats *st) {
    free(st->info);
    st->info = NULL;
}

int kits19_prep(const kits19_prep_opts *o, kits19_prep_stats *st, tk_err *e) {
    memset(st, 0, sizeof *st);
    kits19_list cases;
    TRY(kits19_list_cases(o->data_dir, &cases, e));
    st->skipped = cases.skipped;
    kits19_eval_list ev = {0};
    json_t *sums = NULL;
    staged npy = {0};
    tks_writer *w[2] = {NULL, NULL}; // train, eval
    tk_afile af = {0};
    char path[4096];
    int made_npy = 0, made_out = 0, rc = 0, *is_eval = calloc((size_t)cases.n + 1, sizeof(int));
    st->info = calloc((size_t)cases.n + 1, sizeof *st->info);
    if (!is_eval || !st->info) rc = tk_err_errno(e, ENOMEM, "out of memory");

    // the split: every listed case must be there (the reference would train on fewer eval cases)
    const char *evp = o->eval_cases;
    snprintf(path, sizeof path, "%s/evaluation_cases.txt", o->data_dir);
    if (!evp && file_exists(path)) evp = path;
    snprintf(st->eval_source, sizeof st->eval_source, "%s", evp ? evp : "built-in");
    if (!rc) rc = kits19_eval_list_load(&ev, evp, e);
    for (int i = 0; i < ev.n && !rc; i++) {
        int found = 0;
        for (int c = 0; c < cases.n; c++)
            if (strcmp(kits19_case_key(cases.names[c]), ev.key[i]) == 0) is_eval[c] = found = 1;
        if (!found) {
            tk_err_set(e, TK_EDATA, "case '%s' is listed for evaluation but %s has no case_%s", ev.key[i],
                       o->data_dir, ev.key[i]);
            if (!evp) tk_err_hint(e, "the reference's 42 evaluation cases are built in; give --eval-cases FILE "
                                  "for another split");
            rc = tk_err_where(e, "%s: line %d", evp ? evp : "evaluation cases (built in)", ev.line[i]);
        }
    }

    const char *ckp = o->checksum;
    snprintf(path, sizeof path, "%s/checksum.json", o->data_dir);
    if (!ckp && file_exists(path)) ckp = path;
    if (ckp) snprintf(st->checksum_source, sizeof st->checksum_source, "%s", ckp);
    if (!rc && ckp) rc = kits19_checksum_load(&sums, ckp, e);
    if (!rc && sums) st->checksum_entries = (int)json_object_size(sums);

    if (!rc && o->npy_dir) {
        rc = make_dir(o->npy_dir, &made_npy, e);
        npy.tmp = calloc(2 * (size_t)cases.n + 1, sizeof *npy.tmp);
        npy.final = calloc(2 * (size_t)cases.n + 1, sizeof *npy.final);
        if (!rc && (!npy.tmp || !npy.final)) rc = tk_err_errno(e, ENOMEM, "out of memory");
    }
    if (!rc && o->out_dir) {
        rc = make_dir(o->out_dir, &made_out, e);
        static const char *split[2] = {"train", "eval"};
        tks_writer_opts wo = {.zstd_level = 1, .threads = 1};
        for (int s = 0; s < 2 && !rc; s++) {
            tks_schema sc;
            rc = kits19_schema(&sc, split[s], e);
            snprintf(path, sizeof path, "%s/%s.tks", o->out_dir, split[s]);
            if (!rc) rc = tks_writer_open(&w[s], path, &sc, &wo, e);
        }
    }

    // Cases are read and resampled a group at a time, one thread each (the resampling's own
    // parallel loops then run on that thread: OpenMP does not nest by default); what follows (the
    // .npy files, checksums, records) goes in case order, so the output is the same for any thread
    // count and the first bad case in name order is the one reported.
    int group = omp_get_max_threads();
    kits19_case *ks = calloc((size_t)group, sizeof *ks);
    int *krc = calloc((size_t)group, sizeof *krc);
    tk_err *kerr = calloc((size_t)group, sizeof *kerr);
    if (!rc && (!ks || !krc || !kerr)) rc = tk_err_errno(e, ENOMEM, "out of memory");
    for (int c = 0; c < cases.n && !rc; c++) {
        int slot = c % group;
        if (slot == 0) {
            int m = cases.n - c < group ? cases.n - c : group;
#pragma omp parallel for schedule(dynamic, 1)
            for (int j = 0; j < m; j++) {
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", o->data_dir, cases.names[c + j]);
                krc[j] = kits19_case_load(p, &ks[j], &kerr[j]);
            }
            for (int j = m; j < group; j++) krc[j] = -1; // not loaded: nothing to free
        }
        kits19_case_info *in = &st->info[c];
        snprintf(in->name, sizeof in->name, "%s", cases.names[c]);
        in->id = cases.ids[c];
        in->eval = is_eval[c];
        if (krc[slot]) {
            *e = kerr[slot];
            rc = krc[slot];
            break;
        }
        kits19_case k = ks[slot];
        krc[slot] = -1; // taken: freed below
        memcpy(in->shape, k.shape, sizeof k.shape);
        size_t n = (size_t)k.shape[0] * (size_t)k.shape[1] * (size_t)k.shape[2];
        char nx[80], ny[80];
        snprintf(nx, sizeof nx, "%s_x.npy", in->name);
        snprintf(ny, sizeof ny, "%s_y.npy", in->name);
        rc = npy_out(o->npy_dir, nx, "<f4", k.shape, k.image, n * sizeof(float), &npy, in->md5_x, e);
        if (!rc) rc = npy_out(o->npy_dir, ny, "|u1", k.shape, k.label, n, &npy, in->md5_y, e);
        if (!rc && sums) rc = checksum_check(sums, ckp, nx, in->md5_x, e);
        if (!rc && sums) rc = checksum_check(sums, ckp, ny, in->md5_y, e);
        if (!rc && w[0]) rc = append_case(w[in->eval], in->id, &k, o->record_bytes, e);
        kits19_case_free(&k);
        if (rc) break;
        st->cases++;
        st->eval += in->eval;
        st->train += !in->eval;
        st->voxels += n;
        if (o->progress) o->progress(o->progress_ctx, (uint64_t)st->cases);
    }
    for (int j = 0; ks && krc && j < group; j++) // cases of the last group loaded after an error
        if (krc[j] == 0) kits19_case_free(&ks[j]);
    free(ks);
    free(krc);
    free(kerr);
    if (!rc && sums && json_object_size(sums)) {
        const char *k = json_object_iter_key(json_object_iter(sums));
        tk_err_set(e, TK_EDATA, "%s is listed but not produced (%zu listed files missing; the reference checks "
                   "that the counts agree)", k, json_object_size(sums));
        rc = tk_err_where(e, "%s", ckp);
    }
    if (!rc && o->write_checksum) rc = write_checksums(o->write_checksum, st, &af, e);

    // commit: the record files, then the .npy files, then the checksum file
    char committed[2][4200] = {"", ""};
    for (int s = 0; s < 2 && w[s]; s++) {
        if (!rc) {
            snprintf(committed[s], sizeof committed[s], "%s/%s.tks", o->out_dir, s ? "eval" : "train");
            rc = tks_writer_close(w[s], e);
            if (rc) committed[s][0] = 0;
        } else {
            tks_writer_abort(w[s]);
        }
        w[s] = NULL;
    }
    int renamed = 0;
    while (!rc && renamed < npy.n) {
        if (rename(npy.tmp[renamed], npy.final[renamed]) != 0)
            rc = tk_err_errno(e, errno, "%s: cannot rename", npy.tmp[renamed]);
        else renamed++;
    }
    if (!rc && npy.n) rc = tk_fsync_dir_of(npy.final[0], e);
    if (!rc && o->write_checksum) rc = tk_afile_commit(&af, e);
    if (rc) {
        tk_afile_abort(&af);
        for (int i = 0; i < renamed; i++) unlink(npy.final[i]);
        staged_abort(&npy);
        for (int s = 0; s < 2; s++)
            if (committed[s][0]) unlink(committed[s]);
        if (made_npy) rmdir(o->npy_dir);
        if (made_out) rmdir(o->out_dir);
    }
    free(npy.tmp);
    free(npy.final);
    free(is_eval);
    json_decref(sums);
    kits19_eval_list_free(&ev);
    kits19_list_free(&cases);
    return rc;
}
