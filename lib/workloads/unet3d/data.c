// 3D U-Net's data (unet3d.h): the "data" section, the training reader and the eval cases, from
// prep kits19's .tks records (kits19.h: a case is a run of records, each a slab of whole D-slices).
//
// The training samples are the MLPerf reference's (mlcommons/training retired_benchmarks/unet3d,
// data_loading/pytorch_loader.py), transform by transform, with our own random numbers:
//   RandBalancedCrop: with probability `oversampling` a crop around a foreground object: a class
//     drawn uniformly among the foreground classes the case holds, the connected components of
//     that class (6-connected, scipy.ndimage.label's default), the two whose bounding boxes are
//     largest (ties: the later in scan order, as a stable argsort's last two), one of them
//     uniformly; on each axis the patch then holds the box at a random place (or, where the box is
//     longer than the patch, lies at a random place inside it), shifted back inside the volume.
//     Otherwise a uniform crop whose first voxel is randrange(S - P) on each axis (the reference
//     never starts at S - P itself). A case without foreground gets the uniform crop (the
//     reference's own fallback; its np.random.choice fails before reaching it).
//   RandFlip: each axis reversed with probability 1/3 (data.flip 0: none).
//   Cast: the voxels are already float32 and uint8.
//   RandomBrightnessAugmentation: with probability brightness.prob the image times
//     1 + U(1 - factor, 1 + factor) in double, rounded to float (the reference's
//     `image * (1 + factor)`: a scale in [1.7, 2.3] for factor 0.3, kept as it is).
//   GaussianNoise: with probability noise.prob, std s = U(0, noise.std), x + (float)(s * N(0, 1)).
// The reference needs every case at least as large as the patch (its randrange of a negative
// range fails): a smaller case is TK_EDATA here, when the reader opens.
//
// Randomness: Philox blocks (seed; block, position, TK_RNG_AUGMENT, epoch), the position being the
// sample's place in the epoch (global batch i, rank r, sample k: i B + r b + k), so a sample is the
// same whatever the loader thread, the reader instance or the number of ranks. The cases' order in
// an epoch is a Fisher-Yates shuffle keyed (seed; TK_RNG_SHUFFLE, epoch, i) when data.shuffle.
//
// The training cases are read once into host memory shared by every reader of the process (a
// refcounted registry; the last set stays loaded when its last reader closes, as the engine
// closes its counting reader before its loader threads open theirs), each case's foreground
// boxes computed once there.
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/philox.h"
#include "engine/cfg.h"
#include "engine/data.h"
#include "engine/dist.h"
#include "kits19/kits19.h"
#include "tks/tks.h"
#include "workloads/unet3d/unet3d.h"

#define U3_MAX_AXIS 65535        // voxels on one axis of a case (KiTS19's after prep: a few hundred)
#define U3_MAX_VOXELS ((int64_t)1 << 31) // voxels of a case (the NIfTI reader's limit too)

// ---- the "data" section ----

static int crop_parse(json_t *root, const char *path, int crop[3], tk_err *e) {
    json_t *a = tk_cfg_get(root, "data.crop");
    if (!a || json_is_null(a)) return 0;
    const char *msg = "expected an array of 3 integers in [1, 1024] (D, H, W)";
    if (!json_is_array(a) || json_array_size(a) != 3) return tk_cfg_bad(e, path, "data.crop", msg);
    for (int i = 0; i < 3; i++) {
        json_t *x = json_array_get(a, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 1024)
            return tk_cfg_bad(e, path, "data.crop", msg);
        crop[i] = (int)json_integer_value(x);
    }
    return 0;
}

static int cfg_parse(json_t *root, const char *path, u3_data_cfg *dc, tk_err *e) {
    static const char *const keys[] = {"crop", "oversampling", "flip", "brightness", "noise", "shuffle", "note", NULL};
    static const char *const bkeys[] = {"prob", "factor", NULL}, *const nkeys[] = {"prob", "std", NULL};
    TRY(tk_cfg_keys(root, path, "data", keys, e));
    TRY(tk_cfg_keys(root, path, "data.brightness", bkeys, e));
    TRY(tk_cfg_keys(root, path, "data.noise", nkeys, e));
    TRY(crop_parse(root, path, dc->crop, e));
    TRY(tk_cfg_num_opt(root, path, "data.oversampling", 0, 1, &dc->oversampling, e));
    TRY(tk_cfg_bool_opt(root, path, "data.flip", &dc->flip, e));
    TRY(tk_cfg_num_opt(root, path, "data.brightness.prob", 0, 1, &dc->brightness_prob, e));
    TRY(tk_cfg_num_opt(root, path, "data.brightness.factor", 0, 1, &dc->brightness_factor, e));
    TRY(tk_cfg_num_opt(root, path, "data.noise.prob", 0, 1, &dc->noise_prob, e));
    TRY(tk_cfg_num_opt(root, path, "data.noise.std", 0, 100, &dc->noise_std, e));
    return tk_cfg_bool_opt(root, path, "data.shuffle", &dc->shuffle, e);
}

