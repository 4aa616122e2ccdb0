// Synthetic ImageNet in the real raw layout (imagenet.h, prep(1) "prep synth imagenet"): JPEG
// files whose class is planted in three cues that survive random-resized crops and flips:
//   colour   the background hue (10 hues, 36 degrees apart);
//   texture  the background's texture type (stripes, checks, dots, grid, rings, zigzag, plaid,
//            spokes, blobs, flat), at a random period and orientation;
//   shape    the type of the 3-7 objects drawn on it (circle, square, triangle, diamond, cross,
//            ring, star, half disc, ellipse, frame), at random places, sizes and rotations.
// Class c has cues (c % 10, (c / 10 + 3 c) % 10, (c / 100 + 7 c) % 10): a one-to-one map for up
// to 1000 classes, and for fewer classes every cue still varies with c. Each image replaces each
// cue, with probability cue_noise, by a uniformly drawn one, so a perfect classifier that sees
// the whole image reaches bayes_top1 (manifest.json), computed exactly below.
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/afile.h"
#include "core/philox.h"
#include "image/codec.h"
#include "imagenet/imagenet.h"

#define CUE_NOISE 0.0974 // (1 - 0.9 p)^3 = 0.759 for 1000 classes: ImageNet's MLPerf target, about

void imagenet_synth_wnid(int c, char out[16]) { snprintf(out, 16, "n%08d", 1000000 + 1000 * c + (c * 7) % 1000); }

static void cues_of(int c, int cue[3]) {
    cue[0] = c % 10;
    cue[1] = (c / 10 + 3 * c) % 10;
    cue[2] = (c / 100 + 7 * c) % 10;
}

// A per-image stream of uniforms from Philox (seed, TK_RNG_SYNTH, image id).
typedef struct {
    uint64_t seed, id;
    uint32_t k;
    tk_philox_ctr cur;
    int used;
} rng;

static double uni(rng *r) {
    if (r->used == 0 || r->used == 4) {
        r->cur = tk_philox_draw(r->seed, TK_RNG_SYNTH, (r->id << 16) | r->k++);
        r->used = 0;
    }
    uint32_t a = r->cur.v[r->used++];
    return (a + 0.5) / 4294967296.0;
}

static void hsv(double h, double s, double v, double rgb[3]) {
    h = fmod(h, 360.0);
    if (h < 0) h += 360.0;
    double c = v * s, x = c * (1 - fabs(fmod(h / 60.0, 2) - 1)), m = v - c;
    double r = 0, g = 0, b = 0;
    switch ((int)(h / 60.0) % 6) {
    case 0: r = c, g = x; break;
    case 1: r = x, g = c; break;
    case 2: g = c, b = x; break;
    case 3: g = x, b = c; break;
    case 4: r = x, b = c; break;
    default: r = c, b = x; break;
    }
    rgb[0] = 255 * (r + m);
    rgb[1] = 255 * (g + m);
    rgb[2] = 255 * (b + m);
}

static double hash01(int x, int y, uint32_t salt) { // smooth-noise lattice values
    uint32_t h = (uint32_t)x * 73856093u ^ (uint32_t)y * 19349663u ^ salt * 83492791u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return (h & 0xffff) / 65535.0;
}

// Texture type t at pixel (x, y): a value in [-1, 1].
typedef struct {
    int type;
    double period, ca, sa, cx, cy;
    uint32_t salt;
} texture;

