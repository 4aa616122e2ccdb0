// 3D U-Net's data (lib/workloads/unet3d/data.c): the "data" section, the training reader's samples
// (the MLPerf reference's RandBalancedCrop, RandFlip, brightness and noise) on small exact cases,
// its determinism and rank split, bad records, and the eval cases against prep kits19's .npy files.
// Each case's image holds id * 100000 + its voxel's index, so every output voxel tells where it came
// from; the expected crop positions are worked out from the reference's code (pytorch_loader.py) at
// each test, and frequencies are checked against binomial bounds (5 sigma).
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "kits19/kits19.h"
#include "nifti/nifti.h"
#include "tks/tks.h"
#include "tk_test.h"
#include "workloads/unet3d/unet3d.h"

#define ID_STEP 100000

typedef struct vol {
    int id;
    int64_t s[3];
    float *img;
    uint8_t *lab;
} vol;

static int64_t nvox(const vol *v) { return v->s[0] * v->s[1] * v->s[2]; }

static vol vol_new(int id, int64_t D, int64_t H, int64_t W) {
    vol v = {id, {D, H, W}, NULL, NULL};
    v.img = malloc((size_t)nvox(&v) * sizeof(float));
    v.lab = calloc((size_t)nvox(&v), 1);
    for (int64_t i = 0; i < nvox(&v); i++) v.img[i] = (float)(id * ID_STEP + i);
    return v;
}
static void vol_free(vol *v) { free(v->img), free(v->lab); }
static int64_t at(const vol *v, int64_t d, int64_t h, int64_t w) { return (d * v->s[1] + h) * v->s[2] + w; }

// One record: case v's slices z .. z + n - 1.
typedef struct { const vol *v; int z, n; } rec;

static void write_recs(const char *path, const rec *r, int nrec) {
    tks_schema s;
    tk_err e = {0};
    if (kits19_schema(&s, "train", &e)) abort();
    tks_writer *w;
    tks_writer_opts o = {.records_per_frame = 3}; // several frames a file
    if (tks_writer_open(&w, path, &s, &o, &e)) abort();
    for (int i = 0; i < nrec; i++) {
        const vol *v = r[i].v;
        size_t plane = (size_t)(v->s[1] * v->s[2]);
        int32_t shape[3] = {(int32_t)v->s[0], (int32_t)v->s[1], (int32_t)v->s[2]}, id = v->id, z = r[i].z;
        uint64_t oi[2] = {0, r[i].n * plane * 4}, ol[2] = {0, r[i].n * plane};
        tks_colref cols[5] = {{&id, NULL}, {shape, NULL}, {&z, NULL}, {v->img + z * plane, oi},
                              {v->lab + z * plane, ol}};
        if (tks_writer_append_ref(w, cols, 1, &e)) abort();
    }
    if (tks_writer_close(w, &e)) abort();
}

// One record of any shape and lengths.
static void write_raw(const char *path, int32_t id, const int32_t shape[3], int32_t z, size_t nvals) {
    tks_schema s;
    tk_err e = {0};
    tks_writer *w;
    float *img = calloc(nvals + 1, sizeof(float));
    uint8_t *lab = calloc(nvals + 1, 1);
    uint64_t oi[2] = {0, nvals * 4}, ol[2] = {0, nvals};
    tks_colref cols[5] = {{&id, NULL}, {shape, NULL}, {&z, NULL}, {img, oi}, {lab, ol}};
    if (kits19_schema(&s, "train", &e) || tks_writer_open(&w, path, &s, NULL, &e) ||
        tks_writer_append_ref(w, cols, 1, &e) || tks_writer_close(w, &e))
        abort();
    free(img);
    free(lab);
}

// The cases in order, each as slabs of `slab` slices.
static void write_cases(const char *path, const vol *v, int n, int slab) {
    rec r[512];
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int z = 0; z < v[i].s[0]; z += slab)
            r[k++] = (rec){&v[i], z, (int)(v[i].s[0] - z < slab ? v[i].s[0] - z : slab)};
    write_recs(path, r, k);
}

static u3_config cfg_make(int P0, int P1, int P2, int64_t batch) {
    u3_config c = {0};
    tk_err e = {0};
    if (u3_data_cfg_parse(NULL, "cfg.json", &c.data, &e)) abort();
    c.data.crop[0] = P0, c.data.crop[1] = P1, c.data.crop[2] = P2;
    c.data.oversampling = 0, c.data.flip = 0, c.data.brightness_prob = 0, c.data.noise_prob = 0, c.data.shuffle = 0;
    c.batch = batch;
    c.b = (int)batch;
    c.seed = 1234;
    return c;
}

typedef struct { float *img; uint8_t *lab; size_t vox; int b; } batch;
static batch batch_new(const u3_config *c, int b) {
    batch x = {NULL, NULL, (size_t)c->data.crop[0] * c->data.crop[1] * c->data.crop[2], b};
    x.img = malloc(x.vox * (size_t)b * sizeof(float));
    x.lab = malloc(x.vox * (size_t)b);
    return x;
}
static void batch_free(batch *x) { free(x->img), free(x->lab); }
static int batch_read(void *rd, int64_t step, int64_t spe, batch *x) {
    tk_err e = {0};
    void *f[2] = {x->img, x->lab};
    int rc = u3_data_batch(rd, step, spe, f, &e);
    if (rc) printf("#   %s\n", e.what);
    return rc;
}