int u3_data_cfg_parse(json_t *data, const char *path, u3_data_cfg *dc, tk_err *e) {
    *dc = (u3_data_cfg){.crop = {128, 128, 128}, .oversampling = 0.4, .flip = 1, .brightness_prob = 0.1,
                        .brightness_factor = 0.3, .noise_prob = 0.1, .noise_std = 0.1, .shuffle = 1};
    // the section under a root of its own, so the helpers name its members $.data.KEY
    json_t *root = json_object();
    if (!root || (data && json_object_set(root, "data", data) != 0)) {
        json_decref(root);
        return tk_err_set(e, TK_EIO, "out of memory");
    }
    int rc = cfg_parse(root, path, dc, e);
    json_decref(root);
    return rc;
}

// ---- reading the cases: every record checked ----

// The fields of prep kits19's schema, by name (kits19_schema is the one definition).
typedef struct { int f[5]; } fields_at;
static int schema_check(const tks_schema *s, const char *path, fields_at *at, tk_err *e) {
    tks_schema want;
    TRY(kits19_schema(&want, "train", e));
    for (int i = 0; i < want.nfields; i++) {
        const tks_field *w = &want.f[i];
        int k = tks_schema_field(s, w->name);
        const tks_field *f = k >= 0 ? &s->f[k] : NULL;
        if (!f || f->dtype != w->dtype || f->ndim != w->ndim || (w->ndim && f->shape[0] != w->shape[0])) {
            tk_err_set(e, TK_EDATA, "not KiTS19 records: expected the fields case i32, shape i32 (3), z i32, "
                                    "image f32 (-1), label u8 (-1) (field \"%s\")", w->name);
            tk_err_where(e, "%s", path);
            return tk_err_hint(e, "make the records with prep kits19");
        }
        at->f[i] = k;
    }
    return 0;
}

// The reading state: the case whose slabs are being read, and where each case came from.
typedef struct reading {
    int rank, world;
    u3_cases *out;
    int cap;
    int *file_of;                // out->c[i] came from file file_of[i]
    int *ids, nids, capids;      // every case seen (a case twice is an error)
    // the open case
    int open, id, keep;          // keep: this rank's (its voxels are stored, in out->c[out->n - 1])
    size_t capv;                 // the voxels its buffers hold room for
    int64_t shape[3], next_z;
    const char *file;            // where the open case's last record was
    uint64_t rec;
} reading;

// TK_EDATA at record rec of file; order: the case's records are not as prep kits19 writes them.
static int bad_at(tk_err *e, const char *file, uint64_t rec, const char *what, int order) {
    tk_err_set(e, TK_EDATA, "%s", what);
    tk_err_where(e, "%s: record %llu", file, (unsigned long long)rec);
    return order ? tk_err_hint(e, "make the records again with prep kits19 (a case is its records in z order)") : TK_EDATA;
}
static int bad(tk_err *e, const char *file, uint64_t rec, const char *what) { return bad_at(e, file, rec, what, 1); }

static int case_begin(reading *g, int id, const int64_t shape[3], int file, tk_err *e) {
    if (g->nids == g->capids) {
        int nc = g->capids ? 2 * g->capids : 64;
        int *p = realloc(g->ids, (size_t)nc * sizeof *p);
        if (!p) return tk_err_set(e, TK_EIO, "out of host memory");
        g->ids = p, g->capids = nc;
    }
    int ordinal = g->nids;
    g->ids[g->nids++] = id;
    g->open = 1, g->id = id, g->next_z = 0;
    memcpy(g->shape, shape, sizeof g->shape);
    g->keep = ordinal % g->world == g->rank;
    if (!g->keep) return 0;
    u3_cases *o = g->out;
    if (o->n == g->cap) {
        int nc = g->cap ? 2 * g->cap : 16;
        u3_case *c = realloc(o->c, (size_t)nc * sizeof *c);
        int *f = c ? realloc(g->file_of, (size_t)nc * sizeof *f) : NULL;
        if (c) o->c = c;
        if (f) g->file_of = f;
        if (!c || !f) return tk_err_set(e, TK_EIO, "out of host memory");
        g->cap = nc;
    }
    o->c[o->n++] = (u3_case){.id = id, .shape = {shape[0], shape[1], shape[2]}};
    g->file_of[o->n - 1] = file;
    g->capv = 0;
    return 0;
}

// Room in the kept case for its voxels up to `need`: its buffers grow with the slabs that come (a
// record's shape alone, which may lie, allocates nothing), doubling up to the whole case (glibc
// moves large blocks by remapping them, not by copying).
static int case_room(reading *g, size_t need, tk_err *e) {
    if (need <= g->capv) return 0;
    u3_case *c = &g->out->c[g->out->n - 1];
    size_t all = (size_t)c->shape[0] * (size_t)c->shape[1] * (size_t)c->shape[2];
    size_t cap = g->capv * 2 > need ? g->capv * 2 : need;
    if (cap > all) cap = all;
    float *img = realloc(c->image, cap * sizeof(float));
    if (img) c->image = img;
    uint8_t *lab = img ? realloc(c->label, cap) : NULL;
    if (lab) c->label = lab;
    if (!img || !lab) return tk_err_set(e, TK_EIO, "out of host memory for case %d (%zu voxels)", c->id, all);
    g->capv = cap;
    return 0;
}

