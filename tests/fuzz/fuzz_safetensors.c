// Fuzz the safetensors reader (lib/ckpt/safetensors.c): the input is a whole file. A file the
// reader opens must hold tensors that lie inside its data section, do not overlap and match
// their shape and dtype; each is found by name, read whole (checksum checked) and read again a
// few bytes at a time in order. Any input must open or give a TK_EDATA error naming an offset
// (TK_EIO only for memory), and a tensor's read must succeed or fail its checksum: never a crash.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "ckpt/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int bad_code(int rc) { return rc != TK_EDATA && rc != TK_EIO; }

typedef struct { uint64_t next; } chunks;

static int on_chunk(void *arg, uint64_t off, const void *chunk, size_t n, tk_err *e) {
    chunks *c = arg;
    (void)chunk, (void)e;
    if (off != c->next || n == 0 || n > 7) abort(); // in order, whole, at most the buffer
    c->next = off + n;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_safetensors.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    tk_st_file *f;
    tk_err e = {0};
    int rc = tk_st_open(&f, path, &e);
    if (rc) {
        if (bad_code(rc) || (rc == TK_EDATA && !e.where[0])) abort();
    } else {
        uint64_t data_size = f->file_size - f->data_off, total = 0;
        for (int i = 0; i < f->n; i++) {
            const tk_st_tensor *t = &f->t[i];
            uint64_t nb = tk_dtype_size(t->dtype); // the element count must not wrap around
            for (int d = 0; d < t->ndim; d++)
                if (t->shape[d] < 0 || __builtin_mul_overflow(nb, (uint64_t)t->shape[d], &nb)) abort();
            if (t->end < t->begin || t->end > data_size || t->end - t->begin != nb) abort();
            if (tk_st_find(f, t->name) != t) abort();
            total += t->end - t->begin;
        }
        if (total > data_size) abort();
        for (int i = 0; i < f->n && i < 256; i++) // no two non-empty tensors share a byte
            for (int j = 0; j < i; j++)
                if (f->t[i].begin < f->t[j].end && f->t[j].begin < f->t[i].end && f->t[i].end > f->t[i].begin &&
                    f->t[j].end > f->t[j].begin)
                    abort();
        for (int i = 0; i < f->n; i++) {
            const tk_st_tensor *t = &f->t[i];
            size_t nb = (size_t)(t->end - t->begin);
            void *buf = malloc(nb ? nb : 1);
            rc = tk_st_read_all(f, t, buf, &e);
            free(buf);
            if (rc && (rc != TK_EDATA || !t->has_crc)) abort(); // only a checksum can fail
            char small[7];
            chunks c = {0};
            int rc2 = tk_st_read_verified(f, t, on_chunk, &c, small, sizeof small, &e);
            if (rc2 != rc || c.next != nb) abort(); // the same verdict read in pieces
        }
        tk_st_meta(f, "trainkit.step");
        tk_st_close(f);
    }
    unlink(path);
    return 0;
}
