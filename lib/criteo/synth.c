// Synthetic Criteo day files in the real raw TSV format, with labels from a hidden model.
//
// Every random number is Philox (lib/core/philox.h) at a fixed counter, so a (seed, day, row) names
// the same sample on every machine and thread count. The hidden model (man/man1/prep.1):
//   logit = bias + signal * ( sum_f w_f[v_f] + sum_d a_d u_d + FM(e_1..e_26, u_1 q_1..u_13 q_13) )
// where v_f is the value (Zipf rank, or "missing") of categorical f, u_d = (log(1+x_d) - mu_d) /
// sigma_d is the normalized observed count, w and e (latent, dim 4) are per-value normals whose
// scale shrinks with the value's rank (rare values carry little signal, as in real logs), and
// FM(...) = sum over pairs i<j of <e_i, e_j>, a factorization machine's second-order term.
// The bias is calibrated on a pilot sample so that the mean click probability is the target rate.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "core/afile.h"
#include "core/philox.h"
#include "criteo/criteo.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define K 4                      // latent dimension of the hidden FM
#define ZIPF_S 1.1               // Zipf exponent of categorical values
#define RANK_SCALE 30.0          // amplitude of a value's weights: 1/sqrt(1 + rank/RANK_SCALE)
#define W1 0.25                  // scale of first-order categorical weights
#define WD 0.5                   // scale of dense first-order weights
#define WL 0.13                  // scale of latent vectors (each coordinate)
#define CACHE_RANKS 4096         // weights of ranks below this are kept in a table
#define PILOT_ROWS 65536
#define PILOT_DAY 0x3fffff       // the pilot sample's "day" (never written)
#define CHUNK 8192               // rows generated per task

// Vocabulary sizes: those of the 26 features of Criteo's Kaggle display-advertising data, from
// 3 to 10 million, so embedding tables of very different sizes are exercised.
static const int64_t vocab[CRITEO_CAT] = {1460,  583,    10131227, 2202608, 305,   24,     12517,
                                          633,   3,      93145,    5683,    8351593, 3194, 27,
                                          14992, 5461306, 10,      5652,    2173,  4,      7046547,
                                          18,    15,     286181,   105,     142572};
// Fraction of empty fields per column, close to the real data (a few columns mostly empty).
static const double dense_missing[CRITEO_DENSE] = {0.45, 0.0, 0.21, 0.22, 0.03, 0.22, 0.04,
                                                   0.001, 0.04, 0.45, 0.04, 0.77, 0.22};
static const double cat_missing[CRITEO_CAT] = {0, 0, 0.034, 0.034, 0, 0.12, 0, 0, 0, 0.034, 0,
                                               0.034, 0, 0, 0, 0.034, 0, 0, 0.44, 0.44, 0.034,
                                               0.76, 0, 0.034, 0.44, 0.44};
// log(1 + count) ~ Normal(mu, sigma): heavy-tailed counts. Column 2 (I2) is shifted by -2 so
// small negative values appear, as in the real data.
static const double dense_mu[CRITEO_DENSE] = {0.8, 2.5, 1.5, 1.5, 7.5, 3.0, 1.5,
                                              2.0, 3.5, 0.4, 1.0, 0.3, 1.5};
static const double dense_sigma[CRITEO_DENSE] = {1.0, 1.6, 1.2, 1.0, 1.8, 1.5, 1.2,
                                                 1.0, 1.3, 0.6, 0.9, 0.8, 1.2};

typedef struct {
    float w, e[K];
} vparam;

struct criteo_synth {
    criteo_synth_opts o;
    double bias;
    uint32_t key[CRITEO_CAT];                  // per-feature hash keys
    vparam *cache[CRITEO_CAT];                 // ranks 0..min(V, CACHE_RANKS)-1, then "missing"
    int ncache[CRITEO_CAT];
    vparam dense[CRITEO_DENSE];                // a_d and q_d
};

static inline float unit_open(uint32_t x) { return ((float)(x >> 8) + 0.5f) * (1.0f / 16777216.0f); }

// Eight standard normals (Box-Muller) for the parameters at index idx.
static void normals8(uint64_t seed, uint64_t idx, float z[8]) {
    for (int b = 0; b < 2; b++) {
        tk_philox_ctr r = tk_philox_draw(seed, TK_RNG_SYNTH | 0x100, idx * 2 + (uint64_t)b);
        for (int p = 0; p < 2; p++) {
            float rad = sqrtf(-2.0f * logf(unit_open(r.v[2 * p])));
            float ang = 6.2831853f * unit_open(r.v[2 * p + 1]);
            z[4 * b + 2 * p] = rad * cosf(ang);
            z[4 * b + 2 * p + 1] = rad * sinf(ang);
        }
    }
}