// Record rec of file: case id, shape, z, nimg floats img, nlab labels lab.
static int record(reading *g, int file, const char *path, uint64_t rec, const int32_t *shape32, int32_t id, int32_t z,
                  const float *img, size_t nimg, const uint8_t *lab, size_t nlab, tk_err *e) {
    char msg[400];
    int64_t shape[3];
    for (int a = 0; a < 3; a++) {
        shape[a] = shape32[a];
        if (shape[a] < 1 || shape[a] > U3_MAX_AXIS) {
            snprintf(msg, sizeof msg, "case %d: shape (%d, %d, %d): expected 1 to %d voxels an axis", id, shape32[0],
                     shape32[1], shape32[2], U3_MAX_AXIS);
            return bad(e, path, rec, msg);
        }
    }
    if (shape[0] * shape[1] * shape[2] > U3_MAX_VOXELS) {
        snprintf(msg, sizeof msg, "case %d: shape (%d, %d, %d): more than 2^31 voxels", id, shape32[0], shape32[1],
                 shape32[2]);
        return bad(e, path, rec, msg);
    }
    const size_t plane = (size_t)shape[1] * (size_t)shape[2];
    if (nimg == 0 || nimg % plane || nlab != nimg) {
        snprintf(msg, sizeof msg, "case %d: %zu image values and %zu labels: expected the same whole number of "
                 "%lld x %lld slices", id, nimg, nlab, (long long)shape[1], (long long)shape[2]);
        return bad(e, path, rec, msg);
    }
    const int64_t n = (int64_t)(nimg / plane);
    if (g->open) {
        if (id != g->id || z == 0) {
            snprintf(msg, sizeof msg, "case %d ends after slice %lld of its %lld: the records of its slices %lld.. "
                     "are missing (this record: case %d, z %d)", g->id, (long long)g->next_z, (long long)g->shape[0],
                     (long long)g->next_z, id, z);
            return bad(e, path, rec, msg);
        }
        if (memcmp(shape, g->shape, sizeof shape) != 0) {
            snprintf(msg, sizeof msg, "case %d: shape (%lld, %lld, %lld), but its earlier records have (%lld, %lld, "
                     "%lld)", id, (long long)shape[0], (long long)shape[1], (long long)shape[2],
                     (long long)g->shape[0], (long long)g->shape[1], (long long)g->shape[2]);
            return bad(e, path, rec, msg);
        }
        if (z != g->next_z) {
            snprintf(msg, sizeof msg, "case %d: a slab at z %d, expected z %lld: its records are out of order", id, z,
                     (long long)g->next_z);
            return bad(e, path, rec, msg);
        }
    } else {
        if (id < 0) {
            snprintf(msg, sizeof msg, "case number %d: expected 0 or more", id);
            return bad(e, path, rec, msg);
        }
        if (z != 0) {
            snprintf(msg, sizeof msg, "case %d begins at z %d, not 0: its records are out of order or missing", id, z);
            return bad(e, path, rec, msg);
        }
        for (int i = 0; i < g->nids; i++)
            if (g->ids[i] == id) {
                snprintf(msg, sizeof msg, "case %d again: its records are not all together", id);
                return bad(e, path, rec, msg);
            }
        TRY(case_begin(g, id, shape, file, e));
    }
    if (z + n > shape[0]) {
        snprintf(msg, sizeof msg, "case %d: slices %d .. %lld, past its %lld", id, z, (long long)(z + n - 1),
                 (long long)shape[0]);
        return bad(e, path, rec, msg);
    }
    for (size_t i = 0; i < nimg; i++) {
        if (lab[i] > 2 || !isfinite(img[i])) {
            size_t v = (size_t)z * plane + i;
            int64_t d = (int64_t)(v / plane), h = (int64_t)(v % plane) / shape[2], w = (int64_t)(v % plane) % shape[2];
            if (lab[i] > 2)
                snprintf(msg, sizeof msg, "case %d: label %u at voxel (%lld, %lld, %lld): expected 0, 1 or 2", id,
                         lab[i], (long long)d, (long long)h, (long long)w);
            else
                snprintf(msg, sizeof msg, "case %d: image value %g at voxel (%lld, %lld, %lld): not a finite number",
                         id, (double)img[i], (long long)d, (long long)h, (long long)w);
            return bad_at(e, path, rec, msg, 0);
        }
    }
    if (g->keep) {
        TRY(case_room(g, (size_t)(z + n) * plane, e));
        u3_case *c = &g->out->c[g->out->n - 1];
        memcpy(c->image + (size_t)z * plane, img, nimg * sizeof(float));
        memcpy(c->label + (size_t)z * plane, lab, nlab);
    }
    g->next_z = z + n;
    g->open = g->next_z < shape[0];
    g->file = path, g->rec = rec;
    return 0;
}

