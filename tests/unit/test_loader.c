// The engine's input path (lib/engine/loader.h): loader threads, their buffers and the staging
// slots, with readers that write every field on the host and readers that say some fields are
// device memory (workload.h reader_device). On the cpu backend device memory is host memory, so
// what is checked here is the plumbing: which buffers each field gets, that every batch arrives
// whole in its slot in step order whatever the threads and the mask, and that a mask bit past the
// layout's fields is ignored.
#include <pthread.h>

#include "engine/loader.h"
#include "tk_test.h"

enum { NF = 3 };
static const size_t bytes[NF] = {1000, 24, 333};

typedef struct {
    unsigned mask;   // what on_device answers
    int opened;
    pthread_mutex_t mu;
} src_cfg;

static int src_open(void *arg, void **rd, tk_err *e) {
    (void)e;
    src_cfg *c = arg;
    pthread_mutex_lock(&c->mu);
    c->opened++;
    pthread_mutex_unlock(&c->mu);
    *rd = c;
    return 0;
}

// Batch step: byte k of field f is (step * 7 + f * 31 + k) % 251.
static int src_read(void *rd, int64_t step, void *const *bufs, tk_err *e) {
    (void)rd, (void)e;
    for (int f = 0; f < NF; f++)
        for (size_t k = 0; k < bytes[f]; k++) ((unsigned char *)bufs[f])[k] = (unsigned char)((step * 7 + f * 31 + (int64_t)k) % 251);
    return 0;
}

static void src_close(void *rd) { (void)rd; }
static unsigned src_on_device(void *rd) { return ((src_cfg *)rd)->mask; }

static int batch_ok(const unsigned char *p, int f, int64_t step) {
    for (size_t k = 0; k < bytes[f]; k++)
        if (p[k] != (unsigned char)((step * 7 + f * 31 + (int64_t)k) % 251)) return 0;
    return 1;
}

// Steps [first, last) through `workers` loader threads and the two slots, as the engine's loop
// takes them (stage step, use it, stage the next); returns the batches that arrived intact.
static int run(tk_ctx *c, unsigned mask, int with_on_device, int workers, int64_t first, int64_t last,
               int *dev_workers, unsigned *seen_mask, int *tk_failed_) {
    src_cfg sc = {.mask = mask};
    pthread_mutex_init(&sc.mu, NULL);
    tk_batch_source src = {.open = src_open, .read = src_read, .close = src_close,
                           .on_device = with_on_device ? src_on_device : NULL, .arg = &sc};
    tk_batch_layout L = {.nfields = NF, .bytes = {bytes[0], bytes[1], bytes[2]}};
    tk_loader *l = NULL;
    tk_stager st;
    tk_err e = {0};
    void *in[NF];
    for (int f = 0; f < NF; f++) in[f] = calloc(1, bytes[f]);
    CHECK_EQ_INT(tk_stager_init(&st, c, &L, 2, &e), 0);
    CHECK_EQ_INT(tk_loader_start(&l, c, &src, &L, first, last, workers, &e), 0);
    CHECK_EQ_INT(sc.opened, workers);
    *dev_workers = tk_loader_device_workers(l);
    int good = 0;
    for (int64_t s = first; s < last; s++) {
        void *const *buf;
        unsigned m = 99;
        CHECK_EQ_INT(tk_loader_get(l, s, &buf, &m, &e), 0);
        *seen_mask |= m;
        CHECK_EQ_INT(tk_stager_stage(&st, (int)(s & 1), buf, m, NULL, NULL, &e), 0);
        tk_loader_put(l, s);
        CHECK_EQ_INT(tk_stager_use(&st, (int)(s & 1), in, &e), 0);
        int ok = 1;
        for (int f = 0; f < NF; f++) ok &= batch_ok(in[f], f, s);
        good += ok;
    }
    tk_loader_stop(l);
    tk_stager_release(&st);
    for (int f = 0; f < NF; f++) free(in[f]);
    pthread_mutex_destroy(&sc.mu);
    return good;
}

