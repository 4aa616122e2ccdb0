// One KiTS19 case from its NIfTI files to the preprocessed volumes, and the list of cases of a
// data directory (the reference's choices: lib/kits19/kits19.h).
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kits19/kits19.h"
#include "nifti/nifti.h"

static int path_of(char *buf, size_t cap, const char *dir, const char *name, tk_err *e) {
    if ((size_t)snprintf(buf, cap, "%s/%s", dir, name) >= cap)
        return tk_err_set(e, TK_EUSAGE, "%s/%s: path too long", dir, name);
    return 0;
}

// A NIfTI volume as the reference reads it: three axes (nibabel's array then has three).
static int check_3d(const tk_nifti *n, const char *path, tk_err *e) {
    if (n->ndim != 3) {
        tk_err_set(e, TK_EDATA, "a %d-dimensional volume; a KiTS19 case is 3-D (dim[0] = 3)", n->ndim);
        return tk_err_where(e, "%s", path);
    }
    return 0;
}

// Label volume (nibabel's get_fdata, as float) -> uint8, refusing anything but 0, 1, 2 (the
// reference's astype(np.uint8) would wrap or truncate such a value without a word).
static int labels_u8(const float *v, const tk_nifti *n, uint8_t *out, const char *path, tk_err *e) {
    for (size_t i = 0; i < n->nvox; i++) {
        float x = v[i];
        if (x == 0.0f || x == 1.0f || x == 2.0f) {
            out[i] = (uint8_t)x;
            continue;
        }
        int64_t a = (int64_t)(i % (size_t)n->dim[1]), b = (int64_t)(i / (size_t)n->dim[1] % (size_t)n->dim[2]),
                c = (int64_t)(i / ((size_t)n->dim[1] * (size_t)n->dim[2]));
        tk_err_set(e, TK_EDATA, "voxel (%lld, %lld, %lld) has label %g; KiTS19 labels are 0 (background), "
                   "1 (kidney) and 2 (tumor)", (long long)a, (long long)b, (long long)c, (double)x);
        return tk_err_where(e, "%s", path);
    }
    return 0;
}

void kits19_case_free(kits19_case *c) {
    free(c->image);
    free(c->label);
    c->image = NULL;
    c->label = NULL;
}

// Resample (image and label), normalize the image, pad both; img/lab are C-order (D, H, W). On
// success c owns C-order padded volumes.
static int preprocess(const float *img, const uint8_t *lab, const int64_t shape[3], const double spacing[3],
                      kits19_case *c, tk_err *e) {
    int64_t rs[3], before[3];
    TRY(kits19_new_shape(spacing, shape, rs, e));
    size_t n = (size_t)rs[0] * (size_t)rs[1] * (size_t)rs[2];
    float *ri = malloc(n * sizeof(float));
    uint8_t *rl = malloc(n);
    int rc = !ri || !rl ? tk_err_errno(e, ENOMEM, "out of memory (%zu voxels)", n) : 0;
    if (!rc) rc = kits19_resample_linear(img, shape, ri, rs, e);
    if (!rc) rc = kits19_resample_nearest(lab, shape, rl, rs, e);
    if (!rc) {
        kits19_normalize(ri, n);
        kits19_pad_shape(rs, c->shape, before);
        size_t np = (size_t)c->shape[0] * (size_t)c->shape[1] * (size_t)c->shape[2];
        if (np == n) { // nothing to pad: keep the buffers
            c->image = ri, c->label = rl;
            return 0;
        }
        c->image = malloc(np * sizeof(float));
        c->label = malloc(np);
        if (!c->image || !c->label) rc = tk_err_errno(e, ENOMEM, "out of memory (%zu voxels)", np);
        else {
            kits19_pad_edge(ri, rs, c->image, c->shape, before, sizeof(float));
            kits19_pad_edge(rl, rs, c->label, c->shape, before, 1);
        }
    }
    free(ri);
    free(rl);
    if (rc) kits19_case_free(c);
    return rc;
}

// NIfTI order -> a new C-order buffer (esize bytes a voxel); NULL when memory runs out.
static void *c_order(const void *buf, const int64_t shape[3], size_t esize) {
    void *c = malloc((size_t)shape[0] * (size_t)shape[1] * (size_t)shape[2] * esize);
    if (c) kits19_to_c_order(buf, shape, c, esize);
    return c;
}