static double texture_at(const texture *t, double x, double y) {
    double s = (x * t->ca + y * t->sa) / t->period, u = (-x * t->sa + y * t->ca) / t->period;
    double tp = 2 * M_PI;
    switch (t->type) {
    case 0: return sin(tp * s);
    case 1: return sin(tp * s) * sin(tp * u) > 0 ? 1 : -1;
    case 2: return cos(tp * s) + cos(tp * u) > 1.0 ? 1 : -0.6;
    case 3: return fabs(sin(M_PI * s)) < 0.18 || fabs(sin(M_PI * u)) < 0.18 ? 1 : -0.4;
    case 4: return sin(tp * sqrt((x - t->cx) * (x - t->cx) + (y - t->cy) * (y - t->cy)) / t->period);
    case 5: return sin(tp * (s + 0.5 * fabs(fmod(u, 2.0) - 1.0)));
    case 6: return 0.5 * (sin(tp * s) + sin(tp * u / 1.7));
    case 7: return sin(8 * atan2(y - t->cy, x - t->cx));
    case 8: { // value noise, bilinear between lattice points one period apart
        double fs = floor(s), fu = floor(u), ds = s - fs, du = u - fu;
        int i = (int)fs, j = (int)fu;
        double a = hash01(i, j, t->salt), b = hash01(i + 1, j, t->salt), c = hash01(i, j + 1, t->salt),
               d = hash01(i + 1, j + 1, t->salt);
        return 2 * ((a * (1 - ds) + b * ds) * (1 - du) + (c * (1 - ds) + d * ds) * du) - 1;
    }
    default: return 0;
    }
}

// Shape type k: is the point (u, v) (shape coordinates, unit size) inside?
static int inside(int k, double u, double v) {
    double r = sqrt(u * u + v * v), au = fabs(u), av = fabs(v), m = au > av ? au : av;
    switch (k) {
    case 0: return r <= 1;
    case 1: return m <= 0.8;
    case 2: return v >= -0.7 && v <= 0.9 && au <= (0.9 - v) * 0.62;
    case 3: return au + av <= 1;
    case 4: return (au <= 0.3 && av <= 1) || (av <= 0.3 && au <= 1);
    case 5: return r >= 0.55 && r <= 1;
    case 6: return r <= 0.45 + 0.55 * fabs(cos(2.5 * atan2(v, u)));
    case 7: return r <= 1 && v >= 0;
    case 8: return u * u + v * v / 0.16 <= 1;
    default: return m >= 0.55 && m <= 0.9;
    }
}

typedef struct {
    double x, y, size, c, s;
    double rgb[3];
} object;

// Renders image `id` of class c into px (w x h RGB).
static void render(uint64_t seed, uint64_t id, int c, double noise, int w, int h, uint8_t *px) {
    rng r = {seed, id, 0, {{0}}, 0};
    int cue[3];
    cues_of(c, cue);
    for (int k = 0; k < 3; k++)
        if (uni(&r) < noise) cue[k] = (int)(uni(&r) * 10) % 10;
    double base[3], mn = w < h ? w : h;
    hsv(cue[0] * 36.0 + (uni(&r) - 0.5) * 12, 0.45 + 0.3 * uni(&r), 0.55 + 0.3 * uni(&r), base);
    double ang = uni(&r) * M_PI;
    texture t = {cue[1], mn / (10 + 14 * uni(&r)), cos(ang), sin(ang), uni(&r) * w, uni(&r) * h, (uint32_t)(uni(&r) * 1e9)};
    object ob[7];
    int nob = 3 + (int)(uni(&r) * 5);
    for (int i = 0; i < nob; i++) {
        double a = uni(&r) * 2 * M_PI;
        ob[i] = (object){uni(&r) * w, uni(&r) * h, mn * (0.08 + 0.14 * uni(&r)), cos(a), sin(a), {0}};
        hsv(cue[0] * 36.0 + 180 + (uni(&r) - 0.5) * 40, 0.5 + 0.4 * uni(&r), 0.35 + 0.6 * uni(&r), ob[i].rgb);
    }
    double bright = 0.85 + 0.3 * uni(&r);
    uint32_t nsalt = (uint32_t)(uni(&r) * 4e9);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double v = 1 + 0.3 * texture_at(&t, x, y), p[3];
            for (int k = 0; k < 3; k++) p[k] = base[k] * v;
            for (int i = 0; i < nob; i++) {
                double dx = (x - ob[i].x) / ob[i].size, dy = (y - ob[i].y) / ob[i].size;
                if (fabs(dx) > 1.5 || fabs(dy) > 1.5) continue;
                if (inside(cue[2], dx * ob[i].c + dy * ob[i].s, -dx * ob[i].s + dy * ob[i].c))
                    for (int k = 0; k < 3; k++) p[k] = ob[i].rgb[k];
            }
            double n = 12 * (hash01(x, y, nsalt) - 0.5);
            for (int k = 0; k < 3; k++) {
                double q = p[k] * bright + n;
                px[((size_t)y * w + x) * 3 + k] = (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q + 0.5);
            }
        }
}