// Parameters of value `rank` of feature f; rank == V means "missing".
static vparam make_param(const criteo_synth *g, int f, int64_t rank) {
    float z[8];
    normals8(g->o.seed, (uint64_t)1 << 62 | (uint64_t)f << 40 | (uint64_t)rank, z);
    float amp = (float)(1.0 / sqrt(1.0 + (double)(rank == vocab[f] ? 0 : rank) / RANK_SCALE));
    vparam p;
    p.w = (float)W1 * amp * z[0];
    for (int k = 0; k < K; k++) p.e[k] = (float)WL * sqrtf(amp) * z[1 + k];
    return p;
}

static inline vparam get_param(const criteo_synth *g, int f, int64_t rank) {
    if (rank == vocab[f]) return g->cache[f][g->ncache[f]];
    if (rank < g->ncache[f]) return g->cache[f][rank];
    return make_param(g, f, rank);
}

// murmur3's 32-bit finalizer: a bijection, so distinct ranks get distinct hashes.
static inline uint32_t fmix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

typedef struct {
    int missing_dense[CRITEO_DENSE];
    int32_t dense[CRITEO_DENSE];
    int64_t rank[CRITEO_CAT]; // vocab[f] = missing
    uint32_t hash[CRITEO_CAT];
    double logit;             // without the bias
    double label_u;           // uniform for the label draw
} srow;

static void gen_row(const criteo_synth *g, uint64_t day, uint64_t row, srow *s) {
    uint64_t base = ((day << 36) | row) << 5;
    uint64_t seed = g->o.seed;
    float sum[K] = {0}, sq = 0;
    double first = 0;
    for (int f = 0; f < CRITEO_CAT; f += 2) {
        tk_philox_ctr r = tk_philox_draw(seed, TK_RNG_SYNTH, base + (uint64_t)(f / 2));
        for (int h = 0; h < 2; h++) {
            int ff = f + h;
            int64_t V = vocab[ff];
            if (tk_u32_to_unit(r.v[2 * h]) < cat_missing[ff]) {
                s->rank[ff] = V;
                s->hash[ff] = 0;
            } else {
                double u = tk_u32_to_unit(r.v[2 * h + 1]);
                double x = pow(1.0 + u * (pow((double)V + 1.0, 1.0 - ZIPF_S) - 1.0), 1.0 / (1.0 - ZIPF_S));
                int64_t rank = (int64_t)x - 1;
                if (rank < 0) rank = 0;
                if (rank >= V) rank = V - 1;
                s->rank[ff] = rank;
                s->hash[ff] = fmix32((uint32_t)rank ^ g->key[ff]);
            }
            vparam p = get_param(g, ff, s->rank[ff]);
            first += p.w;
            for (int k = 0; k < K; k++) {
                sum[k] += p.e[k];
                sq += p.e[k] * p.e[k];
            }
        }
    }
    for (int d = 0; d < CRITEO_DENSE; d++) {
        tk_philox_ctr r = tk_philox_draw(seed, TK_RNG_SYNTH, base + 13 + (uint64_t)d);
        double t = 0; // log(1 + observed count)
        s->missing_dense[d] = tk_u32_to_unit(r.v[0]) < dense_missing[d];
        if (s->missing_dense[d]) {
            s->dense[d] = 0;
        } else {
            double z = sqrt(-2.0 * log(unit_open(r.v[1]))) * cos(6.283185307179586 * unit_open(r.v[2]));
            double c = floor(exp(dense_mu[d] + dense_sigma[d] * z)) - (d == 1 ? 3 : 1);
            if (c > 2e9) c = 2e9;
            s->dense[d] = (int32_t)c;
            t = log1p(c > 0 ? c : 0);
        }
        double u = (t - dense_mu[d]) / dense_sigma[d];
        first += g->dense[d].w * u;
        for (int k = 0; k < K; k++) {
            float v = (float)u * g->dense[d].e[k];
            sum[k] += v;
            sq += v * v;
        }
    }
    double pair = 0;
    for (int k = 0; k < K; k++) pair += (double)sum[k] * sum[k];
    pair = 0.5 * (pair - sq);
    s->logit = g->o.signal * (first + pair);
    tk_philox_ctr r = tk_philox_draw(seed, TK_RNG_SYNTH, base + 26);
    s->label_u = tk_u64_to_unit(r.v[0], r.v[1]);
}

static inline double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

