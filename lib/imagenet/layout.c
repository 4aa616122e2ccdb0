// ImageNet's on-disk layouts and label files (imagenet.h): synset lists, the three forms of
// validation labels, and the scan of a class-folder or flat directory into a sorted list.
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <zlib.h>

#include "imagenet/imagenet.h"

const char *const imagenet_skip_names[IMAGENET_SKIP_KINDS] = {
    "not_image", "truncated", "corrupt", "too_large", "unknown_synset", "no_label", "empty_class", "label_range"};

int imagenet_is_wnid(const char *s, size_t len) {
    if (len != 9 || s[0] != 'n') return 0;
    for (size_t i = 1; i < 9; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

static int cmp_id(const void *a, const void *b) { return strcmp(a, b); }

void imagenet_synsets_free(imagenet_synsets *s) {
    free(s->id);
    memset(s, 0, sizeof *s);
}

int imagenet_synset_index(const imagenet_synsets *s, const char *wnid) {
    const char(*p)[16] = bsearch(wnid, s->id, (size_t)s->n, sizeof *s->id, cmp_id);
    return p ? (int)(p - s->id) : -1;
}

uint32_t imagenet_synsets_crc(const imagenet_synsets *s) {
    uLong c = crc32(0, NULL, 0);
    for (int i = 0; i < s->n; i++) {
        c = crc32(c, (const Bytef *)s->id[i], (uInt)strlen(s->id[i]));
        c = crc32(c, (const Bytef *)"\n", 1);
    }
    return (uint32_t)c;
}

static int sort_unique(imagenet_synsets *s) {
    qsort(s->id, (size_t)s->n, sizeof *s->id, cmp_id);
    int k = 0;
    for (int i = 0; i < s->n; i++)
        if (k == 0 || strcmp(s->id[k - 1], s->id[i]) != 0) memmove(s->id[k++], s->id[i], sizeof *s->id);
    s->n = k;
    return 0;
}

int imagenet_synsets_from(imagenet_synsets *s, const char *const *ids, int n, tk_err *e) {
    memset(s, 0, sizeof *s);
    s->id = calloc((size_t)(n ? n : 1), sizeof *s->id);
    if (!s->id) return tk_err_errno(e, ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) snprintf(s->id[i], sizeof *s->id, "%.15s", ids[i]);
    s->n = n;
    return sort_unique(s);
}

// Line iteration over a buffer: each line without its "\r\n" / "\n"; *lineno counts from 1.
typedef struct {
    const char *p, *end;
    uint64_t lineno;
} lines;

static int next_line(lines *l, const char **s, size_t *len) {
    if (l->p >= l->end) return 0;
    const char *nl = memchr(l->p, '\n', (size_t)(l->end - l->p));
    const char *stop = nl ? nl : l->end;
    *s = l->p;
    *len = (size_t)(stop - l->p);
    if (*len && (*s)[*len - 1] == '\r') (*len)--;
    l->p = nl ? nl + 1 : l->end;
    l->lineno++;
    return 1;
}

// The first whitespace-separated word of s (len bytes): *w, *wl.
static void first_word(const char *s, size_t len, const char **w, size_t *wl) {
    size_t i = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t')) i++;
    size_t j = i;
    while (j < len && s[j] != ' ' && s[j] != '\t' && s[j] != ',') j++;
    *w = s + i;
    *wl = j - i;
}

static int blank(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t') return 0;
    return 1;
}

// Reads the first word of every non-empty line as a WordNet id, in file order.
static int parse_ids(imagenet_synsets *s, const char *buf, size_t n, const char *name, tk_err *e) {
    memset(s, 0, sizeof *s);
    lines l = {buf, buf + n, 0};
    const char *ln;
    size_t len;
    int cap = 0;
    while (next_line(&l, &ln, &len)) {
        if (blank(ln, len)) continue;
        const char *w;
        size_t wl;
        first_word(ln, len, &w, &wl);
        if (!imagenet_is_wnid(w, wl)) {
            imagenet_synsets_free(s);
            tk_err_set(e, TK_EDATA, "expected a WordNet id (n and 8 digits) at the start of the line, got '%.*s'",
                       (int)(wl > 40 ? 40 : wl), w);
            return tk_err_where(e, "%s: line %llu", name, (unsigned long long)l.lineno);
        }
        if (s->n == cap) {
            cap = cap ? 2 * cap : 1024;
            char(*ni)[16] = realloc(s->id, (size_t)cap * sizeof *ni);
            if (!ni) {
                imagenet_synsets_free(s);
                return tk_err_errno(e, ENOMEM, "out of memory");
            }
            s->id = ni;
        }
        memcpy(s->id[s->n], w, 9);
        s->id[s->n++][9] = 0;
    }
    if (!s->n) return tk_err_set(e, TK_EDATA, "%s: no WordNet ids in the file", name);
    return 0;
}

int imagenet_synsets_parse(imagenet_synsets *s, const char *buf, size_t n, const char *name, tk_err *e) {
    TRY(parse_ids(s, buf, n, name, e));
    return sort_unique(s);
}

static int slurp(const char *path, char **buf, size_t *n, tk_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return tk_err_errno(e, errno, "%s: cannot open", path);
    size_t cap = 1 << 16;
    *buf = malloc(cap);
    *n = 0;
    size_t k;
    while (*buf && (k = fread(*buf + *n, 1, cap - *n, f)) > 0) {
        *n += k;
        if (*n == cap) {
            char *nb = realloc(*buf, cap *= 2);
            if (!nb) free(*buf);
            *buf = nb;
        }
    }
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (!*buf) return tk_err_errno(e, ENOMEM, "out of memory");
    if (err) {
        free(*buf);
        return tk_err_errno(e, err, "%s: read failed", path);
    }
    return 0;
}

static int load_ids(imagenet_synsets *s, const char *path, int sorted, tk_err *e) {
    char *buf;
    size_t n;
    TRY(slurp(path, &buf, &n, e));
    int rc = sorted ? imagenet_synsets_parse(s, buf, n, path, e) : parse_ids(s, buf, n, path, e);
    free(buf);
    return rc;
}

int imagenet_synsets_load(imagenet_synsets *s, const char *path, tk_err *e) { return load_ids(s, path, 1, e); }
int imagenet_synset_order_load(imagenet_synsets *s, const char *path, tk_err *e) { return load_ids(s, path, 0, e); }

// ---- label files ------------------------------------------------------------------------------
void imagenet_labels_free(imagenet_labels *l) {
    free(l->image);
    free(l->wnid);
    free(l->id);
    free(l->line);
    memset(l, 0, sizeof *l);
}

static int labels_grow(imagenet_labels *l, size_t *cap, tk_err *e) {
    if (l->n < *cap) return 0;
    size_t nc = *cap ? 2 * *cap : 4096;
    void *a = realloc(l->image, nc * sizeof *l->image), *b = a ? realloc(l->wnid, nc * sizeof *l->wnid) : NULL;
    if (a) l->image = a;
    if (b) l->wnid = b;
    void *c = b ? realloc(l->id, nc * sizeof *l->id) : NULL;
    if (c) l->id = c;
    void *d = c ? realloc(l->line, nc * sizeof *l->line) : NULL;
    if (d) l->line = d;
    if (!d) return tk_err_errno(e, ENOMEM, "out of memory");
    *cap = nc;
    return 0;
}

#define BAD_LINE(...) (tk_err_set(e, TK_EDATA, __VA_ARGS__), tk_err_where(e, "%s: line %llu", name, (unsigned long long)ln_no))

int imagenet_labels_parse(imagenet_labels *l, const char *buf, size_t n, const char *name,
                          const imagenet_synsets *order, tk_err *e) {
    memset(l, 0, sizeof *l);
    lines it = {buf, buf + n, 0};
    const char *ln;
    size_t len, cap = 0;
    int rc = 0;
    if (n >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) it.p += 3; // a UTF-8 byte order mark
    // The kind, from the first non-empty line.
    lines peek = it;
    while (next_line(&peek, &ln, &len) && blank(ln, len)) {}
    if (peek.lineno == 0 || blank(ln, len)) return tk_err_set(e, TK_EDATA, "%s: no labels in the file", name);
    const char *w;
    size_t wl;
    first_word(ln, len, &w, &wl);
    if (len >= 8 && memcmp(ln, "ImageId,", 8) == 0) {
        l->kind = IMAGENET_LABELS_KAGGLE;
        it = peek; // past the header
    } else if (imagenet_is_wnid(w, wl)) {
        l->kind = IMAGENET_LABELS_LIST;
    } else if (wl > 0 && w[0] >= '0' && w[0] <= '9') {
        l->kind = IMAGENET_LABELS_DEVKIT;
        if (!order) {
            tk_err_set(e, TK_EUSAGE, "%s holds ILSVRC2012_IDs (the devkit's ground truth): give the devkit's synset order "
                       "with --devkit-synsets FILE", name);
            return tk_err_hint(e, "a list of the 1000 WordNet ids in ILSVRC2012_ID order, from the devkit's meta.mat (see prep(1))");
        }
    } else {
        tk_err_set(e, TK_EDATA, "not a label file: expected an \"ImageId,PredictionString\" header, WordNet ids or ILSVRC2012_IDs");
        return tk_err_where(e, "%s: line %llu", name, (unsigned long long)peek.lineno);
    }
    while (!rc && next_line(&it, &ln, &len)) {
        uint64_t ln_no = it.lineno;
        if (blank(ln, len)) continue;
        if ((rc = labels_grow(l, &cap, e))) break;
        size_t k = l->n;
        l->image[k][0] = 0;
        l->wnid[k][0] = 0;
        l->id[k] = 0;
        l->line[k] = ln_no;
        if (l->kind == IMAGENET_LABELS_KAGGLE) {
            const char *comma = memchr(ln, ',', len);
            if (!comma || comma == ln || (size_t)(comma - ln) >= sizeof *l->image) {
                rc = BAD_LINE("expected ImageId,PredictionString");
                break;
            }
            memcpy(l->image[k], ln, (size_t)(comma - ln));
            l->image[k][comma - ln] = 0;
            first_word(comma + 1, len - (size_t)(comma + 1 - ln), &w, &wl);
            if (!imagenet_is_wnid(w, wl)) {
                rc = BAD_LINE("expected a WordNet id first in the PredictionString, got '%.*s'", (int)(wl > 40 ? 40 : wl), w);
                break;
            }
            memcpy(l->wnid[k], w, 9);
            l->wnid[k][9] = 0;
        } else if (l->kind == IMAGENET_LABELS_LIST) {
            first_word(ln, len, &w, &wl);
            if (!imagenet_is_wnid(w, wl) || !blank(w + wl, len - (size_t)(w + wl - ln))) {
                rc = BAD_LINE("expected one WordNet id on the line");
                break;
            }
            memcpy(l->wnid[k], w, 9);
            l->wnid[k][9] = 0;
        } else {
            first_word(ln, len, &w, &wl);
            long v = 0;
            size_t i = 0;
            for (; i < wl && i < 9 && w[i] >= '0' && w[i] <= '9'; i++) v = v * 10 + (w[i] - '0');
            if (i == 0 || i != wl || !blank(w + wl, len - (size_t)(w + wl - ln)) || v < 1 || v > order->n) {
                rc = BAD_LINE("expected an ILSVRC2012_ID in 1..%d", order->n);
                break;
            }
            l->id[k] = (int)v;
            memcpy(l->wnid[k], order->id[v - 1], sizeof *l->wnid);
        }
        l->n++;
    }
    if (rc) imagenet_labels_free(l);
    return rc;
}

int imagenet_labels_load(imagenet_labels *l, const char *path, const imagenet_synsets *order, tk_err *e) {
    char *buf;
    size_t n;
    TRY(slurp(path, &buf, &n, e));
    int rc = imagenet_labels_parse(l, buf, n, path, order, e);
    free(buf);
    return rc;
}

// ---- directory scans ---------------------------------------------------------------------------
void imagenet_items_free(imagenet_items *it) {
    for (size_t i = 0; i < it->n; i++) free(it->v[i].path);
    free(it->v);
    memset(it, 0, sizeof *it);
}

static int is_image_name(const char *s) {
    const char *dot = strrchr(s, '.');
    return dot && (!strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".png"));
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The sorted names in dir: directories (dirs = 1) or regular files (dirs = 0).
static int list_dir(const char *dir, int dirs, char ***names, size_t *n, tk_err *e) {
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return tk_err_errno(e, errno, "%s: cannot open the directory", dir);
    size_t cap = 0;
    struct dirent *de;
    int rc = 0;
    char path[4352];
    while (!rc && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        int isdir = de->d_type == DT_DIR, isreg = de->d_type == DT_REG;
        if (de->d_type == DT_UNKNOWN || de->d_type == DT_LNK) { // ask stat (follows links)
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            if (stat(path, &st) != 0) continue;
            isdir = S_ISDIR(st.st_mode);
            isreg = S_ISREG(st.st_mode);
        }
        if (dirs ? !isdir : !isreg) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            char **nn = realloc(*names, cap * sizeof *nn);
            if (!nn) {
                rc = tk_err_errno(e, ENOMEM, "out of memory");
                break;
            }
            *names = nn;
        }
        if (!((*names)[*n] = strdup(de->d_name))) rc = tk_err_errno(e, ENOMEM, "out of memory");
        else (*n)++;
    }
    closedir(d);
    if (!rc && *n) qsort(*names, *n, sizeof **names, cmp_str);
    return rc;
}

static void free_names(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

static int push(imagenet_items *it, const char *dir, const char *file, int label, int reason, tk_err *e) {
    if (it->n == it->cap) {
        size_t nc = it->cap ? 2 * it->cap : 4096;
        imagenet_item *nv = realloc(it->v, nc * sizeof *nv);
        if (!nv) return tk_err_errno(e, ENOMEM, "out of memory");
        it->v = nv;
        it->cap = nc;
    }
    size_t dl = strlen(dir), fl = strlen(file);
    char *p = malloc(dl + fl + 2);
    if (!p) return tk_err_errno(e, ENOMEM, "out of memory");
    memcpy(p, dir, dl);
    p[dl] = '/';
    memcpy(p + dl + 1, file, fl + 1);
    it->v[it->n++] = (imagenet_item){p, p + dl + 1, label, reason};
    return 0;
}

static int scan_classes(const char *dir, char **cls, size_t ncls, const imagenet_scan_opts *o, imagenet_items *it,
                        imagenet_synsets *syn, imagenet_scan_stats *st, tk_err *e) {
    int rc = 0;
    if (!o->synsets_file) rc = imagenet_synsets_from(syn, (const char *const *)cls, (int)ncls, e);
    for (size_t c = 0; c < ncls && !rc; c++) {
        char sub[4352];
        snprintf(sub, sizeof sub, "%s/%s", dir, cls[c]);
        char **files;
        size_t nf;
        if ((rc = list_dir(sub, 0, &files, &nf, e))) break;
        int label = imagenet_synset_index(syn, cls[c]);
        size_t images = 0;
        for (size_t i = 0; i < nf; i++) images += is_image_name(files[i]);
        st->ignored_files += nf - images;
        if (!images) {
            if (!o->skip_bad) rc = tk_err_set(e, TK_EDATA, "%s: a class folder with no images (.JPEG, .jpg, .png)", sub);
            else st->skipped[IMAGENET_SKIP_EMPTY_CLASS]++;
        } else if (label < 0) {
            if (!o->skip_bad)
                rc = tk_err_set(e, TK_EDATA, "%s: synset %s is not in %s", sub, cls[c], o->synsets_file);
            else st->skipped[IMAGENET_SKIP_UNKNOWN_SYNSET] += images;
        } else {
            for (size_t i = 0; i < nf && !rc; i++)
                if (is_image_name(files[i])) rc = push(it, sub, files[i], label, 0, e);
        }
        free_names(files, nf);
    }
    return rc;
}

typedef struct {
    const char *image;
    size_t entry;
} by_image;

static int cmp_by_image(const void *a, const void *b) {
    return strcmp(((const by_image *)a)->image, ((const by_image *)b)->image);
}

// One flat-folder image's label entry (or -1 with a skip reason / error).
static int flat_entry(const imagenet_labels *lab, const by_image *idx, size_t fi, size_t nfiles, const char *file) {
    if (lab->kind == IMAGENET_LABELS_LIST) return fi < lab->n && nfiles == lab->n ? (int)fi : -1;
    char stem[64];
    const char *dot = strrchr(file, '.');
    size_t sl = dot ? (size_t)(dot - file) : strlen(file);
    if (sl >= sizeof stem) return -1;
    memcpy(stem, file, sl);
    stem[sl] = 0;
    if (lab->kind == IMAGENET_LABELS_KAGGLE) {
        by_image key = {stem, 0}, *hit = bsearch(&key, idx, lab->n, sizeof *idx, cmp_by_image);
        return hit ? (int)hit->entry : -1;
    }
    unsigned long v; // devkit: ILSVRC2012_val_00000001 is line 1
    char tail;
    if (sscanf(stem, "ILSVRC2012_val_%8lu%c", &v, &tail) != 1 || v < 1 || v > lab->n) return -1;
    return (int)(v - 1);
}

static int scan_flat(const char *dir, const imagenet_scan_opts *o, imagenet_items *it, imagenet_synsets *syn,
                     imagenet_scan_stats *st, tk_err *e) {
    if (!o->labels_file) {
        tk_err_set(e, TK_EUSAGE, "%s has no class folders (nXXXXXXXX/): give its labels with --labels FILE", dir);
        return tk_err_hint(e, "LOC_val_solution.csv, imagenet_2012_validation_synset_labels.txt, or the devkit's "
                              "ILSVRC2012_validation_ground_truth.txt with --devkit-synsets");
    }
    imagenet_synsets order = {0};
    imagenet_labels lab = {0};
    char **files = NULL;
    size_t nf = 0;
    by_image *idx = NULL;
    int rc = 0;
    if (o->devkit_synsets) rc = imagenet_synset_order_load(&order, o->devkit_synsets, e);
    if (!rc) rc = imagenet_labels_load(&lab, o->labels_file, o->devkit_synsets ? &order : NULL, e);
    if (!rc && !o->synsets_file) { // the classes: every synset the labels name (devkit: its order)
        const imagenet_synsets *from = lab.kind == IMAGENET_LABELS_DEVKIT ? &order : NULL;
        const char **ids = malloc((from ? (size_t)from->n : lab.n) * sizeof *ids + 1);
        if (!ids) rc = tk_err_errno(e, ENOMEM, "out of memory");
        for (size_t i = 0; !rc && i < (from ? (size_t)from->n : lab.n); i++) ids[i] = from ? from->id[i] : lab.wnid[i];
        if (!rc) rc = imagenet_synsets_from(syn, ids, (int)(from ? (size_t)from->n : lab.n), e);
        free(ids);
    }
    if (!rc) rc = list_dir(dir, 0, &files, &nf, e);
    size_t nimg = 0;
    for (size_t i = 0; !rc && i < nf; i++) {
        if (is_image_name(files[i])) files[nimg++] = files[i];
        else free(files[i]), st->ignored_files++;
    }
    if (!rc) nf = nimg; // files[] now holds the images only
    if (!rc && lab.kind == IMAGENET_LABELS_LIST && lab.n != nimg) {
        rc = tk_err_set(e, TK_EDATA, "%s has %zu labels for the %zu images in %s (one per image, in file-name order)",
                        o->labels_file, lab.n, nimg, dir);
    }
    if (!rc && lab.kind == IMAGENET_LABELS_KAGGLE) {
        if (!(idx = malloc(lab.n * sizeof *idx + 1))) rc = tk_err_errno(e, ENOMEM, "out of memory");
        for (size_t i = 0; !rc && i < lab.n; i++) idx[i] = (by_image){lab.image[i], i};
        if (!rc) qsort(idx, lab.n, sizeof *idx, cmp_by_image);
        for (size_t i = 1; !rc && i < lab.n; i++)
            if (strcmp(idx[i - 1].image, idx[i].image) == 0) {
                size_t a = idx[i - 1].entry > idx[i].entry ? idx[i - 1].entry : idx[i].entry;
                tk_err_set(e, TK_EDATA, "%s appears twice", idx[i].image);
                rc = tk_err_where(e, "%s: line %llu", o->labels_file, (unsigned long long)lab.line[a]);
            }
    }
    for (size_t i = 0; !rc && i < nimg; i++) {
        int k = flat_entry(&lab, idx, i, nimg, files[i]);
        if (k < 0) {
            if (!o->skip_bad) {
                rc = tk_err_set(e, TK_EDATA, "%s/%s: no label for it in %s", dir, files[i], o->labels_file);
                break;
            }
            st->skipped[IMAGENET_SKIP_NO_LABEL]++;
            continue;
        }
        int label = imagenet_synset_index(syn, lab.wnid[k]);
        if (label < 0) {
            if (!o->skip_bad) {
                tk_err_set(e, TK_EDATA, "unknown synset %s (for %s/%s; the classes are %s)", lab.wnid[k], dir, files[i],
                           o->synsets_file ? o->synsets_file : "those the labels name");
                rc = tk_err_where(e, "%s: line %llu", o->labels_file, (unsigned long long)lab.line[k]);
                break;
            }
            st->skipped[IMAGENET_SKIP_UNKNOWN_SYNSET]++;
            continue;
        }
        rc = push(it, dir, files[i], label, 0, e);
    }
    free_names(files, nf);
    free(idx);
    imagenet_labels_free(&lab);
    imagenet_synsets_free(&order);
    return rc;
}

int imagenet_scan(const char *dir_in, const imagenet_scan_opts *o, imagenet_items *it, imagenet_synsets *syn,
                  imagenet_scan_stats *st, tk_err *e) {
    char dir[4096]; // without trailing slashes, so that file names read dir/class/file
    snprintf(dir, sizeof dir, "%s", dir_in);
    for (size_t k = strlen(dir); k > 1 && dir[k - 1] == '/'; k--) dir[k - 1] = 0;
    memset(it, 0, sizeof *it);
    memset(syn, 0, sizeof *syn);
    memset(st, 0, sizeof *st);
    int rc = 0;
    if (o->synsets_file) TRY(imagenet_synsets_load(syn, o->synsets_file, e));
    char **dirs;
    size_t nd;
    if ((rc = list_dir(dir, 1, &dirs, &nd, e))) {
        imagenet_synsets_free(syn);
        return rc;
    }
    size_t ncls = 0;
    for (size_t i = 0; i < nd; i++)
        if (imagenet_is_wnid(dirs[i], strlen(dirs[i]))) dirs[ncls++] = dirs[i];
        else free(dirs[i]);
    if (ncls) {
        st->layout = 1;
        if (o->labels_file) rc = tk_err_set(e, TK_EUSAGE, "%s has class folders: their names are the labels, --labels is not used", dir);
        else rc = scan_classes(dir, dirs, ncls, o, it, syn, st, e);
    } else {
        st->layout = 2;
        rc = scan_flat(dir, o, it, syn, st, e);
    }
    free_names(dirs, ncls);
    if (!rc && !it->n) rc = tk_err_set(e, TK_EDATA, "%s: no images found", dir);
    if (rc) {
        imagenet_items_free(it);
        imagenet_synsets_free(syn);
    }
    return rc;
}
