// prep synth kits19: CT-like abdominal phantoms in KiTS19's layout (prep(1); cmd/prep.c dispatches
// here). DIR/case_XXXXX/imaging.nii.gz (float32 HU, as KiTS19's imaging) and segmentation.nii.gz
// (uint8: 0 background, 1 kidney, 2 tumor), the headers of KiTS19's files (the first axis is the
// slices; sform 2 with every axis negated), evaluation_cases.txt in the MLPerf reference's format
// and DIR/manifest.json. Every value comes from (--seed, case) through Philox, so the bytes do not
// depend on the thread count.
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/afile.h"
#include "core/cli.h"
#include "core/jsonl.h"
#include "core/philox.h"
#include "core/progress.h"
#include "nifti/nifti.h"
#include "prep/prep.h"

static const char *kits_usage =
    "Usage: prep synth kits19 -o DIR [--cases N] [--seed S] [--size small|full] [--progress]\n";

static void kits_help(void) {
    printf("%s\n"
           "Write synthetic CT volumes in KiTS19's layout: DIR/case_XXXXX/imaging.nii.gz (float32 HU) and\n"
           "segmentation.nii.gz (uint8: 0 background, 1 kidney, 2 tumor), evaluation_cases.txt (the MLPerf\n"
           "reference's 42 of 210, or a fifth of N) and manifest.json. DIR must not exist (or be empty).\n\n"
           "  -o, --output DIR         the dataset directory\n"
           "      --cases N            cases, 1..210 (default 210: KiTS19's training set)\n"
           "      --seed S             Philox seed (default 1)\n"
           "      --size small|full    small (default): 64x64 slices, 1.8-2.4 mm pixels; full: 512x512,\n"
           "                           0.5-1.0 mm pixels and 0.5-5 mm slices, like KiTS19\n"
           "      --progress           show progress on stderr even when it is not a terminal\n"
           "  -h, --help               this help\n\n"
           "A JSON summary line goes to stdout. Exit status: 0 ok, 2 usage, 4 I/O error. See prep(1).\n",
           kits_usage);
}

// The MLPerf reference's evaluation_cases.txt (image_segmentation/pytorch): its 42 of KiTS19's 210.
static const int reference_eval[42] = {0,   3,   5,   6,   12,  24,  34,  41,  44,  49,  52,  56,  61,  65,
                                       66,  70,  76,  78,  80,  84,  86,  87,  92,  111, 112, 125, 128, 138,
                                       157, 160, 161, 162, 169, 171, 176, 185, 187, 189, 198, 203, 206, 207};
enum { MAX_CASES = 210 }; // the reference's MAX_ID: preprocess_dataset.py skips cases from 210 on

// ---- one phantom -----------------------------------------------------------------------------
typedef struct { double c[3], r[3], cs, sn; } ellipsoid; // center (x, y, z) mm, semi-axes, in-plane rotation

typedef struct {
    int S, H, W;          // slices, rows, columns (dim[1], dim[2], dim[3])
    float t, px;          // slice thickness and pixel size, mm (float: what the header holds)
    double s;             // anatomy scale (1: adult size; small volumes use less)
    double a, b, fat;     // body semi-axes (x left-right, y anterior-posterior) and fat rim, mm
    double spine_y, spine_r, disc_phase, rib_phase;
    ellipsoid liver, spleen, kidney[2];
    int tumor, tumor_side;
    double tc[3], tr, tphase[3]; // tumor center, radius and shape phases
    double noise;                 // HU, standard deviation
    double ph[6];                 // texture phases
} phantom;

typedef struct { uint64_t seed; int c; uint32_t k; } draws;

// The k-th uniform in [0, 1) of case c: index (c << 32) + k, below the voxels' (from 2^40 on).
static double uni(draws *d) {
    tk_philox_ctr r = tk_philox_draw(d->seed, TK_RNG_SYNTH, ((uint64_t)d->c << 32) + d->k++);
    return tk_u64_to_unit(r.v[0], r.v[1]);
}
static double range(draws *d, double lo, double hi) { return lo + (hi - lo) * uni(d); }

