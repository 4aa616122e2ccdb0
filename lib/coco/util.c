// Small helpers of lib/coco: an int64 hash map, reading a whole file, a stable index sort.
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coco/coco_int.h"

// ---- hash map ----

static size_t mix(int64_t k) {
    uint64_t x = (uint64_t)k;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

int coco_map_put(coco_map *m, int64_t key, int32_t val) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        int64_t *k = malloc(cap * sizeof *k);
        int32_t *v = malloc(cap * sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return -1;
        }
        for (size_t i = 0; i < cap; i++) v[i] = -1;
        for (size_t i = 0; i < m->cap; i++) {
            if (m->vals[i] < 0) continue;
            size_t j = mix(m->keys[i]) & (cap - 1);
            while (v[j] >= 0) j = (j + 1) & (cap - 1);
            k[j] = m->keys[i];
            v[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = k;
        m->vals = v;
        m->cap = cap;
    }
    size_t j = mix(key) & (m->cap - 1);
    while (m->vals[j] >= 0 && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
    if (m->vals[j] < 0) m->n++;
    m->keys[j] = key;
    m->vals[j] = val;
    return 0;
}

int32_t coco_map_get(const coco_map *m, int64_t key) {
    if (!m->cap) return -1;
    size_t j = mix(key) & (m->cap - 1);
    while (m->vals[j] >= 0) {
        if (m->keys[j] == key) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void coco_map_free(coco_map *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int coco_read_file(const char *path, char **buf, size_t *len, tk_err *e) {
    int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
    if (fd < 0) return tk_err_errno(e, errno, "%s: cannot open", path);
    struct stat st;
    size_t cap = (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) ? (size_t)st.st_size + 1 : 1 << 20;
    char *b = malloc(cap);
    size_t n = 0;
    if (!b) {
        if (fd) close(fd);
        return tk_err_errno(e, ENOMEM, "%s: reading", path);
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                if (fd) close(fd);
                return tk_err_errno(e, ENOMEM, "%s: reading", path);
            }
            b = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, b + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int er = errno;
            free(b);
            if (fd) close(fd);
            return tk_err_errno(e, er, "%s: read failed", path);
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    if (fd) close(fd);
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

// Stable merge sort of indices by a comparator (qsort_r-like, but stable).
void coco_stable_sort(uint32_t *a, uint32_t *tmp, size_t n, coco_cmp_fn cmp, const void *ctx) {
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            uint32_t x = a[i];
            size_t j = i;
            while (j > 0 && cmp(a[j - 1], x, ctx) > 0) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = x;
        }
        return;
    }
    size_t h = n / 2;
    coco_stable_sort(a, tmp, h, cmp, ctx);
    coco_stable_sort(a + h, tmp, n - h, cmp, ctx);
    if (cmp(a[h - 1], a[h], ctx) <= 0) return;
    memcpy(tmp, a, h * sizeof *a);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) a[k++] = cmp(a[j], tmp[i], ctx) < 0 ? a[j++] : tmp[i++];
    while (i < h) a[k++] = tmp[i++];
}