// Where sample k of x came from: the case (from its values), the crop's first voxel and flips;
// 0 when every voxel (image and label) is the case's voxel at that place.
typedef struct { int id; int64_t lo[3]; int flip[3]; } crop;
static int crop_decode(const batch *x, int k, const int P[3], const vol *cases, int ncases, crop *c) {
    const float *img = x->img + x->vox * (size_t)k;
    const uint8_t *lab = x->lab + x->vox * (size_t)k;
    int64_t first = (int64_t)img[0], last = (int64_t)img[x->vox - 1];
    c->id = (int)(first / ID_STEP);
    const vol *v = NULL;
    for (int i = 0; i < ncases; i++)
        if (cases[i].id == c->id) v = &cases[i];
    if (!v) return 1;
    first -= c->id * ID_STEP, last -= c->id * ID_STEP;
    int64_t a[3] = {first / (v->s[1] * v->s[2]), first / v->s[2] % v->s[1], first % v->s[2]};
    int64_t z[3] = {last / (v->s[1] * v->s[2]), last / v->s[2] % v->s[1], last % v->s[2]};
    for (int ax = 0; ax < 3; ax++) {
        c->flip[ax] = a[ax] > z[ax];
        c->lo[ax] = c->flip[ax] ? z[ax] : a[ax];
        if (c->lo[ax] < 0 || c->lo[ax] + P[ax] > v->s[ax]) return 1;
    }
    for (int64_t d = 0; d < P[0]; d++)
        for (int64_t h = 0; h < P[1]; h++)
            for (int64_t w = 0; w < P[2]; w++) {
                int64_t sd = c->lo[0] + (c->flip[0] ? P[0] - 1 - d : d);
                int64_t sh = c->lo[1] + (c->flip[1] ? P[1] - 1 - h : h);
                int64_t sw = c->lo[2] + (c->flip[2] ? P[2] - 1 - w : w);
                size_t o = (size_t)((d * P[1] + h) * P[2] + w);
                int64_t s = at(v, sd, sh, sw);
                if (img[o] != v->img[s] || lab[o] != v->lab[s]) return 1;
            }
    return 0;
}

// Batch `step` of a reader of b = 1 and its one sample's crop: 0 when all went well.
static int next_crop(void *rd, int64_t step, const u3_config *c, batch *x, const vol *cases, int ncases, crop *k) {
    return batch_read(rd, step, 1, x) || crop_decode(x, 0, c->data.crop, cases, ncases, k);
}

// |count - n p| within 5 binomial standard deviations
static int binomial_ok(int64_t count, int64_t n, double p) {
    double sd = sqrt(n * p * (1 - p)), dev = fabs((double)count - n * p);
    if (dev <= 5 * sd + 1e-9) return 1;
    printf("#   %lld of %lld, expected p %g (%.1f sigma away)\n", (long long)count, (long long)n, p, dev / sd);
    return 0;
}

static void *open_ok(const u3_config *c, int rank, int world, const char *path) {
    tk_err e = {0};
    char *paths[1] = {(char *)path};
    void *rd = NULL;
    if (u3_data_open(c, rank, world, paths, 1, &rd, &e)) printf("#   open: %s: %s\n", e.where, e.what);
    return rd;
}

// ---- the data section ----

static int parse_text(const char *text, u3_data_cfg *dc, tk_err *e) {
    json_t *j = json_loads(text, 0, NULL);
    if (!j) abort();
    int rc = u3_data_cfg_parse(j, "cfg.json", dc, e);
    json_decref(j);
    return rc;
}

TK_TEST(data_section_defaults_are_the_references) {
    u3_data_cfg dc;
    tk_err e = {0};
    CHECK_EQ_INT(u3_data_cfg_parse(NULL, "cfg.json", &dc, &e), 0);
    CHECK(dc.crop[0] == 128 && dc.crop[1] == 128 && dc.crop[2] == 128);
    CHECK(dc.oversampling == 0.4 && dc.flip == 1 && dc.shuffle == 1);
    CHECK(dc.brightness_prob == 0.1 && dc.brightness_factor == 0.3 && dc.noise_prob == 0.1 && dc.noise_std == 0.1);
    const char *text = "{\"crop\": [32, 48, 64], \"oversampling\": 1, \"flip\": false, \"shuffle\": false, "
                       "\"brightness\": {\"prob\": 0.5}, \"noise\": {\"std\": 0.2}, \"note\": \"tiny\"}";
    CHECK_EQ_INT(parse_text(text, &dc, &e), 0);
    CHECK(dc.crop[0] == 32 && dc.crop[1] == 48 && dc.crop[2] == 64);
    CHECK(dc.oversampling == 1 && dc.flip == 0 && dc.shuffle == 0);
    CHECK(dc.brightness_prob == 0.5 && dc.brightness_factor == 0.3 && dc.noise_prob == 0.1 && dc.noise_std == 0.2);
}