static void ellipsoid_set(ellipsoid *e, double x, double y, double z, double rx, double ry, double rz, double angle) {
    e->c[0] = x, e->c[1] = y, e->c[2] = z;
    e->r[0] = rx, e->r[1] = ry, e->r[2] = rz;
    e->cs = cos(angle), e->sn = sin(angle);
}

// Squared normalized radius of (x, y, z) in e (< 1 inside); u, v, w its normalized coordinates.
static double ellipsoid_q(const ellipsoid *e, double x, double y, double z, double *u, double *v, double *w) {
    double dx = x - e->c[0], dy = y - e->c[1];
    *u = (e->cs * dx + e->sn * dy) / e->r[0];
    *v = (-e->sn * dx + e->cs * dy) / e->r[1];
    *w = (z - e->c[2]) / e->r[2];
    return *u * *u + *v * *v + *w * *w;
}

static void phantom_draw(phantom *p, uint64_t seed, int c, int full) {
    draws d = {seed, c, 0};
    memset(p, 0, sizeof *p);
    // KiTS19's spacings: 0.44-1.04 mm pixels, 0.5-5 mm slices. The small volumes keep the body
    // inside 64 pixels with coarser pixels and a smaller anatomy, so that after the reference's
    // resampling to 1.6 x 1.2 x 1.2 mm they still fill most of the 128^3 it pads to.
    static const float thick[] = {0.5f, 0.625f, 0.7f, 0.8f, 1.0f, 1.25f, 1.5f, 2.0f, 2.5f, 3.0f, 4.0f, 5.0f};
    p->s = full ? range(&d, 0.9, 1.1) : range(&d, 0.36, 0.42);
    p->H = p->W = full ? 512 : 64;
    if (full) {
        p->px = (float)range(&d, 0.5, 1.0);
        p->t = thick[(int)(uni(&d) * (sizeof thick / sizeof thick[0]))];
    } else {
        p->px = (float)range(&d, 1.8, 2.4);
        p->t = (float)range(&d, 1.5, 4.0);
    }
    double extent = range(&d, 180, 320) * p->s; // scanned length, mm
    p->S = (int)lround(extent / p->t);
    if (p->S < 8) p->S = 8;
    double s = p->s, zk = range(&d, -0.1, 0.1) * extent; // the kidneys' height
    p->a = range(&d, 150, 185) * s;
    p->b = range(&d, 105, 130) * s;
    p->fat = range(&d, 8, 25) * s;
    p->spine_r = range(&d, 14, 18) * s;
    p->spine_y = p->b * 0.55;
    p->disc_phase = range(&d, 0, 32) * s;
    p->rib_phase = range(&d, 0, 24) * s;
    // patient right is the image's left (x < 0): the liver there, the spleen opposite
    ellipsoid_set(&p->liver, -0.42 * p->a, -0.05 * p->b, zk + range(&d, 50, 70) * s, 0.40 * p->a, 0.55 * p->b,
                  range(&d, 70, 95) * s, range(&d, -0.2, 0.2));
    ellipsoid_set(&p->spleen, 0.55 * p->a, 0.30 * p->b, zk + range(&d, 40, 55) * s, 0.15 * p->a, 0.22 * p->b,
                  range(&d, 40, 55) * s, range(&d, -0.5, 0.5));
    for (int k = 0; k < 2; k++) { // the left kidney sits a little higher than the right
        double sx = k ? 1 : -1;
        ellipsoid_set(&p->kidney[k], sx * range(&d, 0.30, 0.36) * p->a, range(&d, 0.25, 0.35) * p->b,
                      zk + (k ? 1 : -1) * range(&d, 0, 12) * s, range(&d, 24, 30) * s, range(&d, 20, 25) * s,
                      range(&d, 48, 60) * s, sx * range(&d, 0.35, 0.6));
    }
    p->tumor = uni(&d) < 0.7;
    p->tumor_side = uni(&d) < 0.5;
    const ellipsoid *kd = &p->kidney[p->tumor_side];
    // the tumor's center on a ray from the kidney's center, 40-90% of the way to its surface
    double th = range(&d, 0, 2 * M_PI), ph = acos(range(&d, -0.8, 0.8)), f = range(&d, 0.4, 0.9);
    double u = sin(ph) * cos(th) * kd->r[0] * f, v = sin(ph) * sin(th) * kd->r[1] * f;
    p->tc[0] = kd->c[0] + kd->cs * u - kd->sn * v;
    p->tc[1] = kd->c[1] + kd->sn * u + kd->cs * v;
    p->tc[2] = kd->c[2] + cos(ph) * kd->r[2] * f;
    p->tr = range(&d, 10, 60) * s / 2; // 10-60 mm across in adult size
    if (p->tr < 1.5 * p->px) p->tr = 1.5 * p->px; // small volumes: at least 3 pixels across
    for (int i = 0; i < 3; i++) p->tphase[i] = range(&d, 0, 2 * M_PI);
    for (int i = 0; i < 6; i++) p->ph[i] = range(&d, 0, 2 * M_PI);
    p->noise = range(&d, 8, 20);
}