// The exact accuracy of the best classifier that sees all three (noisy) cues, with uniform
// class priors: (1/K) sum over cue triples of max over classes of P(triple | class).
static double bayes_top1(int K, double p) {
    double q = 1 - p + p / 10, o = p / 10, sum = 0;
    for (int a = 0; a < 1000; a++) {
        int obs[3] = {a % 10, a / 10 % 10, a / 100}, best = 0;
        double m = 0;
        for (int c = 0; c < K; c++) {
            int cue[3];
            cues_of(c, cue);
            double pr = 1;
            for (int k = 0; k < 3; k++) pr *= cue[k] == obs[k] ? q : o;
            if (pr > m) m = pr, best = c;
        }
        (void)best;
        sum += m;
    }
    return sum / K;
}

// The size of one image: mostly the typical size, landscape or portrait, sometimes another shape.
static void image_size(uint64_t seed, uint64_t id, int W, int H, int *w, int *h) {
    tk_philox_ctr d = tk_philox_draw(seed, TK_RNG_SYNTH, (id << 16) | 0xffff);
    double u = tk_u32_to_unit(d.v[0]);
    if (u < 0.7) *w = W, *h = H;
    else if (u < 0.85) *w = H, *h = W;
    else {
        double lng = W * (0.6 + 0.4 * tk_u32_to_unit(d.v[1])), asp = 1.0 + 0.8 * tk_u32_to_unit(d.v[2]);
        int a = (int)lng, b = (int)(lng / asp);
        if (d.v[3] & 1) *w = a, *h = b;
        else *w = b, *h = a;
    }
    *w = *w < 8 ? 8 : *w;
    *h = *h < 8 ? 8 : *h;
}

typedef enum { PLAIN = 0, GRAY, CMYK, PNG } oddity;

// Which files are odd: class 0's train images 1, 2, 3 (when there) and val image 2 for sure,
// then each file with probability odd_fraction per kind.
static oddity oddity_of(const imagenet_synth_opts *o, uint64_t id, int train, int c, int k) {
    if (train && c == 0 && k >= 1 && k <= 3) return (oddity)k;
    if (!train && k == 1) return CMYK;
    tk_philox_ctr d = tk_philox_draw(o->seed, TK_RNG_SYNTH, (id << 16) | 0xfffe);
    double u = tk_u32_to_unit(d.v[0]);
    return u < o->odd_fraction ? GRAY : u < 2 * o->odd_fraction ? CMYK : u < 3 * o->odd_fraction ? PNG : PLAIN;
}

static int write_bytes(const char *path, const void *p, size_t n, tk_err *e) {
    FILE *f = fopen(path, "wb");
    if (!f) return tk_err_errno(e, errno, "%s: cannot create", path);
    int rc = tk_write_all(f, p, n, path, e);
    if (fclose(f) != 0 && !rc) rc = tk_err_errno(e, errno, "%s: write failed", path);
    return rc;
}