static int file_read(reading *g, int file, const char *path, tk_err *e) {
    tks_reader *r;
    TRY(tks_reader_open(&r, path, e));
    fields_at at;
    int rc = schema_check(tks_reader_schema(r), path, &at, e);
    tks_frame fr = {0};
    uint64_t rec = 0;
    for (size_t i = 0; !rc && i < tks_reader_nframes(r); i++) {
        if ((rc = tks_reader_read(r, i, &fr, e))) break;
        const tks_column *c = fr.col;
        for (size_t j = 0; !rc && j < fr.n; j++, rec++) {
            const tks_column *ci = &c[at.f[3]], *cl = &c[at.f[4]];
            uint64_t i0 = ci->off[j], i1 = ci->off[j + 1], l0 = cl->off[j], l1 = cl->off[j + 1];
            const int32_t *shape = (const int32_t *)c[at.f[1]].data + 3 * j;
            int32_t id = ((const int32_t *)c[at.f[0]].data)[j], z = ((const int32_t *)c[at.f[2]].data)[j];
            rc = record(g, file, path, rec, shape, id, z, (const float *)((const char *)ci->data + i0),
                        (size_t)(i1 - i0) / sizeof(float), (const uint8_t *)cl->data + l0, (size_t)(l1 - l0), e);
        }
    }
    tks_frame_free(&fr);
    tks_reader_close(r);
    return rc;
}

void u3_cases_free(u3_cases *cs) {
    if (!cs) return;
    for (int i = 0; i < cs->n; i++) {
        free(cs->c[i].image);
        free(cs->c[i].label);
    }
    free(cs->c);
    memset(cs, 0, sizeof *cs);
}

// The cases of files (with ordinal i % world == rank) into *out; *file_of (may be NULL): the file
// of each.
static int cases_read(char *const *files, int nfiles, int rank, int world, u3_cases *out, int **file_of, tk_err *e) {
    memset(out, 0, sizeof *out);
    reading g = {.rank = rank, .world = world, .out = out};
    int rc = 0;
    for (int f = 0; !rc && f < nfiles; f++) rc = file_read(&g, f, files[f], e);
    if (!rc && g.open) {
        char msg[300];
        snprintf(msg, sizeof msg, "case %d ends after slice %lld of its %lld: the records of its last slices are "
                 "missing (truncated)", g.id, (long long)g.next_z, (long long)g.shape[0]);
        rc = bad(e, g.file, g.rec, msg);
    }
    out->total = g.nids;
    free(g.ids);
    if (rc) {
        u3_cases_free(out);
        free(g.file_of);
        g.file_of = NULL;
    }
    if (file_of) *file_of = g.file_of;
    else free(g.file_of);
    return rc;
}

int u3_cases_load(char *const *paths, int npaths, int rank, int world, u3_cases *out, tk_err *e) {
    memset(out, 0, sizeof *out);
    if (world < 1 || rank < 0 || rank >= world)
        return tk_err_set(e, TK_EINTERNAL, "unet3d: rank %d of a world of %d", rank, world);
    char **files;
    int n;
    TRY(tk_data_paths(paths, npaths, &files, &n, e));
    int rc = cases_read(files, n, rank, world, out, NULL, e);
    tk_data_paths_free(files, n);
    return rc;
}

// ---- the training set: the cases and their foreground boxes ----

typedef struct u3_box {
    int64_t lo[3], hi[3];        // [lo, hi) on each axis
} u3_box;

// The boxes of one class in one case: its (at most) two connected components of largest box.
typedef struct u3_fg {
    int n;
    u3_box box[2];
} u3_fg;

typedef struct u3_set {
    u3_cases cs;
    int *file_of;
    u3_fg (*fg)[U3_CLASSES];     // fg[case][class], classes 1 .. U3_CLASSES - 1
    // what it was read from: the files and their identity (a file written again is another set)
    char **files;
    int nfiles;
    struct stat *st;
    int refs;
    struct u3_set *next;
} u3_set;

#define SEEN 0x80 // a label's mark while its component is walked (labels are 0 .. 2)