// Slow texture in [-1, 1] with wavelengths of about 30-60 mm (times the anatomy scale).
static double texture(const phantom *p, double x, double y, double z, int k) {
    double f = 1.0 / (6.0 * p->s);
    return sin(x * f * 1.1 + p->ph[k]) * sin(y * f * 0.9 + p->ph[(k + 1) % 6]) * sin(z * f * 0.7 + p->ph[(k + 2) % 6]);
}

// HU before noise and the label of the point (x, y, z), mm.
static double tissue(const phantom *p, double x, double y, double z, uint8_t *label) {
    *label = 0;
    double s = p->s, rb = (x / p->a) * (x / p->a) + (y / p->b) * (y / p->b);
    if (rb > 1) return -1000;                                       // air
    double ia = p->a - p->fat, ib = p->b - p->fat, ri = (x / ia) * (x / ia) + (y / ib) * (y / ib);
    if (ri > 1) return -100 + 10 * texture(p, x, y, z, 0);          // subcutaneous fat
    // spine: vertebral body (cortex, cancellous bone; discs every 32 mm), canal, spinous process
    double disc = fmod(z + p->disc_phase + 1000 * s, 32 * s) < 6 * s;
    double dv = hypot(x, y - p->spine_y);
    if (dv < p->spine_r) return disc ? 90 : dv > p->spine_r - 2.5 * s ? 900 : 320 + 40 * texture(p, x, y, z, 1);
    double cy = p->spine_y + p->spine_r + 8 * s, dc = hypot(x, y - cy);
    if (dc < 7 * s) return 15;                                      // spinal canal
    if (!disc && (dc < 11 * s || (fabs(x) < 3 * s && y > cy && y < cy + 30 * s))) return 700;
    // ribs: a band inside the body wall, above the kidneys' lower poles, every 24 mm
    double zr = z - (p->kidney[0].c[2] - 30 * s);
    // (each rib crosses a slice as a few arcs: the band broken by angle)
    if (zr > 0 && ri > 0.80 && ri < 0.88 && fabs(x) > 0.25 * p->a && fmod(zr + p->rib_phase, 24 * s) < 9 * s &&
        cos(9 * atan2(y, x) + zr / (8 * s)) > -0.3)
        return 650;
    // tumor (over kidney and organs): enhancing rim, heterogeneous inside, necrotic core when large
    double u, v, w;
    if (p->tumor) {
        double dx = x - p->tc[0], dy = y - p->tc[1], dz = z - p->tc[2], r = sqrt(dx * dx + dy * dy + dz * dz);
        double th = atan2(dy, dx), ph = r > 0 ? acos(dz / r) : 0;
        double reff = p->tr * (1 + 0.12 * sin(3 * th + p->tphase[0]) * cos(2 * ph + p->tphase[1]));
        if (r < reff) {
            *label = 2;
            if (r > reff - 2 * s) return 130;
            if (p->tr > 15 * s && r < 0.45 * reff) return 25 + 10 * texture(p, x, y, z, 2);
            return 85 + 25 * texture(p, 2 * x, 2 * y, 2 * z, 3) + 10 * sin(5 * th + p->tphase[2]);
        }
    }
    for (int k = 0; k < 2; k++) {
        const ellipsoid *kd = &p->kidney[k];
        double q = ellipsoid_q(kd, x, y, z, &u, &v, &w);
        if (q >= 1) continue;
        // the hilum: a notch of sinus fat on the medial side (toward the spine), not labelled
        double medial = kd->c[0] < 0 ? u : -u;
        if (medial > 0.45 && fabs(w) < 0.35 && fabs(v) < 0.5) return -60;
        *label = 1;
        if (q > 0.72) return 190 + 10 * texture(p, x, y, z, 4); // cortex
        return 150 + 25 * cos(7 * atan2(v, w)) + 8 * texture(p, x, y, z, 5); // medulla: pyramids
    }
    if (ellipsoid_q(&p->liver, x, y, z, &u, &v, &w) < 1) return 60 + 8 * texture(p, x, y, z, 1);
    if (ellipsoid_q(&p->spleen, x, y, z, &u, &v, &w) < 1) return 55 + 6 * texture(p, x, y, z, 2);
    return 40 + 15 * texture(p, x, y, z, 3);                        // muscle, bowel, vessels
}