TK_TEST(host_and_device_fields_arrive_whole_in_order) {
    tk_ctx *c = NULL;
    tk_err e = {0};
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    // mask, whether the source has on_device, workers -> device workers and the mask seen
    const struct { unsigned mask; int has; int workers; int want_dev; unsigned want_mask; } cases[] = {
        {0, 0, 1, 0, 0},       // no on_device member: host, as before device batches
        {0, 1, 3, 0, 0},       // a reader that says no
        {1u, 1, 1, 1, 1u},     // the images on the device, the rest host (ResNet's nvjpeg reader)
        {5u, 1, 3, 3, 5u},     // two of three fields
        {0xffu, 1, 2, 2, 7u},  // bits past the layout's 3 fields ignored
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int dev = -1;
        unsigned seen = 0;
        int good = run(c, cases[i].mask, cases[i].has, cases[i].workers, 5, 23, &dev, &seen, tk_failed_);
        if (good != 18 || dev != cases[i].want_dev || seen != cases[i].want_mask)
            printf("#   case %zu: %d of 18 batches intact, %d device workers, mask %#x\n", i, good, dev, seen);
        CHECK_EQ_INT(good, 18);
        CHECK_EQ_INT(dev, cases[i].want_dev);
        CHECK_EQ_INT(seen, cases[i].want_mask);
    }
    CHECK_EQ_INT(tk_loader_device_workers(NULL), 0);
    tk_ctx_destroy(c);
}

// The hook of a three-slot stager: the batch that each slot's fields hold when it is called.
typedef struct {
    int64_t next;   // the batch being staged
    int bad;        // hook calls that saw another batch, or the wrong slot
} hook_log;

static int check_hook(void *arg, int slot, void *const *dev, int stream, tk_err *e) {
    (void)stream, (void)e;
    hook_log *h = arg;
    int ok = slot == (int)(h->next % 3);
    for (int f = 0; f < NF; f++) ok &= batch_ok(dev[f], f, h->next);
    h->bad += !ok;
    return 0;
}

TK_TEST(three_slots_hold_two_batches_ahead) {
    // The engine's order with three slots (workload.h stage_depth): batches 0 and 1 staged, then
    // per step n: use n, stage n + 2. Each batch arrives whole in its slot, the hook sees it
    // there, and a slot's contents stay until used although a later batch was staged since.
    tk_ctx *c = NULL;
    tk_err e = {0};
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    tk_batch_layout L = {.nfields = NF, .bytes = {bytes[0], bytes[1], bytes[2]}};
    tk_stager st;
    CHECK_EQ_INT(tk_stager_init(&st, c, &L, 1, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_stager_init(&st, c, &L, TK_STAGE_MAX_SLOTS + 1, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_stager_init(&st, c, &L, 3, &e), 0);
    void *in[NF], *src[NF];
    for (int f = 0; f < NF; f++) in[f] = calloc(1, bytes[f]), src[f] = malloc(bytes[f]);
    hook_log h = {0};
    enum { N = 11 };
    int good = 0;
    int64_t next = 0;
    for (int64_t s = 0; s < N; s++) {
        for (int after = 0; after < 2; after++) { // before the use: up to s + 1; after: s + 2
            for (; next < s + 2 + after && next < N; next++) {
                src_read(NULL, next, src, &e);
                h.next = next;
                CHECK_EQ_INT(tk_stager_stage(&st, (int)(next % 3), src, 0, check_hook, &h, &e), 0);
            }
            if (after) break;
            CHECK_EQ_INT(tk_stager_use(&st, (int)(s % 3), in, &e), 0);
            int ok = 1;
            for (int f = 0; f < NF; f++) ok &= batch_ok(in[f], f, s);
            good += ok;
        }
    }
    CHECK_EQ_INT(good, N);
    CHECK_EQ_INT(h.bad, 0);
    CHECK_EQ_INT(tk_stager_stage(&st, 3, src, 0, NULL, NULL, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_stager_use(&st, -1, in, &e), TK_EINTERNAL);
    tk_stager_release(&st);
    for (int f = 0; f < NF; f++) free(in[f]), free(src[f]);
    tk_ctx_destroy(c);
}