// The components of class cl in case c (6-connected, numbered in scan order as scipy's label) and
// the two of largest box volume (a stable ascending sort's last two: a tie goes to the later).
static int components(u3_case *c, uint8_t cl, u3_fg *fg, int64_t **stack, size_t *cap) {
    const int64_t D = c->shape[0], H = c->shape[1], W = c->shape[2], N = D * H * W;
    uint8_t *lab = c->label;
    int64_t vol[2] = {-1, -1};
    fg->n = 0;
    for (int64_t s = 0; s < N; s++) {
        if (lab[s] != cl) continue;
        size_t top = 0;
        (*stack)[top++] = s;
        lab[s] |= SEEN;
        u3_box b = {{D, H, W}, {0, 0, 0}};
        while (top) {
            int64_t v = (*stack)[--top];
            int64_t p[3] = {v / (H * W), v / W % H, v % W};
            for (int a = 0; a < 3; a++) {
                if (p[a] < b.lo[a]) b.lo[a] = p[a];
                if (p[a] + 1 > b.hi[a]) b.hi[a] = p[a] + 1;
            }
            int64_t nb[6];
            int k = 0;
            if (p[0] > 0) nb[k++] = v - H * W;
            if (p[0] + 1 < D) nb[k++] = v + H * W;
            if (p[1] > 0) nb[k++] = v - W;
            if (p[1] + 1 < H) nb[k++] = v + W;
            if (p[2] > 0) nb[k++] = v - 1;
            if (p[2] + 1 < W) nb[k++] = v + 1;
            for (int i = 0; i < k; i++) {
                if (lab[nb[i]] != cl) continue;
                if (top == *cap) {
                    size_t nc = *cap * 2;
                    int64_t *ns = realloc(*stack, nc * sizeof *ns);
                    if (!ns) return -1;
                    *stack = ns, *cap = nc;
                }
                lab[nb[i]] |= SEEN;
                (*stack)[top++] = nb[i];
            }
        }
        int64_t bv = (b.hi[0] - b.lo[0]) * (b.hi[1] - b.lo[1]) * (b.hi[2] - b.lo[2]);
        if (bv >= vol[1]) { // the largest so far (box[1]), the one before it second
            fg->box[0] = fg->box[1], vol[0] = vol[1];
            fg->box[1] = b, vol[1] = bv;
        } else if (bv >= vol[0]) {
            fg->box[0] = b, vol[0] = bv;
        }
        fg->n += fg->n < 2;
    }
    if (fg->n == 1) fg->box[0] = fg->box[1];
    for (int64_t s = 0; s < N; s++) lab[s] &= (uint8_t)~SEEN;
    return 0;
}

static void set_free(u3_set *s) {
    if (!s) return;
    u3_cases_free(&s->cs);
    free(s->file_of);
    free(s->fg);
    tk_data_paths_free(s->files, s->nfiles);
    free(s->st);
    free(s);
}

static int set_load(u3_set *s, tk_err *e) {
    TRY(cases_read(s->files, s->nfiles, 0, 1, &s->cs, &s->file_of, e));
    int n = s->cs.n, oom = 0;
    if (!(s->fg = calloc((size_t)n + 1, sizeof *s->fg))) return tk_err_set(e, TK_EIO, "out of host memory");
#pragma omp parallel for schedule(dynamic, 1) reduction(| : oom)
    for (int i = 0; i < n; i++) {
        size_t cap = 4096;
        int64_t *stack = malloc(cap * sizeof *stack);
        for (int cl = 1; stack && cl < U3_CLASSES && !oom; cl++)
            oom |= components(&s->cs.c[i], (uint8_t)cl, &s->fg[i][cl], &stack, &cap) != 0;
        oom |= !stack;
        free(stack);
    }
    return oom ? tk_err_set(e, TK_EIO, "out of host memory") : 0;
}

// The registry of the process's training sets.
static pthread_mutex_t sets_mu = PTHREAD_MUTEX_INITIALIZER;
static u3_set *sets;

static int same_files(const u3_set *s, char *const *files, int n, const struct stat *st) {
    if (s->nfiles != n) return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(s->files[i], files[i]) != 0 || s->st[i].st_dev != st[i].st_dev || s->st[i].st_ino != st[i].st_ino ||
            s->st[i].st_size != st[i].st_size || s->st[i].st_mtim.tv_sec != st[i].st_mtim.tv_sec ||
            s->st[i].st_mtim.tv_nsec != st[i].st_mtim.tv_nsec)
            return 0;
    return 1;
}