typedef struct { size_t kidney, tumor; } counts;

// Fills img (float32 HU) and seg (uint8); voxel (i slice, j row, k column) at i + S*(j + H*k).
static void phantom_render(const phantom *p, uint64_t seed, int c, float *img, uint8_t *seg, counts *n) {
    size_t kid = 0, tum = 0;
    int S = p->S, H = p->H, W = p->W;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : kid, tum)
    for (int k = 0; k < W; k++)
        for (int j = 0; j < H; j++)
            for (int i = 0; i < S; i++) {
                size_t at = (size_t)i + (size_t)S * ((size_t)j + (size_t)H * (size_t)k);
                double x = (k - W / 2.0 + 0.5) * p->px, y = (j - H / 2.0 + 0.5) * p->px, z = (i - S / 2.0 + 0.5) * p->t;
                uint8_t l;
                double hu = tissue(p, x, y, z, &l) + p->noise * tk_philox_normal(seed, TK_RNG_SYNTH, ((uint64_t)(c + 1) << 41) + at);
                hu = floor(hu + 0.5); // CT stores whole HU
                img[at] = (float)(hu < -1024 ? -1024 : hu > 3071 ? 3071 : hu);
                seg[at] = l;
                kid += l == 1;
                tum += l == 2;
            }
    n->kidney = kid;
    n->tumor = tum;
}

// KiTS19's header: dims (slices, rows, columns); pixdim[0] 1; sform 2 with the affine
// [[0, 0, -px, 0], [0, -px, 0, 0], [-t, 0, 0, 0]]; qform 0 with its quaternion kept as theirs.
static void kits_header(tk_nifti *n, const phantom *p) {
    n->pixdim[1] = p->t;
    n->pixdim[2] = n->pixdim[3] = p->px;
    n->sform_code = 2;
    n->quatern[0] = -0.70710676908493042; // their files' (unused while qform_code is 0)
    n->quatern[2] = 0.70710676908493042;
    n->srow[0][2] = -p->px;
    n->srow[1][1] = -p->px;
    n->srow[2][0] = -p->t;
}

