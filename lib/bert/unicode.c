// Lookups over the generated tables (unicode_tables.c): a two-stage table of classes, combining
// classes and "has a mapping" bits, built once from the run lists, and binary searches for the
// lower-case and decomposition mappings (only reached for the few characters that have one).
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bert/unicode.h"

extern const uint32_t bert_uprop_runs[], bert_ccc_runs[], bert_lower1[], bert_lowern[], bert_nfd[];
extern const size_t bert_uprop_runs_len, bert_ccc_runs_len, bert_lower1_len, bert_lowern_len, bert_nfd_len;

#define NCP 0x110000u
#define BLOCK 256u
#define NBLOCKS (NCP / BLOCK)
#define HAS_LOWER (1u << 16)
#define HAS_NFD (1u << 17)

// Hangul syllable decomposition constants (The Unicode Standard, section 3.12).
enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, VCOUNT = 21, TCOUNT = 28,
       NCOUNT = VCOUNT * TCOUNT, SCOUNT = 19 * NCOUNT };

static uint16_t stage1[NBLOCKS];
static uint32_t *stage2;              // nblocks2 blocks of BLOCK values
static uint32_t (*nfd_index)[2];      // (code point, offset of its entry in bert_nfd)
static size_t nfd_count;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint64_t block_hash(const uint32_t *b) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned i = 0; i < BLOCK; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int build_failed;

static void build(void) {
    uint32_t *full = calloc(NCP, sizeof *full);
    nfd_index = malloc(sizeof *nfd_index * (bert_nfd_len / 3 + 1));
    enum { HSIZE = 8192 };
    int32_t *slot = malloc(HSIZE * sizeof *slot);
    stage2 = malloc((size_t)NBLOCKS * BLOCK * sizeof *stage2);
    if (!full || !nfd_index || !slot || !stage2) {
        free(full);
        free(nfd_index);
        free(slot);
        free(stage2);
        stage2 = NULL;
        build_failed = 1;
        return;
    }
    for (size_t r = 0; r < bert_uprop_runs_len; r++) {
        uint32_t lo = bert_uprop_runs[r] >> 8, hi = r + 1 < bert_uprop_runs_len ? bert_uprop_runs[r + 1] >> 8 : NCP;
        for (uint32_t cp = lo; cp < hi; cp++) full[cp] = bert_uprop_runs[r] & 0xff;
    }
    for (size_t r = 0; r < bert_ccc_runs_len; r++) {
        uint32_t lo = bert_ccc_runs[r] >> 8, hi = r + 1 < bert_ccc_runs_len ? bert_ccc_runs[r + 1] >> 8 : NCP;
        for (uint32_t cp = lo; cp < hi; cp++) full[cp] |= (bert_ccc_runs[r] & 0xff) << 8;
    }
    for (size_t i = 0; i < bert_lower1_len; i += 2) full[bert_lower1[i]] |= HAS_LOWER;
    for (size_t i = 0; i < bert_lowern_len; i += 5) full[bert_lowern[i]] |= HAS_LOWER;
    full[0x3A3] |= HAS_LOWER;
    for (size_t i = 0; i < bert_nfd_len; i += 2 + bert_nfd[i + 1]) {
        full[bert_nfd[i]] |= HAS_NFD;
        nfd_index[nfd_count][0] = bert_nfd[i];
        nfd_index[nfd_count++][1] = (uint32_t)i;
    }
    for (uint32_t cp = SBASE; cp < SBASE + SCOUNT; cp++) full[cp] |= HAS_NFD;
    // Deduplicate the 256-entry blocks: most of the code space repeats a handful of them.
    memset(slot, 0xff, HSIZE * sizeof *slot);
    uint32_t n2 = 0;
    for (uint32_t b = 0; b < NBLOCKS; b++) {
        const uint32_t *blk = full + (size_t)b * BLOCK;
        uint64_t h = block_hash(blk);
        uint32_t k = (uint32_t)h & (HSIZE - 1);
        while (slot[k] >= 0 && memcmp(stage2 + (size_t)slot[k] * BLOCK, blk, BLOCK * sizeof *blk) != 0)
            k = (k + 1) & (HSIZE - 1);
        if (slot[k] < 0) {
            memcpy(stage2 + (size_t)n2 * BLOCK, blk, BLOCK * sizeof *blk);
            slot[k] = (int32_t)n2++;
        }
        stage1[b] = (uint16_t)slot[k];
    }
    uint32_t *shrunk = realloc(stage2, (size_t)n2 * BLOCK * sizeof *stage2);
    if (shrunk) stage2 = shrunk;
    free(slot);
    free(full);
}

int bert_unicode_init(void) {
    pthread_once(&once, build);
    return build_failed ? -1 : 0;
}

static inline uint32_t prop(uint32_t cp) {
    if (cp >= NCP || !stage2) return 0;
    return stage2[(size_t)stage1[cp / BLOCK] * BLOCK + cp % BLOCK];
}

unsigned bert_uclass(uint32_t cp) {
    bert_unicode_init();
    return prop(cp) & 0xff;
}

unsigned bert_ccc(uint32_t cp) {
    bert_unicode_init();
    return (prop(cp) >> 8) & 0xff;
}