int kits19_case_load(const char *case_dir, kits19_case *c, tk_err *e) {
    char ip[4096], lp[4096];
    memset(c, 0, sizeof *c);
    TRY(path_of(ip, sizeof ip, case_dir, "imaging.nii.gz", e));
    TRY(path_of(lp, sizeof lp, case_dir, "segmentation.nii.gz", e));
    struct stat st;
    if (stat(lp, &st) != 0) { // before reading the image: KiTS19's test cases have none
        if (errno != ENOENT) return tk_err_errno(e, errno, "%s: cannot read", lp);
        tk_err_set(e, TK_EDATA, "the case has no segmentation (every case of the training set has one)");
        return tk_err_where(e, "%s", lp);
    }
    tk_nifti *img = NULL, *lab = NULL;
    float *fi = NULL, *fl = NULL;
    uint8_t *l8 = NULL;
    int rc = tk_nifti_read(ip, &img, e);
    if (!rc) rc = check_3d(img, ip, e);
    if (!rc) rc = tk_nifti_read(lp, &lab, e);
    if (!rc) rc = check_3d(lab, lp, e);
    if (!rc && (img->dim[1] != lab->dim[1] || img->dim[2] != lab->dim[2] || img->dim[3] != lab->dim[3])) {
        tk_err_set(e, TK_EDATA, "segmentation is %lld x %lld x %lld but its image %s is %lld x %lld x %lld",
                   (long long)lab->dim[1], (long long)lab->dim[2], (long long)lab->dim[3], ip,
                   (long long)img->dim[1], (long long)img->dim[2], (long long)img->dim[3]);
        rc = tk_err_where(e, "%s", lp);
    }
    if (!rc) {
        if (!(fl = malloc(lab->nvox * sizeof(float))) || !(l8 = malloc(lab->nvox)))
            rc = tk_err_errno(e, ENOMEM, "out of memory (%zu voxels)", lab->nvox);
    }
    if (!rc) rc = tk_nifti_to_f32(lab, fl, e);
    if (!rc) rc = labels_u8(fl, lab, l8, lp, e);
    free(fl);
    tk_nifti_free(lab);
    if (!rc && !(fi = malloc(img->nvox * sizeof(float))))
        rc = tk_err_errno(e, ENOMEM, "out of memory (%zu voxels)", img->nvox);
    if (!rc) rc = tk_nifti_to_f32(img, fi, e);
    int64_t shape[3] = {0, 0, 0};
    double spacing[3] = {0, 0, 0};
    if (!rc) {
        memcpy(shape, img->dim + 1, sizeof shape);
        memcpy(spacing, img->pixdim + 1, sizeof spacing);
        tk_nifti_free(img);
        img = NULL;
    }
    float *ci = rc ? NULL : c_order(fi, shape, sizeof(float));
    free(fi);
    fi = NULL;
    uint8_t *cl = rc || !ci ? NULL : c_order(l8, shape, 1);
    if (!rc && !cl) rc = tk_err_errno(e, ENOMEM, "out of memory (%zu voxels)", (size_t)(shape[0] * shape[1] * shape[2]));
    if (!rc) {
        rc = preprocess(ci, cl, shape, spacing, c, e);
        if (rc && !e->where[0]) tk_err_where(e, "%s", ip);
    }
    tk_nifti_free(img);
    free(fi);
    free(l8);
    free(ci);
    free(cl);
    return rc;
}

// ---- the case list ----------------------------------------------------------------------------
const char *kits19_case_key(const char *name) {
    const char *u = strrchr(name, '_');
    return u ? u + 1 : name;
}

void kits19_list_free(kits19_list *l) {
    for (int i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
    free(l->ids);
    memset(l, 0, sizeof *l);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int kits19_list_cases(const char *dir, kits19_list *l, tk_err *e) {
    memset(l, 0, sizeof *l);
    DIR *d = opendir(dir);
    if (!d) return tk_err_errno(e, errno, "%s: cannot open the data directory", dir);
    int cap = 0, rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        if (!strstr(de->d_name, "case")) continue;
        char p[4096];
        struct stat st;
        // directories only: evaluation_cases.txt (the reference keeps it elsewhere) names "case" too
        if (path_of(p, sizeof p, dir, de->d_name, e) || stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
            tk_err_clear(e);
            continue;
        }
        if (l->n == cap) {
            cap = cap ? 2 * cap : 256;
            char **nn = realloc(l->names, (size_t)cap * sizeof *nn);
            if (nn) l->names = nn;
            if (!nn) rc = tk_err_errno(e, ENOMEM, "out of memory");
        }
        if (!rc && !(l->names[l->n] = strdup(de->d_name))) rc = tk_err_errno(e, ENOMEM, "out of memory");
        if (!rc) l->n++;
    }
    closedir(d);
    if (!rc && l->n) qsort(l->names, (size_t)l->n, sizeof *l->names, by_name); // Python's sorted()
    if (!rc && !(l->ids = malloc(((size_t)l->n + 1) * sizeof(int)))) rc = tk_err_errno(e, ENOMEM, "out of memory");
    for (int i = 0; i < l->n && !rc; i++) {
        // the reference's int(case.split("_")[1])
        const char *s = strchr(l->names[i], '_');
        char *end = NULL;
        long id = s ? strtol(s + 1, &end, 10) : -1;
        if (!s || end == s + 1 || (*end && *end != '_') || id < 0 || id > 99999999) {
            tk_err_set(e, TK_EDATA, "a directory named like a case has no case number after its first '_' "
                       "(expected case_XXXXX)");
            rc = tk_err_where(e, "%s/%s", dir, l->names[i]);
        }
        l->ids[i] = (int)id;
    }
    int kept = 0;
    for (int i = 0; i < l->n && !rc; i++) {
        if (l->ids[i] >= KITS19_MAX_ID) {
            l->skipped++;
            free(l->names[i]);
            continue;
        }
        l->names[kept] = l->names[i];
        l->ids[kept++] = l->ids[i];
    }
    if (!rc) l->n = kept;
    else kits19_list_free(l);
    return rc;
}