static int write_case(const char *dir, const phantom *p, uint64_t seed, int c, counts *cnt, tk_err *e) {
    char path[4400];
    snprintf(path, sizeof path, "%s/case_%05d", dir, c);
    if (mkdir(path, 0755) != 0) return tk_err_errno(e, errno, "%s: cannot create", path);
    int64_t dims[3] = {p->S, p->H, p->W};
    tk_nifti *img = NULL, *seg = NULL;
    int rc = tk_nifti_new(&img, 3, dims, TK_NIFTI_FLOAT32, e);
    if (!rc) rc = tk_nifti_new(&seg, 3, dims, TK_NIFTI_UINT8, e);
    if (!rc) {
        kits_header(img, p);
        kits_header(seg, p);
        phantom_render(p, seed, c, img->data, seg->data, cnt);
        snprintf(path, sizeof path, "%s/case_%05d/imaging.nii.gz", dir, c);
        rc = tk_nifti_write(path, img, 1, e); // level 1, nibabel's default
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/case_%05d/segmentation.nii.gz", dir, c);
        rc = tk_nifti_write(path, seg, 1, e);
    }
    tk_nifti_free(img);
    tk_nifti_free(seg);
    return rc;
}

// ---- the split and the manifest --------------------------------------------------------------
// The evaluation cases of n: the reference's 42 for all 210, else the same fifth, evenly spaced.
static int eval_cases(int n, int *ids) {
    if (n == MAX_CASES) {
        memcpy(ids, reference_eval, sizeof reference_eval);
        return 42;
    }
    int k = (int)lround(n * 42.0 / MAX_CASES);
    if (k < 1 && n > 1) k = 1;
    for (int i = 0; i < k; i++) ids[i] = (int)(((2 * i + 1) * (int64_t)n) / (2 * k));
    return k;
}

static int text_file(const char *path, const char *text, tk_err *e) {
    tk_afile af;
    TRY(tk_afile_open(&af, path, e));
    int rc = tk_write_all(af.fp, text, strlen(text), path, e);
    if (!rc) return tk_afile_commit(&af, e);
    tk_afile_abort(&af);
    return rc;
}

static int write_split(const char *dir, const int *ids, int k, tk_err *e) {
    char path[4400], *text = malloc((size_t)k * 6 + 1);
    if (!text) return tk_err_errno(e, ENOMEM, "out of memory");
    size_t at = 0;
    for (int i = 0; i < k; i++) at += (size_t)sprintf(text + at, i ? "\n%05d" : "%05d", ids[i]); // no final newline, as theirs
    text[at] = 0;
    snprintf(path, sizeof path, "%s/evaluation_cases.txt", dir);
    int rc = text_file(path, text, e);
    free(text);
    return rc;
}

// The sets a configuration was calibrated on (the runs are in the configuration's "synthetic"
// section): their manifests carry that target; any other set's is null, as no model has been
// trained on it.
static const struct {
    int full, cases;
    uint64_t seed;
    double mean_dice;
    const char *how;
} calibrated[] = {
    {0, 20, 1, 0.5, "share/workloads/unet3d/tiny.json (run.sh --size tiny, the CPU): the tiny net (width 4, 64^3 "
                    "crops) reached it with train seeds 1 to 5 at step 96-128; background everywhere scores 0.375"},
    {1, 40, 1, 0.8, "share/workloads/unet3d/synth.json (run.sh --size synth, one GPU): the full net (width 32, bf16, "
                    "128^3 crops, batch 2) passed it at 15,360 samples with train seed 1 and 7,680 with seed 2 on an "
                    "H200; background everywhere scores 0.3125"},
};

static json_t *manifest_target(int full, int n, uint64_t seed) {
    for (size_t i = 0; i < sizeof calibrated / sizeof calibrated[0]; i++)
        if (calibrated[i].full == full && calibrated[i].cases == n && calibrated[i].seed == seed)
            return json_pack("{s:s,s:f,s:s}", "metric", "mean_dice", "mean_dice", calibrated[i].mean_dice, "how",
                             calibrated[i].how);
    return json_null();
}