// Index of cp in a sorted array of records of `stride` words keyed by their first word, or -1.
static long find(const uint32_t *a, size_t len, size_t stride, uint32_t cp) {
    size_t lo = 0, hi = len / stride;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a[mid * stride] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < len / stride && a[lo * stride] == cp ? (long)(lo * stride) : -1;
}

int bert_lower_char(uint32_t cp, uint32_t out[3]) {
    bert_unicode_init();
    if (cp < 0x80) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    if (!(prop(cp) & HAS_LOWER)) {
        out[0] = cp;
        return 1;
    }
    if (cp == 0x3A3) {
        out[0] = 0x3C3;
        return 1;
    }
    long i = find(bert_lower1, bert_lower1_len, 2, cp);
    if (i >= 0) {
        out[0] = bert_lower1[i + 1];
        return 1;
    }
    i = find(bert_lowern, bert_lowern_len, 5, cp);
    if (i < 0) { // cannot happen: HAS_LOWER is set only from these tables
        out[0] = cp;
        return 1;
    }
    int n = (int)bert_lowern[i + 1];
    for (int k = 0; k < n; k++) out[k] = bert_lowern[i + 2 + k];
    return n;
}

int bert_nfd_char(uint32_t cp, uint32_t out[4]) {
    bert_unicode_init();
    if (cp < 0xC0 || !(prop(cp) & HAS_NFD)) {
        out[0] = cp;
        return 1;
    }
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE;
        out[0] = LBASE + s / NCOUNT;
        out[1] = VBASE + (s % NCOUNT) / TCOUNT;
        if (s % TCOUNT == 0) return 2;
        out[2] = TBASE + s % TCOUNT;
        return 3;
    }
    size_t lo = 0, hi = nfd_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (nfd_index[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo == nfd_count || nfd_index[lo][0] != cp) {
        out[0] = cp;
        return 1;
    }
    const uint32_t *d = bert_nfd + nfd_index[lo][1];
    for (uint32_t k = 0; k < d[1]; k++) out[k] = d[2 + k];
    return (int)d[1];
}

// The final-sigma rule of CPython's str.lower(): U+03A3 becomes U+03C2 when a cased character
// precedes it (case-ignorable ones skipped) and no cased character follows (same skipping).
static int final_sigma(const uint32_t *s, size_t n, size_t i) {
    size_t j = i;
    unsigned c = 0;
    while (j > 0) {
        c = prop(s[--j]) & (BU_CASED | BU_CASEIGN);
        if (!(c & BU_CASEIGN)) break;
    }
    if (!(c & BU_CASED) || (c & BU_CASEIGN)) return 0;
    for (j = i + 1; j < n; j++) {
        c = prop(s[j]) & (BU_CASED | BU_CASEIGN);
        if (!(c & BU_CASEIGN)) return !(c & BU_CASED);
    }
    return 1;
}

size_t bert_lower_word(const uint32_t *in, size_t n, uint32_t *out) {
    bert_unicode_init();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = in[i];
        if (c == 0x3A3) {
            out[k++] = final_sigma(in, n, i) ? 0x3C2 : 0x3C3;
            continue;
        }
        k += (size_t)bert_lower_char(c, out + k);
    }
    return k;
}

size_t bert_strip_accents(const uint32_t *in, size_t n, uint32_t *out) {
    bert_unicode_init();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)bert_nfd_char(in[i], out + k);
    // Canonical ordering: each run of non-starters is stably sorted by combining class.
    for (size_t i = 1; i < k; i++) {
        unsigned ci = bert_ccc(out[i]);
        if (!ci) continue;
        uint32_t c = out[i];
        size_t j = i;
        while (j > 0) {
            unsigned cj = bert_ccc(out[j - 1]);
            if (cj <= ci) break; // a starter (0) or a smaller class stops the move
            out[j] = out[j - 1];
            j--;
        }
        out[j] = c;
    }
    size_t m = 0;
    for (size_t i = 0; i < k; i++)
        if (!(prop(out[i]) & BU_MN)) out[m++] = out[i];
    return m;
}

long bert_utf8_decode(const char *str, size_t n, uint32_t *out, size_t *bad) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, k = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            out[k++] = c;
            i++;
            continue;
        }
        int len;
        uint32_t cp;
        unsigned lo = 0x80, hi = 0xBF; // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3, cp = c & 0x0F;
            if (c == 0xE0) lo = 0xA0;      // overlong
            if (c == 0xED) hi = 0x9F;      // surrogates
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, cp = c & 0x07;
            if (c == 0xF0) lo = 0x90;      // overlong
            if (c == 0xF4) hi = 0x8F;      // past U+10FFFF
        } else goto invalid;
        if (i + (size_t)len > n) goto invalid;
        if (s[i + 1] < lo || s[i + 1] > hi) goto invalid;
        for (int j = 1; j < len; j++) {
            if ((s[i + j] & 0xC0) != 0x80) goto invalid;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        out[k++] = cp;
        i += (size_t)len;
    }
    return (long)k;
invalid:
    *bad = i;
    return -1;
}

int bert_utf8_put(uint32_t cp, char *o) {
    unsigned char *u = (unsigned char *)o;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    u[0] = (unsigned char)(0xF0 | cp >> 18);
    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    u[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}