int criteo_synth_new(criteo_synth **gp, const criteo_synth_opts *o, tk_err *e) {
    *gp = NULL;
    criteo_synth *g = calloc(1, sizeof *g);
    if (!g) return tk_err_errno(e, ENOMEM, "out of memory");
    g->o = *o;
    if (g->o.signal <= 0) g->o.signal = 1;
    if (g->o.click_rate <= 0) g->o.click_rate = 0.03;
    for (int f = 0; f < CRITEO_CAT; f++) {
        tk_philox_ctr r = tk_philox_draw(g->o.seed, TK_RNG_SYNTH | 0x200, (uint64_t)f);
        g->key[f] = r.v[0] | 0x80000000u; // ranks < 2^31, so rank ^ key is never 0: no hash is 0
        g->ncache[f] = (int)(vocab[f] < CACHE_RANKS ? vocab[f] : CACHE_RANKS);
        g->cache[f] = malloc(((size_t)g->ncache[f] + 1) * sizeof(vparam));
        if (!g->cache[f]) {
            criteo_synth_free(g);
            return tk_err_errno(e, ENOMEM, "out of memory");
        }
    }
    // Fill the tables (the "missing" entry last) before any row uses get_param.
    for (int f = 0; f < CRITEO_CAT; f++) {
        int n = g->ncache[f];
        g->ncache[f] = 0;
        for (int r = 0; r < n; r++) g->cache[f][r] = make_param(g, f, r);
        g->cache[f][n] = make_param(g, f, vocab[f]);
        g->ncache[f] = n;
    }
    for (int d = 0; d < CRITEO_DENSE; d++) {
        float z[8];
        normals8(g->o.seed, (uint64_t)1 << 61 | (uint64_t)d, z);
        g->dense[d].w = (float)WD * z[0];
        for (int k = 0; k < K; k++) g->dense[d].e[k] = (float)WL * z[1 + k];
    }
    // Bias: mean sigmoid(bias + logit) over the pilot sample = click rate (bisection; monotone).
    double *lg = malloc(PILOT_ROWS * sizeof *lg);
    if (!lg) {
        criteo_synth_free(g);
        return tk_err_errno(e, ENOMEM, "out of memory");
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < PILOT_ROWS; i++) {
        srow s;
        gen_row(g, PILOT_DAY, (uint64_t)i, &s);
        lg[i] = s.logit;
    }
    double lo = -40, hi = 40;
    for (int it = 0; it < 60; it++) {
        double mid = 0.5 * (lo + hi), m = 0;
        for (int i = 0; i < PILOT_ROWS; i++) m += sigmoid(mid + lg[i]);
        if (m / PILOT_ROWS < g->o.click_rate) lo = mid;
        else hi = mid;
    }
    free(lg);
    g->bias = 0.5 * (lo + hi);
    *gp = g;
    return 0;
}

void criteo_synth_free(criteo_synth *g) {
    if (!g) return;
    for (int f = 0; f < CRITEO_CAT; f++) free(g->cache[f]);
    free(g);
}

double criteo_synth_bias(const criteo_synth *g) { return g->bias; }
const int64_t *criteo_synth_vocab(const criteo_synth *g) {
    (void)g;
    return vocab;
}
int criteo_synth_latent_dim(void) { return K; }
double criteo_synth_zipf_exponent(void) { return ZIPF_S; }

// ---- text output and compression -------------------------------------------------------------
static char *put_uint(char *p, uint64_t v) {
    char t[24];
    int n = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = t[--n];
    return p;
}

// One row as a TSV line; returns the end. At most 1 + 13*12 + 26*9 + 40 bytes.
static char *format_row(const srow *s, int label, char *p) {
    static const char hex[] = "0123456789abcdef";
    *p++ = (char)('0' + label);
    for (int d = 0; d < CRITEO_DENSE; d++) {
        *p++ = '\t';
        if (s->missing_dense[d]) continue;
        if (s->dense[d] < 0) {
            *p++ = '-';
            p = put_uint(p, (uint64_t)(-(int64_t)s->dense[d]));
        } else {
            p = put_uint(p, (uint64_t)s->dense[d]);
        }
    }
    for (int f = 0; f < CRITEO_CAT; f++) {
        *p++ = '\t';
        if (s->rank[f] == vocab[f]) continue;
        for (int i = 7; i >= 0; i--) *p++ = hex[(s->hash[f] >> (4 * i)) & 15];
    }
    *p++ = '\n';
    return p;
}

#define MAX_LINE_BYTES 512