static int write_manifest(const char *dir, uint64_t seed, int full, json_t *cases, const int *ids, int k, int n,
                          tk_err *e) {
    json_t *ev = json_array();
    for (int i = 0; i < k; i++) {
        char id[16];
        snprintf(id, sizeof id, "%05d", ids[i]);
        json_array_append_new(ev, json_string(id));
    }
    json_t *m = json_pack(
        "{s:s,s:i,s:I,s:s,s:i,s:{s:o,s:i,s:s},s:o,s:s,s:s,s:s,s:{s:i,s:i,s:i},s:s,s:O}", "generator",
        "trainkit prep synth kits19", "format_version", 1, "seed", (json_int_t)seed, "size", full ? "full" : "small",
        "cases_total", n, "split", "eval", ev, "train", n - k, "file", "evaluation_cases.txt", "target",
        manifest_target(full, n, seed), "target_note", "a target is calibrated by training on a set: the sets of "
        "share/workloads/unet3d's tiny.json (--size small --cases 20 --seed 1) and synth.json (--size full --cases 40 "
        "--seed 1) carry theirs (how, in \"how\" and in the configuration's \"synthetic\" section); any other "
        "set's is null", "imaging", "float32 HU (whole numbers, -1024..3071), "
        "dims (slices, rows, columns), dim[1] fastest; sform 2, affine [[0,0,-px,0],[0,-px,0,0],[-t,0,0,0]] as KiTS19's",
        "checksum_note", "no checksum.json: the reference's holds the md5 of the preprocessed .npy files "
        "(preprocess_dataset.py verify_dataset), which only the preprocessing makes", "labels", "background", 0, "kidney",
        1, "tumor", 2, "phantom", "body ellipse with a fat rim (-100 HU), soft tissue (40), spine with discs and canal, "
        "ribs (650-900), liver (60), spleen (55), two kidneys (cortex 190, medulla 150 with pyramids, hilum fat -60 "
        "unlabelled), a tumor in about 70% of cases (10-60 mm at adult scale, rim 130, heterogeneous 60-110, necrotic "
        "core 25 when large), Gaussian noise 8-20 HU, air -1000", "cases", cases);
    char *text = m ? json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(m);
    if (!text) return tk_err_set(e, TK_EINTERNAL, "cannot encode the manifest");
    char path[4400];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    size_t len = strlen(text);
    char *t2 = realloc(text, len + 2);
    int rc = t2 ? 0 : tk_err_errno(e, ENOMEM, "out of memory");
    if (!rc) {
        memcpy(t2 + len, "\n", 2);
        text = t2;
        rc = text_file(path, text, e);
    }
    free(text);
    return rc;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    return remove(path);
}

static int run_synth_kits19(const char *dir, int n, uint64_t seed, int full, int progress, tk_err *e) {
    if (!dir) return tk_err_set(e, TK_EUSAGE, "synth kits19 needs -o DIR");
    if (rmdir(dir) != 0 && errno != ENOENT) // an empty directory may stand where the tree goes
        return tk_err_set(e, TK_EUSAGE, "%s exists and is not an empty directory: give a new one", dir);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dir, (long)getpid());
    if (mkdir(tmp, 0755) != 0) return tk_err_errno(e, errno, "%s: cannot create", tmp);
    int ids[MAX_CASES], k = eval_cases(n, ids), rc = 0, tumors = 0;
    json_t *cases = json_array();
    tk_progress pr;
    tk_progress_init(&pr, "synth", "cases", (uint64_t)n, progress);
    // Cases in parallel, one thread each (the render's own parallel loop then runs on that thread:
    // OpenMP does not nest by default); what each case found is kept and put in the manifest in
    // case order afterwards, so the output does not depend on the thread count.
    phantom *ps = calloc((size_t)n, sizeof *ps);
    counts *cnts = calloc((size_t)n, sizeof *cnts);
    int *rcs = calloc((size_t)n, sizeof *rcs);
    tk_err *errs = calloc((size_t)n, sizeof *errs);
    if (!ps || !cnts || !rcs || !errs) rc = tk_err_errno(e, ENOMEM, "out of memory");
    int done = 0, failed = 0;