TK_TEST(data_section_errors_name_the_file_and_key) {
    struct { const char *json, *msg; } bad[] = {
        {"{\"crpo\": [32, 32, 32]}", "cfg.json: $.data.crpo: unknown key \"crpo\""},
        {"{\"noise\": {\"sdt\": 1}}", "cfg.json: $.data.noise.sdt: unknown key \"sdt\""},
        {"{\"brightness\": {\"p\": 1}}", "cfg.json: $.data.brightness.p: unknown key \"p\""},
        {"{\"crop\": [32, 32]}", "cfg.json: $.data.crop: expected an array of 3 integers in [1, 1024] (D, H, W)"},
        {"{\"crop\": [32, 0, 32]}", "cfg.json: $.data.crop: expected an array of 3 integers in [1, 1024] (D, H, W)"},
        {"{\"oversampling\": 1.5}", "cfg.json: $.data.oversampling: expected a number in [0, 1]"},
        {"{\"noise\": 0.1}", "cfg.json: $.data.noise: expected an object"},
        {"[1]", "cfg.json: $.data: expected an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        u3_data_cfg dc;
        tk_err e = {0};
        CHECK_EQ_INT(parse_text(bad[i].json, &dc, &e), TK_EDATA);
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        CHECK_STR(buf, bad[i].msg);
    }
}

// ---- crops ----

// One foreground voxel: with oversampling 1 every crop holds it, at the places the reference's
// adjust() gives: for a box of one voxel at c and a patch of 8, diff 7, ladj = randrange(7), the
// patch from c - ladj (the voxel at 0 .. 6 in it, never at 7), then moved inside the volume.
TK_TEST(oversampled_crops_hold_the_only_foreground_voxel) {
    vol v = vol_new(3, 40, 36, 44);
    v.lab[at(&v, 30, 5, 43)] = 2;
    const char *path = tk_test_path("u3data", "one_voxel.tks");
    write_cases(path, &v, 1, 7);
    u3_config c = cfg_make(8, 8, 8, 1);
    c.data.oversampling = 1;
    void *rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    CHECK_EQ_INT(u3_data_count(rd), 1);
    batch x = batch_new(&c, 1);
    int64_t pos0[8] = {0}, lo1[8] = {0}, other = 0;
    const int n = 3500;
    for (int s = 0; s < n; s++) {
        crop k;
        if (next_crop(rd, s, &c, &x, &v, 1, &k)) {
            CHECK(0);
            break;
        }
        int fg = 0;
        for (size_t i = 0; i < x.vox; i++) fg += x.lab[i] != 0;
        CHECK_EQ_INT(fg, 1);
        // axis 0: c = 30 of 40, never clipped: the voxel at 0 .. 6 of the patch, evenly
        pos0[30 - k.lo[0]]++;
        // axis 1: c = 5: 5 - ladj clipped at 0 for ladj 5 and 6: lo 0 twice as often as 1 .. 5
        lo1[k.lo[1]]++;
        // axis 2: c = 43, the last voxel: high clipped at 44 and the patch moved back to 36 always
        other += k.lo[2] != 36;
    }
    CHECK_EQ_INT(pos0[7], 0);
    for (int i = 0; i < 7; i++) CHECK(binomial_ok(pos0[i], n, 1.0 / 7));
    CHECK(binomial_ok(lo1[0], n, 2.0 / 7));
    for (int i = 1; i < 6; i++) CHECK(binomial_ok(lo1[i], n, 1.0 / 7));
    CHECK_EQ_INT(lo1[6] + lo1[7], 0);
    CHECK_EQ_INT(other, 0);
    batch_free(&x);
    u3_data_close(rd);
    vol_free(&v);
}

// Uniform crops: randrange(S - P) on each axis: 0 .. S - P - 1 (never S - P), 0 when S == P.
TK_TEST(uniform_crops_are_inside_and_uniform) {
    vol v = vol_new(1, 10, 8, 13);
    v.lab[at(&v, 2, 2, 2)] = 1; // foreground, not used with oversampling 0
    const char *path = tk_test_path("u3data", "uniform.tks");
    write_cases(path, &v, 1, 4);
    u3_config c = cfg_make(8, 8, 8, 1);
    void *rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    batch x = batch_new(&c, 1);
    int64_t lo0[3] = {0}, lo2[6] = {0}, bad = 0;
    const int n = 3000;
    for (int s = 0; s < n; s++) {
        crop k;
        if (next_crop(rd, s, &c, &x, &v, 1, &k)) {
            CHECK(0);
            break;
        }
        bad += k.lo[1] != 0 || k.flip[0] || k.flip[1] || k.flip[2];
        lo0[k.lo[0]]++;
        lo2[k.lo[2]]++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(lo0[2], 0);
    CHECK(binomial_ok(lo0[0], n, 0.5));
    CHECK_EQ_INT(lo2[5], 0);
    for (int i = 0; i < 5; i++) CHECK(binomial_ok(lo2[i], n, 0.2));
    batch_free(&x);
    u3_data_close(rd);
    vol_free(&v);
}

// The reference's object choice: a class among those present, then one of the two components
// with the largest bounding boxes (6-connected: voxels touching only at an edge are two), the
// whole box in the patch when it fits, the patch inside the box when it does not.
TK_TEST(oversampled_crops_take_the_two_largest_components_of_a_class) {
    vol v = vol_new(4, 64, 20, 20);
    // class 1: A, a 3x3x3 cube at d 2..4; B, two voxels touching at an edge (two components of
    // one voxel each) at d 20; C, a bar of 2 voxels at d 40 (box 2)
    for (int d = 2; d < 5; d++)
        for (int h = 8; h < 11; h++)
            for (int w = 8; w < 11; w++) v.lab[at(&v, d, h, w)] = 1;
    v.lab[at(&v, 20, 8, 8)] = 1, v.lab[at(&v, 20, 9, 9)] = 1;
    v.lab[at(&v, 40, 8, 8)] = 1, v.lab[at(&v, 40, 8, 9)] = 1;
    const char *path = tk_test_path("u3data", "components.tks");
    write_cases(path, &v, 1, 5);
    u3_config c = cfg_make(6, 6, 6, 1);
    c.data.oversampling = 1;
    void *rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    batch x = batch_new(&c, 1);
    int64_t a = 0, cc = 0, other = 0;
    const int n = 2000;
    for (int s = 0; s < n; s++) {
        crop k;
        if (next_crop(rd, s, &c, &x, &v, 1, &k)) {
            CHECK(0);
            break;
        }
        int64_t fg = 0;
        for (size_t i = 0; i < x.vox; i++) fg += x.lab[i];
        if (k.lo[0] <= 2 && k.lo[0] + 6 >= 5 && fg == 27) a++;        // all of A
        else if (k.lo[0] <= 40 && k.lo[0] + 6 > 40 && fg == 2) cc++;  // all of C
        else other++;                                                  // never B alone
    }
    CHECK_EQ_INT(other, 0);
    CHECK(binomial_ok(a, n, 0.5));
    u3_data_close(rd);

    // without C: two components of one voxel tie for second, B1 at (20, 2, 2) and B2 at
    // (20, 15, 15), numbered in that order: the later one, B2, as a stable argsort's last two
    v.lab[at(&v, 20, 8, 8)] = 0, v.lab[at(&v, 20, 9, 9)] = 0;
    v.lab[at(&v, 40, 8, 8)] = 0, v.lab[at(&v, 40, 8, 9)] = 0;
    v.lab[at(&v, 20, 2, 2)] = 1, v.lab[at(&v, 20, 15, 15)] = 1;
    write_cases(path, &v, 1, 5);
    rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    int64_t b2 = 0;
    a = other = 0;
    for (int s = 0; s < n; s++) {
        crop k;
        if (next_crop(rd, s, &c, &x, &v, 1, &k)) {
            CHECK(0);
            break;
        }
        int64_t fg = 0;
        for (size_t i = 0; i < x.vox; i++) fg += x.lab[i];
        int has_b2 = k.lo[0] <= 20 && k.lo[0] + 6 > 20 && k.lo[1] + 6 > 15 && k.lo[2] + 6 > 15;
        if (fg == 27) a++;
        else if (fg == 1 && has_b2) b2++;
        else other++;
    }
    CHECK_EQ_INT(other, 0);
    CHECK(binomial_ok(a, n, 0.5));
    v.lab[at(&v, 20, 2, 2)] = 0, v.lab[at(&v, 20, 15, 15)] = 0;
    batch_free(&x);
    u3_data_close(rd);

    // class 2 beside A, a bar of 20 voxels along D at d 30..49: longer than the patch of 6, so
    // the patch lies inside it at 30 + randrange(14); the class half the time
    for (int d = 30; d < 50; d++) v.lab[at(&v, d, 15, 15)] = 2;
    write_cases(path, &v, 1, 5);
    rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    x = batch_new(&c, 1);
    int64_t bar[64] = {0}, bars = 0;
    for (int s = 0; s < n; s++) {
        crop k;
        if (next_crop(rd, s, &c, &x, &v, 1, &k)) {
            CHECK(0);
            break;
        }
        int twos = 0;
        for (size_t i = 0; i < x.vox; i++) twos += x.lab[i] == 2;
        if (twos) {
            bars++;
            bar[k.lo[0]]++;
            CHECK_EQ_INT(twos, 6);
        }
    }
    CHECK(binomial_ok(bars, n, 0.5));
    for (int d = 0; d < 64; d++) {
        if (d >= 30 && d < 44) CHECK(binomial_ok(bar[d], n, 0.5 / 14));
        else CHECK_EQ_INT(bar[d], 0);
    }
    batch_free(&x);
    u3_data_close(rd);
    vol_free(&v);
}

// Each axis flipped with probability 1/3, independently; never with data.flip off.
TK_TEST(flips_reverse_each_axis_a_third_of_the_time) {
    vol v = vol_new(2, 6, 7, 9);
    for (int64_t i = 0; i < nvox(&v); i++) v.lab[i] = (uint8_t)(i % 3);
    const char *path = tk_test_path("u3data", "flips.tks");
    write_cases(path, &v, 1, 2);
    u3_config c = cfg_make(6, 7, 9, 1); // the whole volume: only the flips move voxels
    c.data.flip = 1;
    void *rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    batch x = batch_new(&c, 1);
    int64_t combo[8] = {0};
    const int n = 4000;
    for (int s = 0; s < n; s++) {
        crop k;
        if (next_crop(rd, s, &c, &x, &v, 1, &k)) {
            CHECK(0);
            break;
        }
        combo[k.flip[0] | k.flip[1] << 1 | k.flip[2] << 2]++;
    }
    for (int m = 0; m < 8; m++) {
        double p = 1;
        for (int a = 0; a < 3; a++) p *= m >> a & 1 ? 1.0 / 3 : 2.0 / 3;
        CHECK(binomial_ok(combo[m], n, p));
    }
    u3_data_close(rd);
    c.data.flip = 0;
    rd = open_ok(&c, 0, 1, path);
    for (int s = 0; rd && s < 200; s++) {
        crop k;
        CHECK(!next_crop(rd, s, &c, &x, &v, 1, &k));
        CHECK(!k.flip[0] && !k.flip[1] && !k.flip[2]);
    }
    batch_free(&x);
    u3_data_close(rd);
    vol_free(&v);
}

// Brightness: with its probability, every voxel times one scale 1 + U(0.7, 1.3) (the reference's
// image * (1 + factor)); noise: with its probability, N(0, s) with s = U(0, 0.1) per sample.
TK_TEST(brightness_and_noise_come_at_their_rates) {
    vol v = vol_new(0, 16, 16, 16);
    for (int64_t i = 0; i < nvox(&v); i++) v.img[i] = 1.0f + (float)(i % 97) / 32.0f; // no zeros
    const char *path = tk_test_path("u3data", "bright.tks");
    write_cases(path, &v, 1, 16);
    u3_config c = cfg_make(16, 16, 16, 1);
    c.data.brightness_prob = 0.1;
    void *rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    batch x = batch_new(&c, 1);
    const int n = 3000;
    int64_t scaled = 0, lowhalf = 0;
    double lo = 10, hi = 0;
    for (int s = 0; s < n; s++) {
        if (batch_read(rd, s, 1, &x)) {
            CHECK(0);
            break;
        }
        double scale = (double)x.img[0] / v.img[0];
        if (x.img[0] == v.img[0]) {
            CHECK(memcmp(x.img, v.img, x.vox * 4) == 0);
            continue;
        }
        scaled++;
        lo = fmin(lo, scale), hi = fmax(hi, scale);
        lowhalf += scale < 2.0;
        int same = 1; // one scale, each voxel rounded from double
        for (size_t i = 0; i < x.vox; i++) {
            double want = (double)v.img[i] * scale;
            same &= fabs(x.img[i] - want) <= 1e-6 * want;
        }
        CHECK(same);
    }
    CHECK(binomial_ok(scaled, n, 0.1));
    CHECK(lo >= 1.7 && lo < 1.75 && hi <= 2.3 && hi > 2.25);
    CHECK(binomial_ok(lowhalf, scaled, 0.5));
    u3_data_close(rd);

    c.data.brightness_prob = 0, c.data.noise_prob = 0.1;
    rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    int64_t noisy = 0, within1 = 0, count = 0;
    double ssum = 0, smax = 0;
    for (int s = 0; s < n; s++) {
        if (batch_read(rd, s, 1, &x)) {
            CHECK(0);
            break;
        }
        double sum = 0, sq = 0;
        for (size_t i = 0; i < x.vox; i++) {
            double r = (double)x.img[i] - v.img[i];
            sum += r, sq += r * r;
        }
        if (sq == 0) continue;
        noisy++;
        double mean = sum / x.vox, sd = sqrt(sq / x.vox);
        CHECK(fabs(mean) < 5 * sd / sqrt((double)x.vox) + 1e-6);
        ssum += sd, smax = fmax(smax, sd);
        for (size_t i = 0; i < x.vox; i++) within1 += fabs((double)x.img[i] - v.img[i]) < sd;
        count += (int64_t)x.vox;
    }
    CHECK(binomial_ok(noisy, n, 0.1));
    CHECK(noisy && fabs(ssum / noisy - 0.05) < 0.01); // U(0, 0.1): mean 0.05, sd of the mean 0.0029 * ...
    CHECK(smax <= 0.1 * 1.05);
    CHECK(count && fabs((double)within1 / count - 0.6827) < 0.01); // normal: 68.27% within one sd
    batch_free(&x);
    u3_data_close(rd);
    vol_free(&v);
}

// The noise's normals, over 21M voxels of zeros (each sample's std s estimated from its own
// voxels): N(0, 1) at 1, 2 and 3 s and beyond 3.4426 s (the ziggurat's tail), within 5 sigma.
TK_TEST(noise_is_normal_into_the_tails) {
    vol v = vol_new(0, 64, 64, 64);
    memset(v.img, 0, (size_t)nvox(&v) * sizeof(float));
    const char *path = tk_test_path("u3data", "zeros.tks");
    write_cases(path, &v, 1, 64);
    u3_config c = cfg_make(64, 64, 64, 1);
    c.data.noise_prob = 1;
    void *rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    batch x = batch_new(&c, 1);
    const double edge[4] = {1, 2, 3, 3.442619855899};
    int64_t beyond[4] = {0}, n = 0;
    for (int s = 0; s < 80; s++) {
        CHECK_EQ_INT(batch_read(rd, s, 1, &x), 0);
        double sq = 0;
        for (size_t i = 0; i < x.vox; i++) sq += (double)x.img[i] * x.img[i];
        double sd = sqrt(sq / x.vox);
        if (sd < 1e-3) continue; // s = U(0, 0.1) this small: too few bits in the floats
        for (size_t i = 0; i < x.vox; i++)
            for (int k = 0; k < 4; k++) beyond[k] += fabs(x.img[i]) > edge[k] * sd;
        n += (int64_t)x.vox;
    }
    CHECK(n >= 70 * (int64_t)x.vox);
    for (int k = 0; k < 4; k++) CHECK(binomial_ok(beyond[k], n, erfc(edge[k] / sqrt(2.0))));
    batch_free(&x);
    u3_data_close(rd);
    vol_free(&v);
}

// Oversampling 0.4 on a case where a uniform crop of 8 in 64 holds the one foreground voxel at
// (32, 32, 32) with probability (8/56)^3: crops holding it at 0.4 + 0.6 (1/7)^3.
TK_TEST(oversampling_rate_is_its_probability) {
    vol v = vol_new(5, 64, 64, 64);
    v.lab[at(&v, 32, 32, 32)] = 1;
    const char *path = tk_test_path("u3data", "rate.tks");
    write_cases(path, &v, 1, 20);
    u3_config c = cfg_make(8, 8, 8, 1);
    c.data.oversampling = 0.4;
    c.data.flip = 1;
    void *rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    batch x = batch_new(&c, 1);
    const int n = 5000;
    int64_t hit = 0;
    for (int s = 0; s < n; s++) {
        if (batch_read(rd, s, 1, &x)) {
            CHECK(0);
            break;
        }
        for (size_t i = 0; i < x.vox; i++) hit += x.lab[i];
    }
    CHECK(binomial_ok(hit, n, 0.4 + 0.6 / 343));
    batch_free(&x);
    u3_data_close(rd);
    vol_free(&v);
}

// ---- the epoch, determinism, ranks ----

static vol *some_cases(int n, int64_t S) {
    vol *v = calloc((size_t)n, sizeof *v);
    for (int i = 0; i < n; i++) {
        v[i] = vol_new(10 + 3 * i, S + i % 3, S, S + 1);
        v[i].lab[at(&v[i], i % S, 3, 4)] = (uint8_t)(1 + i % 2);
    }
    return v;
}

// data.shuffle off: position i of each epoch is case i; on: each epoch a permutation, not the
// same in every epoch.
TK_TEST(epochs_visit_the_cases_in_order_or_a_shuffle) {
    const int N = 9;
    vol *v = some_cases(N, 10);
    const char *path = tk_test_path("u3data", "nine.tks");
    write_cases(path, v, N, 4);
    u3_config c = cfg_make(8, 8, 8, 2);
    c.data.oversampling = 0.5, c.data.flip = 1, c.data.noise_prob = 0, c.data.brightness_prob = 0;
    void *rd = open_ok(&c, 0, 1, path);
    CHECK(rd != NULL);
    if (!rd) return;
    CHECK_EQ_INT(u3_data_count(rd), N);
    batch x = batch_new(&c, 2);
    const int spe = N / 2;
    for (int s = 0; s < 2 * spe; s++) {
        CHECK_EQ_INT(batch_read(rd, s, spe, &x), 0);
        for (int k = 0; k < 2; k++) {
            crop q;
            CHECK(!crop_decode(&x, k, c.data.crop, v, N, &q));
            CHECK_EQ_INT(q.id, v[s % spe * 2 + k].id);
        }
    }
    u3_data_close(rd);
    c.data.shuffle = 1;
    rd = open_ok(&c, 0, 1, path);
    int order[3][8], differ = 0;
    for (int ep = 0; ep < 3; ep++) {
        int seen[64] = {0};
        for (int s = 0; s < spe; s++) {
            CHECK_EQ_INT(batch_read(rd, ep * spe + s, spe, &x), 0);
            for (int k = 0; k < 2; k++) {
                crop q;
                CHECK(!crop_decode(&x, k, c.data.crop, v, N, &q));
                CHECK(q.id >= 10 && q.id < 10 + 3 * N && !seen[q.id]++);
                order[ep][2 * s + k] = q.id;
            }
        }
        if (ep) differ += memcmp(order[ep], order[0], sizeof order[0]) != 0;
    }
    CHECK(differ > 0);
    batch_free(&x);
    u3_data_close(rd);
    for (int i = 0; i < N; i++) vol_free(&v[i]);
    free(v);
}

typedef struct {
    void *rd;
    int64_t s0, n, spe;
    batch x;
    uint8_t *out;                // n batches of bytes (images, then labels)
    int rc;
} job;

static void *job_run(void *arg) {
    job *j = arg;
    size_t per = j->x.vox * (size_t)j->x.b * 5;
    for (int64_t s = 0; s < j->n && !j->rc; s++) {
        j->rc = batch_read(j->rd, j->s0 + s, j->spe, &j->x);
        memcpy(j->out + s * per, j->x.img, j->x.vox * (size_t)j->x.b * 4);
        memcpy(j->out + s * per + j->x.vox * (size_t)j->x.b * 4, j->x.lab, j->x.vox * (size_t)j->x.b);
    }
    return NULL;
}

// The same step gives the same bytes from any reader, in any thread, in any order; another seed
// others; and the ranks' shares, side by side, are world 1's batch.
TK_TEST(batches_depend_on_the_step_only_and_split_over_ranks) {
    const int N = 12, steps = 9; // 3 steps an epoch of 4: three epochs
    vol *v = some_cases(N, 10);
    const char *path = tk_test_path("u3data", "twelve.tks");
    write_cases(path, v, N, 3);
    u3_config c = cfg_make(8, 8, 6, 4);
    c.data.oversampling = 0.4, c.data.flip = 1, c.data.brightness_prob = 0.3, c.data.noise_prob = 0.3;
    c.data.shuffle = 1;
    const size_t per = (size_t)8 * 8 * 6 * 4 * 5;
    // the reference: one reader, in order
    job ref = {open_ok(&c, 0, 1, path), 0, steps, 3, batch_new(&c, 4), malloc(per * steps), 0};
    job_run(&ref);
    CHECK_EQ_INT(ref.rc, 0);
    // four readers in four threads, each a different range of steps, backwards among them
    job j[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        j[i] = (job){open_ok(&c, 0, 1, path), (3 - i) * 2, i == 0 ? 3 : 2, 3, batch_new(&c, 4), malloc(per * 3), 0};
        pthread_create(&t[i], NULL, job_run, &j[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_INT(j[i].rc, 0);
        CHECK(memcmp(j[i].out, ref.out + per * j[i].s0, per * j[i].n) == 0);
        u3_data_close(j[i].rd);
        batch_free(&j[i].x);
        free(j[i].out);
    }
    // the ranks: world 2 and 4, each rank its b samples of the same global batch
    for (int world = 2; world <= 4; world += 2) {
        int b = 4 / world;
        for (int r = 0; r < world; r++) {
            job q = {open_ok(&c, r, world, path), 0, steps, 3, batch_new(&c, b), malloc(per / world * steps), 0};
            job_run(&q);
            CHECK_EQ_INT(q.rc, 0);
            const size_t vox = q.x.vox;
            int same = 1;
            for (int s = 0; s < steps; s++) {
                const uint8_t *g = ref.out + per * s, *m = q.out + per / world * s;
                same &= memcmp(m, g + vox * 4 * (size_t)(r * b), vox * 4 * (size_t)b) == 0;
                same &= memcmp(m + vox * 4 * (size_t)b, g + vox * 16 + vox * (size_t)(r * b), vox * (size_t)b) == 0;
            }
            CHECK(same);
            u3_data_close(q.rd);
            batch_free(&q.x);
            free(q.out);
        }
    }
    // another seed: other samples
    c.seed = 1235;
    job o = {open_ok(&c, 0, 1, path), 0, 1, 3, batch_new(&c, 4), malloc(per), 0};
    job_run(&o);
    CHECK(memcmp(o.out, ref.out, per) != 0);
    u3_data_close(o.rd);
    batch_free(&o.x);
    free(o.out);
    u3_data_close(ref.rd);
    batch_free(&ref.x);
    free(ref.out);
    for (int i = 0; i < N; i++) vol_free(&v[i]);
    free(v);
}

// ---- bad records ----

static void expect_bad(int *tk_failed_, const char *path, const char *what, const char *where) {
    u3_config c = cfg_make(4, 4, 4, 1);
    char *paths[1] = {(char *)path}, buf[1024];
    void *rd = NULL;
    tk_err e = {0};
    CHECK_EQ_INT(u3_data_open(&c, 0, 1, paths, 1, &rd, &e), TK_EDATA);
    CHECK(rd == NULL);
    tk_err_format(&e, buf, sizeof buf);
    if (!strstr(buf, what) || !strstr(buf, where)) printf("#   got: %s\n#   want: %s ... %s\n", buf, where, what);
    CHECK(strstr(buf, what) && strstr(buf, where));
    u3_cases cs;
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(u3_cases_load(paths, 1, 0, 2, &cs, &e), TK_EDATA);
    CHECK(cs.n == 0 && cs.c == NULL);
    tk_err_format(&e, buf, sizeof buf);
    CHECK(strstr(buf, what) && strstr(buf, where));
}

TK_TEST(bad_records_are_data_errors_naming_the_file_and_record) {
    vol a = vol_new(1, 9, 5, 6), b = vol_new(2, 6, 5, 6);
    char where[600];
    const char *p = tk_test_path("u3data", "bad.tks");
    // a case twice
    write_recs(p, (rec[]){{&a, 0, 9}, {&b, 0, 6}, {&a, 0, 5}, {&a, 5, 4}}, 4);
    snprintf(where, sizeof where, "%s: record 2", p);
    expect_bad(tk_failed_, p, "case 1 again: its records are not all together", where);
    // a case's last slab missing: the file's end
    write_recs(p, (rec[]){{&b, 0, 6}, {&a, 0, 3}, {&a, 3, 3}}, 3);
    snprintf(where, sizeof where, "%s: record 2", p);
    expect_bad(tk_failed_, p, "case 1 ends after slice 6 of its 9: the records of its last slices are missing "
                              "(truncated)", where);
    // ... or another case's first record where its next slab should be
    write_recs(p, (rec[]){{&a, 0, 3}, {&b, 0, 6}, {&a, 3, 6}}, 3);
    snprintf(where, sizeof where, "%s: record 1", p);
    expect_bad(tk_failed_, p, "case 1 ends after slice 3 of its 9: the records of its slices 3.. are missing (this record: "
                  "case 2, z 0)", where);
    // slabs out of order
    write_recs(p, (rec[]){{&b, 0, 6}, {&a, 0, 3}, {&a, 6, 3}, {&a, 3, 3}}, 4);
    snprintf(where, sizeof where, "%s: record 2", p);
    expect_bad(tk_failed_, p, "case 1: a slab at z 6, expected z 3: its records are out of order", where);
    write_recs(p, (rec[]){{&a, 3, 3}, {&a, 0, 3}, {&a, 6, 3}}, 3);
    snprintf(where, sizeof where, "%s: record 0", p);
    expect_bad(tk_failed_, p, "case 1 begins at z 3, not 0", where);
    // a label 3
    b.lab[at(&b, 4, 2, 5)] = 3;
    write_recs(p, (rec[]){{&a, 0, 9}, {&b, 0, 3}, {&b, 3, 3}}, 3);
    snprintf(where, sizeof where, "%s: record 2", p);
    expect_bad(tk_failed_, p, "case 2: label 3 at voxel (4, 2, 5): expected 0, 1 or 2", where);
    b.lab[at(&b, 4, 2, 5)] = 0;
    b.img[at(&b, 1, 1, 1)] = NAN;
    write_recs(p, (rec[]){{&b, 0, 6}}, 1);
    snprintf(where, sizeof where, "%s: record 0", p);
    expect_bad(tk_failed_, p, "case 2: image value nan at voxel (1, 1, 1): not a finite number", where);
    // shapes and lengths
    write_raw(p, 5, (int32_t[]){2048, 1024, 1025}, 0, 1024 * 1025);
    snprintf(where, sizeof where, "%s: record 0", p);
    expect_bad(tk_failed_, p, "case 5: shape (2048, 1024, 1025): more than 2^31 voxels", where);
    write_raw(p, 5, (int32_t[]){4, 0, 5}, 0, 0);
    expect_bad(tk_failed_, p, "case 5: shape (4, 0, 5): expected 1 to 65535 voxels an axis", where);
    write_raw(p, 5, (int32_t[]){4, 3, 5}, 0, 16);
    expect_bad(tk_failed_, p, "case 5: 16 image values and 16 labels: expected the same whole number of 3 x 5 slices",
               where);
    write_raw(p, 5, (int32_t[]){4, 3, 5}, 2, 45);
    expect_bad(tk_failed_, p, "case 5 begins at z 2, not 0", where);
    write_raw(p, 5, (int32_t[]){4, 3, 5}, 0, 75);
    expect_bad(tk_failed_, p, "case 5: slices 0 .. 4, past its 4", where);
    vol_free(&a);
    vol_free(&b);
}

TK_TEST(a_case_smaller_than_the_crop_and_other_records_are_refused) {
    vol a = vol_new(7, 9, 12, 12);
    const char *p = tk_test_path("u3data", "small.tks");
    write_cases(p, &a, 1, 9);
    u3_config c = cfg_make(10, 10, 10, 1);
    char *paths[1] = {(char *)p}, buf[1024];
    void *rd = NULL;
    tk_err e = {0};
    CHECK_EQ_INT(u3_data_open(&c, 0, 1, paths, 1, &rd, &e), TK_EDATA);
    tk_err_format(&e, buf, sizeof buf);
    char want[900];
    snprintf(want, sizeof want, "%s: case 7 of shape (9, 12, 12) is smaller than the training crop data.crop (10, 10, "
             "10) (hint: prep kits19 pads every case to at least 128 voxels an axis; choose a smaller data.crop)", p);
    CHECK_STR(buf, want);
    // a file of other records
    tks_schema s = {0};
    s.nfields = 1;
    snprintf(s.f[0].name, sizeof s.f[0].name, "x");
    s.f[0].dtype = TKS_F32;
    CHECK_EQ_INT(tks_schema_finish(&s, &e), 0);
    tks_writer *w;
    const char *q = tk_test_path("u3data", "other.tks");
    float one = 1;
    const void *cols[1] = {&one};
    CHECK(!tks_writer_open(&w, q, &s, NULL, &e) && !tks_writer_append(w, cols, 1, &e) && !tks_writer_close(w, &e));
    paths[0] = (char *)q;
    c = cfg_make(4, 4, 4, 1);
    CHECK_EQ_INT(u3_data_open(&c, 0, 1, paths, 1, &rd, &e), TK_EDATA);
    tk_err_format(&e, buf, sizeof buf);
    CHECK(strstr(buf, q) && strstr(buf, "not KiTS19 records"));
    vol_free(&a);
}

// ---- the eval cases: prep kits19's .tks against its .npy files ----

static void nifti_case(const char *dir, int id, const int64_t dims[3], double sp0, uint64_t seed) {
    char d[600], f[700];
    snprintf(d, sizeof d, "%s/case_%05d", dir, id);
    if (mkdir(d, 0755) && errno != EEXIST) abort();
    tk_nifti *img, *seg;
    tk_err e = {0};
    if (tk_nifti_new(&img, 3, dims, TK_NIFTI_FLOAT32, &e) || tk_nifti_new(&seg, 3, dims, TK_NIFTI_UINT8, &e)) abort();
    img->pixdim[1] = sp0, img->pixdim[2] = img->pixdim[3] = 1.2;
    seg->pixdim[1] = sp0, seg->pixdim[2] = seg->pixdim[3] = 1.2;
    float *x = img->data;
    uint8_t *y = seg->data;
    for (size_t i = 0; i < img->nvox; i++) {
        uint64_t r = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        x[i] = (float)(r % 600) - 200.0f;
        y[i] = (uint8_t)(r >> 20) % 7 == 0 ? 1 + ((r >> 30) & 1) : 0;
    }
    snprintf(f, sizeof f, "%s/imaging.nii.gz", d);
    if (tk_nifti_write(f, img, 1, &e)) abort();
    snprintf(f, sizeof f, "%s/segmentation.nii.gz", d);
    if (tk_nifti_write(f, seg, 1, &e)) abort();
    tk_nifti_free(img);
    tk_nifti_free(seg);
}

// The data of an .npy file (after its header), *n bytes.
static uint8_t *npy_data(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    uint8_t *b = malloc((size_t)size);
    fseek(f, 0, SEEK_SET);
    if (fread(b, 1, (size_t)size, f) != (size_t)size) abort();
    fclose(f);
    size_t h = 10 + (size_t)(b[8] | b[9] << 8);
    *n = (size_t)size - h;
    memmove(b, b + h, *n);
    return b;
}

TK_TEST(eval_cases_are_prep_kits19s_npy_round_robin_by_rank) {
    const char *dir = tk_test_path("u3data", "kits");
    mkdir(dir, 0755);
    int ids[5] = {0, 3, 4, 7, 9};
    int64_t dims[5][3] = {{100, 90, 80}, {140, 60, 70}, {90, 100, 100}, {120, 80, 90}, {80, 80, 130}};
    for (int i = 0; i < 5; i++) nifti_case(dir, ids[i], dims[i], i % 2 ? 1.6 : 2.0, (uint64_t)i);
    char evl[700], out[700], npy[700];
    snprintf(evl, sizeof evl, "%s/evaluation_cases.txt", dir);
    FILE *f = fopen(evl, "w");
    fputs("00000\n00004\n00007\n00009\n", f); // 4 eval cases, one training case
    fclose(f);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(npy, sizeof npy, "%s/npy", dir);
    kits19_prep_opts o = {.data_dir = dir, .out_dir = out, .npy_dir = npy, .eval_cases = evl,
                          .record_bytes = (size_t)128 * 128 * 5 * 7}; // 7 slices a record: several a case
    kits19_prep_stats st;
    tk_err e = {0};
    CHECK_EQ_INT(kits19_prep(&o, &st, &e), 0);
    kits19_prep_stats_free(&st);
    char evtks[800];
    snprintf(evtks, sizeof evtks, "%s/eval.tks", out);
    char *paths[1] = {evtks};
    const int ev[4] = {0, 4, 7, 9};
    for (int world = 1; world <= 3; world++)
        for (int r = 0; r < world; r++) {
            u3_cases cs;
            CHECK_EQ_INT(u3_cases_load(paths, 1, r, world, &cs, &e), 0);
            CHECK_EQ_INT(cs.total, 4);
            int k = 0;
            for (int i = r; i < 4; i += world, k++) {
                if (k >= cs.n) break;
                const u3_case *c = &cs.c[k];
                CHECK_EQ_INT(c->id, ev[i]);
                char px[900], py[900];
                snprintf(px, sizeof px, "%s/case_%05d_x.npy", npy, ev[i]);
                snprintf(py, sizeof py, "%s/case_%05d_y.npy", npy, ev[i]);
                size_t nx = 0, ny = 0;
                uint8_t *x = npy_data(px, &nx), *y = npy_data(py, &ny);
                size_t n = (size_t)(c->shape[0] * c->shape[1] * c->shape[2]);
                CHECK(c->shape[0] >= 128 && c->shape[1] >= 128 && c->shape[2] >= 128);
                CHECK(x && y && nx == n * 4 && ny == n);
                CHECK(x && memcmp(x, c->image, nx) == 0);
                CHECK(y && memcmp(y, c->label, ny) == 0);
                free(x), free(y);
            }
            CHECK_EQ_INT(cs.n, k);
            u3_cases_free(&cs);
        }
}

TK_TEST(zz_cleanup) { CHECK_EQ_INT(tk_test_rmdir(), 0); }
