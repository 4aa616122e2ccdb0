// Criteo TSV parsing, the MLPerf preprocessed binary, the MLPerf reference's categorical dictionaries,
// prep's output schema, AUC.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "criteo/criteo.h"

// Parses field text [s, s+n) of field number k (1-based, as users count columns).
static int parse_dense(const char *s, size_t n, int k, int32_t *out, tk_err *e) {
    if (n == 0) { // missing: 0, as the reference does
        *out = 0;
        return 0;
    }
    size_t i = 0;
    int neg = 0;
    if (s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i == n) goto bad;
    int64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') goto bad;
        v = v * 10 + (s[i] - '0');
        if (v > INT32_MAX) return tk_err_set(e, TK_EDATA, "field %d: integer '%.*s' out of range", k, (int)(n > 40 ? 40 : n), s);
    }
    *out = neg ? 0 : (int32_t)v; // negative counts become 0 (MLPerf reference)
    return 0;
bad:
    return tk_err_set(e, TK_EDATA, "field %d: expected an integer, got '%.*s'", k, (int)(n > 40 ? 40 : n), s);
}

static int parse_cat(const char *s, size_t n, int k, uint32_t *out, tk_err *e) {
    if (n == 0) {
        *out = 0;
        return 0;
    }
    if (n > 8) goto bad;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        uint32_t d;
        if (c >= '0' && c <= '9') d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (uint32_t)(c - 'A' + 10);
        else goto bad;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
bad:
    return tk_err_set(e, TK_EDATA, "field %d: expected up to 8 hex digits, got '%.*s'", k, (int)(n > 40 ? 40 : n), s);
}

int criteo_parse_tsv(const char *s, size_t len, int last_line_unterminated, criteo_row *row,
                     tk_err *e) {
    if (len && s[len - 1] == '\r') len--; // tolerate CRLF files
    int nf = 1;
    for (size_t i = 0; i < len; i++) nf += s[i] == '\t';
    if (nf != CRITEO_FIELDS) {
        if (last_line_unterminated)
            return tk_err_set(e, TK_EDATA, "truncated line: expected %d tab-separated fields, got %d",
                              CRITEO_FIELDS, nf);
        return tk_err_set(e, TK_EDATA, "expected %d tab-separated fields, got %d", CRITEO_FIELDS, nf);
    }
    const char *p = s, *end = s + len;
    for (int k = 0; k < CRITEO_FIELDS; k++) {
        const char *t = memchr(p, '\t', (size_t)(end - p));
        if (!t) t = end;
        size_t n = (size_t)(t - p);
        if (k == 0) {
            if (n != 1 || (p[0] != '0' && p[0] != '1'))
                return tk_err_set(e, TK_EDATA, "field 1: label must be 0 or 1, got '%.*s'", (int)(n > 40 ? 40 : n), p);
            row->label = (uint8_t)(p[0] - '0');
        } else if (k <= CRITEO_DENSE) {
            TRY(parse_dense(p, n, k + 1, &row->dense[k - 1], e));
        } else {
            TRY(parse_cat(p, n, k + 1, &row->cat[k - 1 - CRITEO_DENSE], e));
        }
        p = t + 1;
    }
    return 0;
}

// ---- the MLPerf preprocessed binary -------------------------------------------------------------
int criteo_bin_each(char *const *files, int nfiles, criteo_row_fn fn, void *ctx, tk_err *e) {
    enum { REC = CRITEO_FIELDS * 4, BATCH = 4096 };
    uint8_t *buf = malloc((size_t)REC * BATCH);
    if (!buf) return tk_err_errno(e, ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; i < nfiles && !rc; i++) {
        FILE *f = fopen(files[i], "rb");
        if (!f) {
            rc = tk_err_errno(e, errno, "%s: cannot open", files[i]);
            break;
        }
        uint64_t off = 0;
        size_t got;
        while (!rc && (got = fread(buf, 1, (size_t)REC * BATCH, f)) > 0) {
            size_t nrec = got / REC;
            for (size_t k = 0; k < nrec && !rc; k++, off += REC) {
                const uint8_t *p = buf + k * REC;
                int32_t v[CRITEO_FIELDS];
                for (int j = 0; j < CRITEO_FIELDS; j++)
                    v[j] = (int32_t)((uint32_t)p[4 * j] | (uint32_t)p[4 * j + 1] << 8 |
                                     (uint32_t)p[4 * j + 2] << 16 | (uint32_t)p[4 * j + 3] << 24);
                criteo_row r;
                if (v[0] != 0 && v[0] != 1) {
                    rc = tk_err_set(e, TK_EDATA, "label must be 0 or 1, got %d", v[0]);
                    tk_err_where(e, "%s: offset %llu", files[i], (unsigned long long)off);
                    break;
                }
                r.label = (uint8_t)v[0];
                for (int j = 0; j < CRITEO_DENSE; j++) r.dense[j] = v[1 + j] < 0 ? 0 : v[1 + j];
                for (int j = 0; j < CRITEO_CAT; j++) {
                    int32_t c = v[1 + CRITEO_DENSE + j];
                    if (c < 0) {
                        rc = tk_err_set(e, TK_EDATA, "categorical %d is negative (%d)", j + 1, c);
                        tk_err_where(e, "%s: offset %llu", files[i], (unsigned long long)(off + 4 * (14 + j)));
                        break;
                    }
                    r.cat[j] = (uint32_t)c;
                }
                if (!rc) rc = fn(ctx, &r, e);
            }
            if (!rc && got % REC) {
                rc = tk_err_set(e, TK_EDATA, "truncated record (%zu of %d bytes)", got % REC, REC);
                tk_err_where(e, "%s: offset %llu", files[i], (unsigned long long)off);
            }
        }
        if (!rc && ferror(f)) rc = tk_err_errno(e, errno, "%s: read failed", files[i]);
        fclose(f);
    }
    free(buf);
    return rc;
}