#pragma omp parallel for schedule(dynamic, 1) if (!rc)
    for (int c = 0; c < n; c++) {
        int stop;
#pragma omp atomic read
        stop = failed;
        if (stop) continue;
        phantom_draw(&ps[c], seed, c, full);
        if ((rcs[c] = write_case(tmp, &ps[c], seed, c, &cnts[c], &errs[c]))) {
#pragma omp atomic write
            failed = 1;
        }
        int d;
#pragma omp atomic capture
        d = ++done;
#pragma omp critical(synth_progress)
        tk_progress_update(&pr, (uint64_t)d);
    }
    for (int c = 0; c < n && !rc; c++) {
        if (rcs[c]) {
            *e = errs[c];
            rc = rcs[c];
            break;
        }
        if (failed) continue; // a later case failed: its error is reported once all are looked at
        const phantom *p = &ps[c];
        char name[32];
        snprintf(name, sizeof name, "case_%05d", c);
        tumors += cnts[c].tumor > 0;
        json_array_append_new(cases, json_pack("{s:s,s:[i,i,i],s:[f,f,f],s:b,s:I,s:I,s:f}", "case", name, "shape", p->S,
                                               p->H, p->W, "spacing", (double)p->t, (double)p->px, (double)p->px, "tumor",
                                               cnts[c].tumor > 0, "kidney_voxels", (json_int_t)cnts[c].kidney,
                                               "tumor_voxels", (json_int_t)cnts[c].tumor, "noise_hu", p->noise));
    }
    free(ps);
    free(cnts);
    free(rcs);
    free(errs);
    if (!rc) rc = write_split(tmp, ids, k, e);
    if (!rc) rc = write_manifest(tmp, seed, full, cases, ids, k, n, e);
    if (!rc && rename(tmp, dir) != 0) rc = tk_err_errno(e, errno, "%s: cannot rename to %s", tmp, dir);
    if (rc) nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS); // no partial tree is left
    json_decref(cases);
    if (rc) return rc;
    tk_progress_end(&pr, (uint64_t)n);
    return tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:s}", "type", "synth", "dataset", "kits19",
                                           "dir", dir, "cases", n, "train", n - k, "eval", k, "tumors", tumors, "size",
                                           full ? "full" : "small"), e);
}

int prep_synth_kits19_main(int argc, char **argv) {
    enum { O_CASES = 256, O_SEED, O_SIZE, O_PROGRESS };
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'}, {"cases", required_argument, 0, O_CASES},
        {"seed", required_argument, 0, O_SEED}, {"size", required_argument, 0, O_SIZE},
        {"progress", no_argument, 0, O_PROGRESS}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},      {0, 0, 0, 0}};
    const char *out = NULL;
    int64_t cases = MAX_CASES, seed = 1;
    int full = 0, progress = 0, ch;
    tk_err e;
    tk_err_clear(&e);
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
        int rc = 0;
        switch (ch) {
        case 'o': out = optarg; break;
        case O_CASES: rc = tk_parse_i64(optarg, 1, MAX_CASES, "--cases", &cases, &e); break;
        case O_SEED: rc = tk_parse_i64(optarg, 0, INT64_MAX, "--seed", &seed, &e); break;
        case O_SIZE:
            if (strcmp(optarg, "small") == 0) full = 0;
            else if (strcmp(optarg, "full") == 0) full = 1;
            else return tk_cli_usage_error(prog, kits_usage, "--size: expected small or full, got '%s'", optarg);
            break;
        case O_PROGRESS: progress = 1; break;
        default: return tk_cli_common_option(prog, kits_usage, kits_help, ch, argv);
        }
        if (rc) return tk_cli_usage_error(prog, kits_usage, "%s", e.what);
    }
    if (optind < argc) return tk_cli_usage_error(prog, kits_usage, "synth kits19: unexpected argument '%s'", argv[optind]);
    int rc = run_synth_kits19(out, (int)cases, (uint64_t)seed, full, progress, &e);
    if (rc == TK_EUSAGE) return tk_cli_usage_error(prog, kits_usage, "%s", e.what);
    if (rc) return tk_cli_fail(prog, &e);
    if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
    return 0;
}