// One image file: rendered, encoded (its oddity), written. *bytes gets its size.
static int make_image(const imagenet_synth_opts *o, const char *path, uint64_t id, int c, oddity odd, size_t *bytes,
                      tk_err *e) {
    int w, h;
    image_size(o->seed, id, o->width, o->height, &w, &h);
    uint8_t *px = malloc((size_t)w * h * 3), *out = NULL;
    if (!px) return tk_err_errno(e, ENOMEM, "out of memory");
    render(o->seed, id, c, CUE_NOISE, w, h, px);
    size_t n = 0;
    int rc;
    if (odd == GRAY) {
        for (size_t i = 0; i < (size_t)w * h; i++) // ITU-R BT.601 luma, as JPEG's Y
            px[i] = (uint8_t)(0.299 * px[3 * i] + 0.587 * px[3 * i + 1] + 0.114 * px[3 * i + 2] + 0.5);
        rc = tk_jpeg_encode(px, w, h, 1, o->quality, 1, &out, &n, e);
    } else if (odd == CMYK) {
        rc = tk_jpeg_encode_cmyk(px, w, h, o->quality, &out, &n, e);
    } else if (odd == PNG) {
        rc = tk_png_encode(px, w, h, &out, &n, e);
    } else {
        rc = tk_jpeg_encode(px, w, h, 3, o->quality, 1, &out, &n, e);
    }
    if (!rc) rc = write_bytes(path, out, n, e);
    *bytes = n;
    free(px);
    free(out);
    return rc;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int text_file(const char *path, const char *text, size_t n, tk_err *e) { return write_bytes(path, text, n, e); }

// The label files and the manifest.
static int write_meta(const char *tmp, const imagenet_synth_opts *o, const int *val_class, uint64_t nval,
                      const imagenet_synth_stats *st, tk_err *e) {
    int K = o->classes, rc = 0;
    size_t cap = (size_t)(nval + (uint64_t)K + 16) * 80;
    char *buf = malloc(cap), path[4400];
    if (!buf) return tk_err_errno(e, ENOMEM, "out of memory");
    static const char *const hue[] = {"red", "orange", "yellow", "lime", "green", "teal", "cyan", "blue", "purple", "magenta"};
    static const char *const tex[] = {"stripes", "checks", "dots", "grid", "rings", "zigzag", "plaid", "spokes", "blobs", "flat"};
    static const char *const shp[] = {"circles", "squares", "triangles", "diamonds", "crosses", "rings", "stars", "half discs", "ellipses", "frames"};
    // LOC_synset_mapping.txt: sorted "wnid description"
    size_t k = 0;
    for (int c = 0; c < K; c++) {
        char id[16];
        int cue[3];
        imagenet_synth_wnid(c, id);
        cues_of(c, cue);
        k += (size_t)snprintf(buf + k, cap - k, "%s synthetic class %d: %s, %s, %s\n", id, c, hue[cue[0]], tex[cue[1]], shp[cue[2]]);
    }
    snprintf(path, sizeof path, "%s/LOC_synset_mapping.txt", tmp);
    rc = text_file(path, buf, k, e);
    // LOC_val_solution.csv (Kaggle), synset_labels.txt (TensorFlow's per-image list)
    for (int f = 0; f < 2 && !rc; f++) {
        k = f ? 0 : (size_t)snprintf(buf, cap, "ImageId,PredictionString\n");
        for (uint64_t i = 0; i < nval; i++) {
            char id[16];
            int w, h;
            imagenet_synth_wnid(val_class[i], id);
            image_size(o->seed, (2ull << 40) + i, o->width, o->height, &w, &h);
            if (f) k += (size_t)snprintf(buf + k, cap - k, "%s\n", id);
            else k += (size_t)snprintf(buf + k, cap - k, "ILSVRC2012_val_%08llu,%s 0 0 %d %d \n", (unsigned long long)i + 1, id, w - 1, h - 1);
        }
        snprintf(path, sizeof path, "%s/%s", tmp, f ? "synset_labels.txt" : "LOC_val_solution.csv");
        rc = text_file(path, buf, k, e);
    }
    // The devkit form: ILSVRC2012_IDs in a shuffled synset order, and that order.
    int *order = malloc((size_t)K * sizeof *order), *id_of = malloc((size_t)K * sizeof *id_of);
    if (!rc && (!order || !id_of)) rc = tk_err_errno(e, ENOMEM, "out of memory");
    for (int c = 0; !rc && c < K; c++) order[c] = c;
    for (int c = K; !rc && c > 1; c--) {
        tk_philox_ctr d = tk_philox_draw(o->seed, TK_RNG_SHUFFLE, (uint64_t)c);
        int j = (int)(d.v[0] % (uint32_t)c), t = order[c - 1];
        order[c - 1] = order[j];
        order[j] = t;
    }
    for (int i = 0; !rc && i < K; i++) id_of[order[i]] = i + 1;
    if (!rc) {
        k = 0;
        for (int i = 0; i < K; i++) {
            char id[16];
            imagenet_synth_wnid(order[i], id);
            k += (size_t)snprintf(buf + k, cap - k, "%s\n", id);
        }
        snprintf(path, sizeof path, "%s/devkit_synsets.txt", tmp);
        rc = text_file(path, buf, k, e);
    }
    if (!rc) {
        k = 0;
        for (uint64_t i = 0; i < nval; i++) k += (size_t)snprintf(buf + k, cap - k, "%d\n", id_of[val_class[i]]);
        snprintf(path, sizeof path, "%s/ILSVRC2012_validation_ground_truth.txt", tmp);
        rc = text_file(path, buf, k, e);
    }
    free(order);
    free(id_of);
    if (!rc) {
        k = (size_t)snprintf(
            buf, cap,
            "{\n  \"generator\": \"trainkit prep synth imagenet\",\n  \"format_version\": 1,\n  \"seed\": %llu,\n"
            "  \"classes\": %d,\n  \"train_per_class\": %d,\n  \"val_per_class\": %d,\n  \"width\": %d,\n  \"height\": %d,\n"
            "  \"quality\": %d,\n  \"odd_fraction\": %.6g,\n  \"cue_noise\": %.6g,\n"
            "  \"cues\": \"class c: hue c%%10, texture (c/10+3c)%%10, shape (c/100+7c)%%10; each replaced at random with probability cue_noise\",\n"
            "  \"bayes_top1_full_view\": %.6f,\n  \"target_top1\": null,\n"
            "  \"train_images\": %llu,\n  \"val_images\": %llu,\n  \"grayscale\": %llu,\n  \"cmyk\": %llu,\n  \"png\": %llu,\n"
            "  \"bytes\": %llu,\n  \"label_files\": {\"kaggle\": \"LOC_val_solution.csv\", \"list\": \"synset_labels.txt\", "
            "\"devkit\": \"ILSVRC2012_validation_ground_truth.txt\", \"devkit_synsets\": \"devkit_synsets.txt\", "
            "\"synsets\": \"LOC_synset_mapping.txt\"}\n}\n",
            (unsigned long long)o->seed, K, o->train_per_class, o->val_per_class, o->width, o->height, o->quality,
            o->odd_fraction, CUE_NOISE, bayes_top1(K, CUE_NOISE), (unsigned long long)st->train, (unsigned long long)st->val,
            (unsigned long long)st->grayscale, (unsigned long long)st->cmyk, (unsigned long long)st->png,
            (unsigned long long)st->bytes);
        snprintf(path, sizeof path, "%s/manifest.json", tmp);
        rc = text_file(path, buf, k, e);
    }
    free(buf);
    return rc;
}

int imagenet_synth(const char *dir, const imagenet_synth_opts *o, imagenet_synth_stats *st,
                   void (*progress)(void *ctx, uint64_t done), void *pctx, tk_err *e) {
    memset(st, 0, sizeof *st);
    if (!tk_img_have_jpeg()) return tk_jpeg_encode(NULL, 1, 1, 3, 90, 1, NULL, NULL, e); // says what is missing
    if (o->classes < 1 || o->classes > 1000 || o->train_per_class < 0 || o->val_per_class < 0 || o->width < 8 ||
        o->height < 8 || o->quality < 1 || o->quality > 100)
        return tk_err_set(e, TK_EUSAGE, "synth imagenet: classes 1..1000, sizes >= 8, quality 1..100");
    if (rmdir(dir) != 0 && errno != ENOENT) // an empty directory may stand where the tree goes
        return tk_err_set(e, TK_EUSAGE, "%s exists and is not an empty directory: give a new one", dir);
    char tmp[4200], path[4400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dir, (long)getpid());
    if (mkdir(tmp, 0755) != 0) return tk_err_errno(e, errno, "%s: cannot create", tmp);
    int K = o->classes, rc = 0;
    uint64_t ntrain = (uint64_t)K * o->train_per_class, nval = (uint64_t)K * o->val_per_class;
    int *val_class = malloc((nval + 1) * sizeof *val_class);
    if (!val_class) rc = tk_err_errno(e, ENOMEM, "out of memory");
    snprintf(path, sizeof path, "%s/train", tmp);
    if (!rc && mkdir(path, 0755) != 0) rc = tk_err_errno(e, errno, "%s: cannot create", path);
    snprintf(path, sizeof path, "%s/val", tmp);
    if (!rc && mkdir(path, 0755) != 0) rc = tk_err_errno(e, errno, "%s: cannot create", path);
    for (int c = 0; !rc && c < K && o->train_per_class; c++) {
        char id[16];
        imagenet_synth_wnid(c, id);
        snprintf(path, sizeof path, "%s/train/%s", tmp, id);
        if (mkdir(path, 0755) != 0) rc = tk_err_errno(e, errno, "%s: cannot create", path);
    }
    // Validation images are in a shuffled class order, like the real val set.
    for (uint64_t i = 0; !rc && i < nval; i++) val_class[i] = (int)(i % (uint64_t)K);
    for (uint64_t i = nval; !rc && i > 1; i--) {
        tk_philox_ctr d = tk_philox_draw(o->seed, TK_RNG_SHUFFLE, (1ull << 40) + i);
        uint64_t j = (((uint64_t)d.v[0] << 32) | d.v[1]) % i;
        int t = val_class[i - 1];
        val_class[i - 1] = val_class[j];
        val_class[j] = t;
    }
    uint64_t total = ntrain + nval, done = 0, chunk = 256;
    int threads = o->threads > 0 ? o->threads : 1;
    for (uint64_t start = 0; !rc && start < total; start += chunk) {
        uint64_t end = start + chunk < total ? start + chunk : total;
        int bad = 0;
        tk_err first;
        uint64_t bytes = 0, odd[4] = {0};
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(+ : bytes)
        for (uint64_t i = start; i < end; i++) {
            int train = i < ntrain, c, k;
            char file[4400], id[16];
            uint64_t img; // image id: train (1 << 40) + i, val (2 << 40) + index
            if (train) {
                c = (int)(i / (uint64_t)o->train_per_class);
                k = (int)(i % (uint64_t)o->train_per_class);
                imagenet_synth_wnid(c, id);
                snprintf(file, sizeof file, "%s/train/%s/%s_%d.JPEG", tmp, id, id, k);
                img = (1ull << 40) + i;
            } else {
                k = (int)(i - ntrain);
                c = val_class[k];
                snprintf(file, sizeof file, "%s/val/ILSVRC2012_val_%08d.JPEG", tmp, k + 1);
                img = (2ull << 40) + (uint64_t)k;
            }
            oddity od = oddity_of(o, img, train, c, k);
            size_t n = 0;
            tk_err te;
            int r = make_image(o, file, img, c, od, &n, &te);
            bytes += n;
#pragma omp critical(tk_synth)
            {
                odd[od]++;
                if (r && !bad) bad = 1, first = te;
            }
        }
        if (bad) {
            *e = first;
            rc = e->code;
        }
        st->bytes += bytes;
        st->grayscale += odd[GRAY];
        st->cmyk += odd[CMYK];
        st->png += odd[PNG];
        done = end;
        if (progress) progress(pctx, done);
    }
    st->train = ntrain;
    st->val = nval;
    if (!rc) rc = write_meta(tmp, o, val_class, nval, st, e);
    if (!rc && rename(tmp, dir) != 0) rc = tk_err_errno(e, errno, "%s: cannot rename to %s", tmp, dir);
    if (rc) nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS); // no partial tree is left
    free(val_class);
    return rc;
}