typedef struct {
    FILE *fp;
    const char *name;
    int kind;
    z_stream z;
    ZSTD_CCtx *zc;
    uint8_t out[1 << 16];
} sink;

static int sink_put(sink *k, const void *buf, size_t n, int end, tk_err *e) {
    if (k->kind == 0) return tk_write_all(k->fp, buf, n, k->name, e);
    if (k->kind == 1) {
        k->z.next_in = (Bytef *)buf;
        k->z.avail_in = (uInt)n;
        int rc;
        do {
            k->z.next_out = k->out;
            k->z.avail_out = sizeof k->out;
            rc = deflate(&k->z, end ? Z_FINISH : Z_NO_FLUSH);
            TRY(tk_write_all(k->fp, k->out, sizeof k->out - k->z.avail_out, k->name, e));
        } while (k->z.avail_out == 0 || (end && rc != Z_STREAM_END));
        return 0;
    }
    ZSTD_inBuffer in = {buf, n, 0};
    size_t rc;
    do {
        ZSTD_outBuffer out = {k->out, sizeof k->out, 0};
        rc = ZSTD_compressStream2(k->zc, &out, &in, end ? ZSTD_e_end : ZSTD_e_continue);
        if (ZSTD_isError(rc)) return tk_err_set(e, TK_EINTERNAL, "%s: zstd: %s", k->name, ZSTD_getErrorName(rc));
        TRY(tk_write_all(k->fp, k->out, out.pos, k->name, e));
    } while (in.pos < in.size || (end && rc != 0));
    return 0;
}

int criteo_synth_write_day(criteo_synth *g, int d, FILE *fp, const char *name, criteo_synth_day *out,
                           tk_err *e) {
    memset(out, 0, sizeof *out);
    uint64_t n = (uint64_t)g->o.rows_per_day;
    sink k;
    memset(&k, 0, sizeof k);
    k.fp = fp;
    k.name = name;
    k.kind = g->o.compress;
    if (k.kind == 1 && deflateInit2(&k.z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return tk_err_errno(e, ENOMEM, "out of memory");
    if (k.kind == 2) {
        k.zc = ZSTD_createCCtx();
        if (!k.zc) return tk_err_errno(e, ENOMEM, "out of memory");
        ZSTD_CCtx_setParameter(k.zc, ZSTD_c_compressionLevel, 3);
        ZSTD_CCtx_setParameter(k.zc, ZSTD_c_checksumFlag, 1);
    }
    int threads = g->o.threads > 0 ? g->o.threads : 1;
#ifdef _OPENMP
    if (g->o.threads <= 0) threads = omp_get_max_threads();
#endif
    size_t batch_chunks = (size_t)threads * 4;
    char *text = malloc(batch_chunks * CHUNK * MAX_LINE_BYTES);
    size_t *tlen = calloc(batch_chunks, sizeof *tlen);
    double *p = malloc((n ? n : 1) * sizeof *p);
    uint8_t *y = malloc(n ? n : 1);
    int rc = !text || !tlen || !p || !y ? tk_err_errno(e, ENOMEM, "out of memory") : 0;
    uint64_t nchunks = (n + CHUNK - 1) / CHUNK;
    for (uint64_t c0 = 0; c0 < nchunks && !rc; c0 += batch_chunks) {
        uint64_t cn = nchunks - c0 < batch_chunks ? nchunks - c0 : batch_chunks;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
        for (uint64_t c = 0; c < cn; c++) {
            char *q = text + c * CHUNK * MAX_LINE_BYTES, *q0 = q;
            uint64_t r0 = (c0 + c) * CHUNK, r1 = r0 + CHUNK < n ? r0 + CHUNK : n;
            for (uint64_t r = r0; r < r1; r++) {
                srow s;
                gen_row(g, (uint64_t)d, r, &s);
                p[r] = sigmoid(g->bias + s.logit);
                y[r] = s.label_u < p[r];
                q = format_row(&s, y[r], q);
            }
            tlen[c] = (size_t)(q - q0);
        }
        for (uint64_t c = 0; c < cn && !rc; c++)
            rc = sink_put(&k, text + c * CHUNK * MAX_LINE_BYTES, tlen[c], 0, e);
    }
    if (!rc) rc = sink_put(&k, "", 0, 1, e);
    if (!rc) {
        out->rows = n;
        for (uint64_t i = 0; i < n; i++) out->clicks += y[i];
        out->auc = criteo_auc(p, y, n);
    }
    if (k.kind == 1) deflateEnd(&k.z);
    ZSTD_freeCCtx(k.zc);
    free(text);
    free(tlen);
    free(p);
    free(y);
    return rc;
}