// The set of these files: the loaded one, else read now (the sets no reader holds are dropped first).
static int set_get(char *const *paths, int npaths, u3_set **out, tk_err *e) {
    u3_set *s = calloc(1, sizeof *s);
    if (!s) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = tk_data_paths(paths, npaths, &s->files, &s->nfiles, e);
    if (!rc && !(s->st = calloc((size_t)s->nfiles, sizeof *s->st))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    for (int i = 0; !rc && i < s->nfiles; i++)
        if (stat(s->files[i], &s->st[i]) != 0) rc = tk_err_errno(e, errno, "%s: cannot read", s->files[i]);
    if (rc) {
        set_free(s);
        return rc;
    }
    pthread_mutex_lock(&sets_mu);
    u3_set *have = sets;
    while (have && !same_files(have, s->files, s->nfiles, s->st)) have = have->next;
    if (have) {
        have->refs++;
        set_free(s);
        s = have;
    } else {
        for (u3_set **p = &sets; *p;) {
            u3_set *x = *p;
            if (x->refs) {
                p = &x->next;
                continue;
            }
            *p = x->next;
            set_free(x);
        }
        rc = set_load(s, e);
        if (rc) {
            set_free(s);
            s = NULL;
        } else {
            s->refs = 1, s->next = sets;
            sets = s;
        }
    }
    pthread_mutex_unlock(&sets_mu);
    *out = s;
    return rc;
}

static void set_put(u3_set *s) {
    pthread_mutex_lock(&sets_mu);
    s->refs--;
    pthread_mutex_unlock(&sets_mu);
}

// ---- the reader ----

typedef struct u3_reader {
    const u3_config *cfg;
    u3_set *set;
    int rank, world;
    int b;                       // samples of each global batch: b * rank .. b * rank + b - 1
} u3_reader;

int u3_data_open(const void *config, int rank, int world, char *const *paths, int npaths, void **out, tk_err *e) {
    const u3_config *cfg = config;
    *out = NULL;
    // this rank's share of the global batch (the config is parsed before the world is known)
    int64_t b;
    TRY(tk_per_rank_batch("unet3d", cfg->batch, world, &b, e));
    if (rank < 0 || rank >= world || b < 1 || b > INT32_MAX)
        return tk_err_set(e, TK_EINTERNAL, "unet3d: rank %d of a world of %d, %lld samples a rank", rank, world,
                          (long long)b);
    u3_reader *r = calloc(1, sizeof *r);
    if (!r) return tk_err_set(e, TK_EIO, "out of host memory");
    *r = (u3_reader){.cfg = cfg, .rank = rank, .world = world, .b = (int)b};
    int rc = set_get(paths, npaths, &r->set, e);
    const int *P = cfg->data.crop;
    for (int i = 0; !rc && r->set && i < r->set->cs.n; i++) {
        const u3_case *c = &r->set->cs.c[i];
        if (c->shape[0] >= P[0] && c->shape[1] >= P[1] && c->shape[2] >= P[2]) continue;
        rc = tk_err_set(e, TK_EDATA, "case %d of shape (%lld, %lld, %lld) is smaller than the training crop "
                        "data.crop (%d, %d, %d)", c->id, (long long)c->shape[0], (long long)c->shape[1],
                        (long long)c->shape[2], P[0], P[1], P[2]);
        tk_err_where(e, "%s", r->set->files[r->set->file_of[i]]);
        tk_err_hint(e, "prep kits19 pads every case to at least 128 voxels an axis; choose a smaller data.crop");
    }
    if (rc) {
        u3_data_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void u3_data_close(void *rd) {
    u3_reader *r = rd;
    if (!r) return;
    if (r->set) set_put(r->set);
    free(r);
}

uint64_t u3_data_count(void *rd) { return (uint64_t)((u3_reader *)rd)->set->cs.n; }

// The Philox block of a sample's draws: (seed; block, position in the epoch, stream, epoch).
static tk_philox_ctr draw(uint64_t seed, uint32_t epoch, uint32_t pos, uint32_t block) {
    tk_philox_ctr c = {{block, pos, TK_RNG_AUGMENT, epoch}};
    tk_philox_key k = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    return tk_philox4x32(c, k);
}

static double unit32(uint32_t w) { return (double)w * (1.0 / 4294967296.0); }
// Python's randrange(n) (0 for n = 0, as the reference's wrapper): an integer in [0, n).
static int64_t randrange(int64_t n, uint32_t w) { return n > 0 ? (int64_t)(((uint64_t)w * (uint64_t)n) >> 32) : 0; }

// The reference's adjust(): the first voxel of a patch of P on an axis of S voxels (S >= P) for a
// box [lo, hi), w the draw of its randrange.
static int64_t adjust(int64_t lo, int64_t hi, int64_t P, int64_t S, uint32_t w) {
    int64_t diff = P - (hi - lo), sign = diff < 0 ? -1 : 1;
    diff = diff < 0 ? -diff : diff;
    int64_t ladj = randrange(diff, w), hadj = diff - ladj;
    int64_t low = lo - sign * ladj, high = hi + sign * hadj;
    if (low < 0) low = 0;
    if (high > S) high = S;
    diff = P - (high - low);
    if (diff > 0 && low > 0) low -= diff; // clipped at S: back inside (clipped at 0: high grows)
    return low;
}

// Blocks 0 .. 3 hold the scalar draws; the noise's normals start at this block, four a block.
#define NOISE_BLOCK 4
enum { W_OVER, W_CLASS, W_COMP, W_AXIS, W_FLIP = W_AXIS + 3, W_BRIGHT = W_FLIP + 3, W_BFACTOR, W_NOISE = W_BFACTOR + 2,
       W_NSTD, W_WORDS = W_NSTD + 2 };

// The crop's first voxel on each axis (the RandBalancedCrop above).
static void crop_at(const u3_set *s, int64_t ci, const int P[3], double oversampling, const uint32_t *w,
                    int64_t lo[3]) {
    const u3_case *c = &s->cs.c[ci];
    const u3_fg *fg = s->fg[ci];
    int cls[U3_CLASSES], ncls = 0;
    for (int cl = 1; cl < U3_CLASSES; cl++)
        if (fg[cl].n) cls[ncls++] = cl;
    if (unit32(w[W_OVER]) < oversampling && ncls) {
        const u3_fg *f = &fg[cls[randrange(ncls, w[W_CLASS])]];
        const u3_box *b = &f->box[randrange(f->n, w[W_COMP])];
        for (int a = 0; a < 3; a++) lo[a] = adjust(b->lo[a], b->hi[a], P[a], c->shape[a], w[W_AXIS + a]);
        return;
    }
    for (int a = 0; a < 3; a++) lo[a] = randrange(c->shape[a] - P[a], w[W_AXIS + a]);
}

// ---- the noise's normals: a ziggurat of 128 layers (Marsaglia and Tsang, 2000) ----
// The fast path takes one random word a normal (7 bits pick the layer, 25 a signed uniform) and
// no transcendental function: Box-Muller's log and sincos cost three times as much here.
#define ZIG_N 128
#define ZIG_R 3.442619855899       // the right edge of the base layer: the tail lies beyond
#define ZIG_V 9.91256303526217e-3  // the area of every layer (the base: R f(R) + the tail)
// Layer i >= 1: the rectangle |z| < x[i] between the heights f(x[i]) and f(x[i + 1]), f(z) =
// exp(-z^2 / 2); x[0] is the base layer's width as a rectangle of area V. k[i] = x[i + 1] / x[i]:
// a draw |u| < k[i] falls wholly under the curve.
static struct { float x[ZIG_N + 1], f[ZIG_N + 1], k[ZIG_N]; } zig;
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static void zig_init(void) {
    double x[ZIG_N + 1];
    x[0] = ZIG_V / exp(-0.5 * ZIG_R * ZIG_R);
    x[1] = ZIG_R;
    for (int i = 1; i < ZIG_N - 1; i++) x[i + 1] = sqrt(-2 * log(ZIG_V / x[i] + exp(-0.5 * x[i] * x[i])));
    x[ZIG_N] = 0;
    for (int i = 0; i <= ZIG_N; i++) zig.x[i] = (float)x[i], zig.f[i] = (float)exp(-0.5 * x[i] * x[i]);
    for (int i = 0; i < ZIG_N; i++) zig.k[i] = (float)(x[i + 1] / x[i]);
}

// Word w's layer *i and uniform in (-1, 1).
static inline float zig_u(uint32_t w, int *i) {
    *i = (int)(w & (ZIG_N - 1));
    return ((float)((int32_t)w >> 7) + 0.5f) * (1.0f / 16777216.0f);
}

// The draws outside the layers' inner parts (about 2.7%): the wedge or tail test with words of
// the blocks (seed; voxel, pos, TK_RNG_AUGMENT | a << 8, epoch), a = 1, 2, ...: a wedge's rejection
// draws anew, a tail's tries the tail again.
static float zig_slow(float u, int i, uint64_t seed, uint32_t epoch, uint32_t pos, uint32_t voxel) {
    tk_philox_key key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    for (uint32_t a = 1;; a++) {
        tk_philox_ctr r = tk_philox4x32((tk_philox_ctr){{voxel, pos, TK_RNG_AUGMENT | a << 8, epoch}}, key);
        if (i == 0) { // beyond R: R + t, t exponential of rate R, kept with probability exp(-t^2 / 2)
            float t = -logf(1.0f - tk_u32_to_unit(r.v[1])) / (float)ZIG_R, y = -logf(1.0f - tk_u32_to_unit(r.v[2]));
            if (2 * y >= t * t) return u < 0 ? -((float)ZIG_R + t) : (float)ZIG_R + t;
            continue; // in the tail until a t is kept
        } else { // the wedge of layer i: under the curve at a uniform height
            float z = u * zig.x[i], y = zig.f[i] + tk_u32_to_unit(r.v[1]) * (zig.f[i + 1] - zig.f[i]);
            if (y < expf(-0.5f * z * z)) return z;
        }
        u = zig_u(r.v[3], &i);
        if (fabsf(u) < zig.k[i]) return u * zig.x[i];
    }
}

// Philox blocks b .. b + 7 of a sample's (as draw() gives them, w[j][l]: word j of block b + l),
// the eight lanes side by side so that the compiler vectorizes the rounds.
#define LANES 8
static void draw_lanes(uint64_t seed, uint32_t epoch, uint32_t pos, uint32_t b, uint32_t w[4][LANES]) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int l = 0; l < LANES; l++) w[0][l] = b + (uint32_t)l, w[1][l] = pos, w[2][l] = TK_RNG_AUGMENT, w[3][l] = epoch;
    for (int r = 0; r < 10; r++) {
#pragma omp simd
        for (int l = 0; l < LANES; l++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * w[0][l], p1 = (uint64_t)0xCD9E8D57u * w[2][l];
            w[0][l] = (uint32_t)(p1 >> 32) ^ w[1][l] ^ k0;
            w[1][l] = (uint32_t)p1;
            w[2][l] = (uint32_t)(p0 >> 32) ^ w[3][l] ^ k1;
            w[3][l] = (uint32_t)p0;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

// x += s * N(0, 1), rounded to float (the reference's float64 normals cast to float32, then
// added); voxel v's normal from word v % 4 of the sample's noise block NOISE_BLOCK + v / 4.
static void add_noise(float *x, size_t n, double s, uint64_t seed, uint32_t epoch, uint32_t pos) {
    pthread_once(&zig_once, zig_init);
    uint32_t w[4][LANES];
    for (size_t i = 0; i < n; i += 4 * LANES) {
        draw_lanes(seed, epoch, pos, NOISE_BLOCK + (uint32_t)(i / 4), w);
        for (size_t v = i; v < i + 4 * LANES && v < n; v++) {
            int l;
            float u = zig_u(w[(v - i) % 4][(v - i) / 4], &l);
            float z = fabsf(u) < zig.k[l] ? u * zig.x[l] : zig_slow(u, l, seed, epoch, pos, (uint32_t)v);
            x[v] += (float)(s * z);
        }
    }
}

// One training sample: case ci at position pos of the epoch, into img (P voxels) and lab.
static void sample(const u3_set *s, const u3_config *cfg, int64_t ci, uint32_t epoch, uint32_t pos, float *img,
                   uint8_t *lab) {
    const u3_data_cfg *dc = &cfg->data;
    const int *P = dc->crop;
    uint32_t w[4 * NOISE_BLOCK];
    for (uint32_t b = 0; b < NOISE_BLOCK; b++) memcpy(w + 4 * b, draw(cfg->seed, epoch, pos, b).v, 16);
    int64_t lo[3];
    crop_at(s, ci, P, dc->oversampling, w, lo);
    int flip[3];
    for (int a = 0; a < 3; a++) flip[a] = dc->flip && unit32(w[W_FLIP + a]) < 1.0 / 3;
    // the crop, flipped: output (d, h, x) from the case's (lo + d or lo + P - 1 - d, ...)
    const u3_case *c = &s->cs.c[ci];
    const int64_t H = c->shape[1], W = c->shape[2];
    for (int64_t d = 0; d < P[0]; d++)
        for (int64_t h = 0; h < P[1]; h++) {
            int64_t sd = lo[0] + (flip[0] ? P[0] - 1 - d : d), sh = lo[1] + (flip[1] ? P[1] - 1 - h : h);
            size_t src = ((size_t)sd * H + (size_t)sh) * W + (size_t)lo[2], dst = ((size_t)d * P[1] + (size_t)h) * P[2];
            if (!flip[2]) {
                memcpy(img + dst, c->image + src, (size_t)P[2] * sizeof(float));
                memcpy(lab + dst, c->label + src, (size_t)P[2]);
                continue;
            }
            for (int64_t x = 0; x < P[2]; x++) {
                img[dst + (size_t)x] = c->image[src + (size_t)(P[2] - 1 - x)];
                lab[dst + (size_t)x] = c->label[src + (size_t)(P[2] - 1 - x)];
            }
        }
    const size_t n = (size_t)P[0] * P[1] * P[2];
    if (unit32(w[W_BRIGHT]) < dc->brightness_prob) {
        double f = dc->brightness_factor, u = tk_u64_to_unit(w[W_BFACTOR], w[W_BFACTOR + 1]);
        double scale = 1.0 + (1.0 - f + 2.0 * f * u);
        for (size_t i = 0; i < n; i++) img[i] = (float)((double)img[i] * scale);
    }
    if (unit32(w[W_NOISE]) < dc->noise_prob)
        add_noise(img, n, dc->noise_std * tk_u64_to_unit(w[W_NSTD], w[W_NSTD + 1]), cfg->seed, epoch, pos);
}

// The cases in epoch's order: order[i] = the case at position i.
static void epoch_order(int64_t *order, int64_t n, uint64_t seed, int64_t epoch, int shuffle) {
    for (int64_t i = 0; i < n; i++) order[i] = i;
    for (int64_t i = n - 1; shuffle && i > 0; i--) { // Fisher-Yates
        tk_philox_ctr c = tk_philox_draw(seed, TK_RNG_SHUFFLE, (uint64_t)epoch << 40 | (uint64_t)i);
        int64_t j = (int64_t)((((uint64_t)c.v[0] << 32) | c.v[1]) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

int u3_data_batch(void *rd, int64_t step, int64_t spe, void *const *fields, tk_err *e) {
    u3_reader *r = rd;
    const u3_config *cfg = r->cfg;
    const int64_t n = r->set->cs.n, b = r->b, B = b * r->world;
    if (spe < 1 || step < 0 || spe * B > n)
        return tk_err_set(e, TK_EINTERNAL, "unet3d: batch %lld of %lld an epoch, %lld samples, %lld cases",
                          (long long)step, (long long)spe, (long long)B, (long long)n);
    const int64_t epoch = step / spe, first = step % spe * B + r->rank * b;
    int64_t *order = malloc((size_t)n * sizeof *order);
    if (!order) return tk_err_set(e, TK_EIO, "out of host memory");
    epoch_order(order, n, cfg->seed, epoch, cfg->data.shuffle);
    const size_t vox = (size_t)cfg->data.crop[0] * cfg->data.crop[1] * cfg->data.crop[2];
    float *img = fields[0];
    uint8_t *lab = fields[1];
    for (int64_t k = 0; k < b; k++)
        sample(r->set, cfg, order[first + k], (uint32_t)epoch, (uint32_t)(first + k), img + (size_t)k * vox,
               lab + (size_t)k * vox);
    free(order);
    return 0;
}