// ---- dictionaries: open addressing, key+1 stored so 0 marks an empty slot ----------------
typedef struct {
    uint64_t *slot; // (key + 1) << 32 | id ... ids and keys both fit 32 bits
    uint64_t cap, n;
} dict1;

struct criteo_dict {
    dict1 d[CRITEO_CAT];
};

criteo_dict *criteo_dict_new(void) { return calloc(1, sizeof(criteo_dict)); }

void criteo_dict_free(criteo_dict *d) {
    if (!d) return;
    for (int f = 0; f < CRITEO_CAT; f++) free(d->d[f].slot);
    free(d);
}

static inline uint64_t mix(uint32_t v) {
    uint64_t x = v * 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

// Keys are stored as (key + 1) in the high 33 bits region: slot = (key+1) << 31 would overflow,
// so keep key+1 (33 bits) in the high part and the id (31 bits) in the low part.
#define SLOT_KEY(s) ((s) >> 31)
#define SLOT_ID(s) ((s) & 0x7fffffffu)

static int dict_grow(dict1 *t, tk_err *e) {
    uint64_t ncap = t->cap ? t->cap * 2 : 1024;
    uint64_t *ns = calloc(ncap, sizeof *ns);
    if (!ns) return tk_err_errno(e, ENOMEM, "out of memory for the categorical dictionaries");
    for (uint64_t i = 0; i < t->cap; i++) {
        uint64_t s = t->slot[i];
        if (!s) continue;
        uint64_t h = mix((uint32_t)(SLOT_KEY(s) - 1)) & (ncap - 1);
        while (ns[h]) h = (h + 1) & (ncap - 1);
        ns[h] = s;
    }
    free(t->slot);
    t->slot = ns;
    t->cap = ncap;
    return 0;
}

int criteo_dict_add(criteo_dict *d, int f, uint32_t v, tk_err *e) {
    dict1 *t = &d->d[f];
    if ((t->n + 1) * 2 > t->cap) TRY(dict_grow(t, e));
    uint64_t h = mix(v) & (t->cap - 1);
    while (t->slot[h]) {
        if (SLOT_KEY(t->slot[h]) == (uint64_t)v + 1) return 0;
        h = (h + 1) & (t->cap - 1);
    }
    t->slot[h] = ((uint64_t)v + 1) << 31 | t->n;
    t->n++;
    return 0;
}

int64_t criteo_dict_get(const criteo_dict *d, int f, uint32_t v) {
    const dict1 *t = &d->d[f];
    if (!t->cap) return -1;
    uint64_t h = mix(v) & (t->cap - 1);
    while (t->slot[h]) {
        if (SLOT_KEY(t->slot[h]) == (uint64_t)v + 1) return (int64_t)SLOT_ID(t->slot[h]);
        h = (h + 1) & (t->cap - 1);
    }
    return -1;
}

uint64_t criteo_dict_size(const criteo_dict *d, int f) { return d->d[f].n; }

void criteo_schema(tks_schema *s, criteo_mapping m, int64_t max_ind_range, const uint64_t card[CRITEO_CAT]) {
    memset(s, 0, sizeof *s);
    s->nfields = 3;
    snprintf(s->f[0].name, sizeof s->f[0].name, "label");
    s->f[0].dtype = TKS_U8;
    snprintf(s->f[1].name, sizeof s->f[1].name, "dense");
    s->f[1].dtype = TKS_I32;
    s->f[1].ndim = 1;
    s->f[1].shape[0] = CRITEO_DENSE;
    snprintf(s->f[2].name, sizeof s->f[2].name, "cat");
    s->f[2].dtype = TKS_I32;
    s->f[2].ndim = 1;
    s->f[2].shape[0] = CRITEO_CAT;
    int k = snprintf(s->meta_json, sizeof s->meta_json,
                     "{\"source\":\"criteo\",\"mapping\":\"%s\",\"max_ind_range\":%lld,\"cardinalities\":[",
                     m == CRITEO_DICTIONARY ? "dictionary" : "modulo", (long long)max_ind_range);
    for (int f = 0; f < CRITEO_CAT; f++)
        k += snprintf(s->meta_json + k, sizeof s->meta_json - (size_t)k, "%s%llu", f ? "," : "",
                      (unsigned long long)card[f]);
    snprintf(s->meta_json + k, sizeof s->meta_json - (size_t)k, "]}");
}

// ---- AUC ---------------------------------------------------------------------------------
typedef struct {
    double s;
    uint8_t y;
} scored;

static int cmp_scored(const void *a, const void *b) {
    double x = ((const scored *)a)->s, y = ((const scored *)b)->s;
    return (x > y) - (x < y);
}

double criteo_auc(const double *score, const uint8_t *label, size_t n) {
    scored *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return NAN;
    for (size_t i = 0; i < n; i++) v[i] = (scored){score[i], label[i]};
    qsort(v, n, sizeof *v, cmp_scored);
    // Mann-Whitney U: sum of the (tie-averaged) ranks of the positives.
    double rank_sum = 0;
    uint64_t pos = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint64_t p = 0;
        while (j < n && v[j].s == v[i].s) p += v[j++].y;
        rank_sum += (double)p * ((double)(i + 1 + j) / 2.0);
        pos += p;
        i = j;
    }
    free(v);
    uint64_t neg = n - pos;
    if (!pos || !neg) return NAN;
    return (rank_sum - (double)pos * (double)(pos + 1) / 2.0) / ((double)pos * (double)neg);
}
