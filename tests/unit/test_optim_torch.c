// The C side of tests/cli/optim-torch.bats: with TK_OPTIM_DRIVE=IN:OUT in the environment this
// binary runs the case in IN through the cpu backend's dispatchers (tk_lr_schedule, then
// tk_optim_step, per step) and writes what every step left in OUT, then exits (before its TAP
// tests); contrib/peers/optim_ref.py writes the cases and compares OUT with PyTorch.
//   IN  (safetensors): w0 F32 [n]; grads F32 [steps, n]; segs I64 [nseg, 3] (offset, length,
//       flags); metadata "optimizer" (the optimizer section as JSON, trainkit-optimizer(5)) and
//       "steps_per_epoch" (decimal).
//   OUT (safetensors): lr F32 [steps] and step I64 [steps] (the rate and the counter of each
//       update), w F32 [steps, n], and state F32 [steps, k * n] when the optimizer keeps k > 0
//       floats per parameter.
// Exit status: 0, or the error's code with "test_optim_torch: error: ..." on stderr.
// Without the variable the TAP tests below check the driver itself.
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "engine/optim_config.h"
#include "tk_test.h"

typedef struct {
    float *w0, *grads, *out_w, *out_state, *out_lr, *state;
    int64_t *segs, *out_step;
    tk_opt_seg *seg;
} bufs;

static void bufs_free(bufs *b) {
    void *p[] = {b->w0, b->grads, b->out_w, b->out_state, b->out_lr, b->state, b->segs, b->out_step, b->seg};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
}

// Reads tensor name of dtype dt and ndim dims into a new buffer; shape into shape[].
static int get(const tk_st_file *f, const char *name, tk_dtype dt, int ndim, int64_t *shape, void **out, tk_err *e) {
    const tk_st_tensor *t = tk_st_find(f, name);
    if (!t || t->dtype != dt || t->ndim != ndim)
        return tk_err_set(e, TK_EDATA, "%s: no %s tensor \"%s\" with %d dimensions", f->path, tk_dtype_name(dt), name,
                          ndim);
    memcpy(shape, t->shape, sizeof(int64_t) * ndim);
    size_t bytes = tk_st_nbytes(t);
    *out = malloc(bytes ? bytes : 1);
    if (!*out) return tk_err_set(e, TK_EIO, "out of memory");
    return tk_st_read(f, t, 0, *out, bytes, e);
}

static int run_case(tk_st_file *f, bufs *b, const char *out, tk_err *e) {
    int64_t sh[2], gs[2], ss[2];
    TRY(get(f, "w0", TK_F32, 1, sh, (void **)&b->w0, e));
    TRY(get(f, "grads", TK_F32, 2, gs, (void **)&b->grads, e));
    TRY(get(f, "segs", TK_I64, 2, ss, (void **)&b->segs, e));
    int64_t n = sh[0], steps = gs[0], nseg = ss[0];
    if (gs[1] != n || ss[1] != 3 || steps < 1 || nseg > 100000)
        return tk_err_set(e, TK_EDATA, "%s: grads [%lld, %lld] or segs [%lld, %lld] do not fit w0 [%lld]", f->path,
                          (long long)gs[0], (long long)gs[1], (long long)ss[0], (long long)ss[1], (long long)n);
    const char *text = tk_st_meta(f, "optimizer"), *spe = tk_st_meta(f, "steps_per_epoch");
    json_t *obj = text ? json_loads(text, 0, NULL) : NULL;
    tk_opt_config cfg;
    int rc = obj ? tk_opt_config_parse(obj, f->path, "optimizer", spe ? atoll(spe) : 0, &cfg, e)
                 : tk_err_set(e, TK_EDATA, "%s: no JSON object in metadata \"optimizer\"", f->path);
    json_decref(obj);
    TRY(rc);
    b->seg = calloc((size_t)nseg + 1, sizeof *b->seg);
    for (int64_t s = 0; s < nseg; s++)
        b->seg[s] = (tk_opt_seg){b->segs[3 * s], b->segs[3 * s + 1], (int32_t)b->segs[3 * s + 2], 0};
    size_t k = tk_optim_state_floats(cfg.hp.kind);
    b->state = calloc((size_t)n * k + 1, 4);
    b->out_w = malloc(4 * (size_t)(n * steps) + 4), b->out_state = malloc(4 * (size_t)(n * steps) * k + 4);
    b->out_lr = malloc(4 * (size_t)steps), b->out_step = malloc(8 * (size_t)steps);
    tk_ctx *c;
    TRY(tk_ctx_create(&c, TK_BACKEND_CPU, 0, e));
    int64_t step = 0;
    float lr;
    for (int64_t s = 0; !rc && s < steps; s++) {
        rc = tk_lr_schedule(c, &cfg.lr, &step, &lr, e);
        if (!rc)
            rc = tk_optim_step(c, &cfg.hp, b->w0, b->grads + s * n, b->state, (size_t)n, b->seg, b->seg, (int)nseg,
                               &lr, &step, NULL, TK_BF16, NULL, e);
        memcpy(b->out_w + s * n, b->w0, 4 * (size_t)n);
        memcpy(b->out_state + s * n * (int64_t)k, b->state, 4 * (size_t)n * k);
        b->out_lr[s] = lr, b->out_step[s] = step;
    }
    tk_ctx_destroy(c);
    TRY(rc);
    tk_st_tensor t[4] = {{.name = "lr", .dtype = TK_F32, .ndim = 1, .shape = {steps}},
                         {.name = "step", .dtype = TK_I64, .ndim = 1, .shape = {steps}},
                         {.name = "w", .dtype = TK_F32, .ndim = 2, .shape = {steps, n}},
                         {.name = "state", .dtype = TK_F32, .ndim = 2, .shape = {steps, (int64_t)k * n}}};
    const void *data[4] = {b->out_lr, b->out_step, b->out_w, b->out_state};
    int nt = k > 0 ? 4 : 3;
    tk_st_writer *wr;
    TRY(tk_st_writer_open(&wr, out, t, nt, NULL, e));
    for (int i = 0; i < nt; i++) {
        if ((rc = tk_st_writer_put(wr, data[i], tk_st_nbytes(&t[i]), e))) {
            tk_st_writer_abort(wr);
            return rc;
        }
    }
    return tk_st_writer_commit(wr, e);
}

static int drive(const char *in, const char *out, tk_err *e) {
    tk_st_file *f;
    TRY(tk_st_open(&f, in, e));
    bufs b = {0};
    int rc = run_case(f, &b, out, e);
    bufs_free(&b);
    tk_st_close(f);
    return rc;
}

__attribute__((constructor(200))) static void drive_mode(void) {
    const char *s = getenv("TK_OPTIM_DRIVE");
    if (!s) return;
    char in[4096];
    const char *colon = strchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof in) {
        fprintf(stderr, "test_optim_torch: error: TK_OPTIM_DRIVE must be IN:OUT\n");
        exit(TK_EUSAGE);
    }
    snprintf(in, sizeof in, "%.*s", (int)(colon - s), s);
    tk_err e = {0};
    int rc = drive(in, colon + 1, &e);
    if (rc) {
        char buf[1200];
        tk_err_format(&e, buf, sizeof buf);
        fprintf(stderr, "test_optim_torch: error: %s\n", buf);
    }
    exit(rc);
}

// ---- the driver's own tests ----

static char tmpdir[64];

// Writes a case: SGD at rate 0.5 (a flat poly schedule), w0 = (1, 2, 4), two steps of gradient 1
// on the first two floats, the third in no segment.
static void write_case(const char *path, const char *optimizer, int with_grads) {
    float w0[3] = {1, 2, 4}, grads[6] = {1, 1, 9, 1, 1, 9};
    int64_t segs[3] = {0, 2, 0};
    tk_st_tensor t[3] = {{.name = "w0", .dtype = TK_F32, .ndim = 1, .shape = {3}}, {.name = "segs", .dtype = TK_I64, .ndim = 2, .shape = {1, 3}},
                         {.name = "grads", .dtype = TK_F32, .ndim = 2, .shape = {2, 3}}};
    json_t *meta = json_pack("{s:s, s:s}", "optimizer", optimizer, "steps_per_epoch", "0");
    tk_st_writer *w;
    tk_err e = {0};
    if (tk_st_writer_open(&w, path, t, with_grads ? 3 : 2, meta, &e) || tk_st_writer_put(w, w0, 12, &e) ||
        tk_st_writer_put(w, segs, 24, &e) || (with_grads && tk_st_writer_put(w, grads, 24, &e)) ||
        tk_st_writer_commit(w, &e))
        printf("Bail out! cannot write %s: %s\n", path, e.what), exit(1);
    json_decref(meta);
}

static const char *tmp(const char *name) {
    static char buf[4][128];
    static int k;
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/tk_optim_torch.XXXXXX");
        if (!mkdtemp(tmpdir)) printf("Bail out! mkdtemp\n"), exit(1);
    }
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

TK_TEST(drive_two_sgd_steps) {
    const char *in = tmp("in.safetensors"), *out = tmp("out.safetensors");
    write_case(in, "{\"name\": \"sgd\", \"base_lr\": 0.5}", 1);
    tk_err e = {0};
    CHECK_EQ_INT(drive(in, out, &e), 0);
    tk_st_file *f;
    CHECK_EQ_INT(tk_st_open(&f, out, &e), 0);
    float w[6] = {0}, lr[2] = {0};
    int64_t step[2] = {0};
    CHECK_EQ_INT(tk_st_read(f, tk_st_find(f, "w"), 0, w, 24, &e), 0);
    CHECK_EQ_INT(tk_st_read(f, tk_st_find(f, "lr"), 0, lr, 8, &e), 0);
    CHECK_EQ_INT(tk_st_read(f, tk_st_find(f, "step"), 0, step, 16, &e), 0);
    CHECK(tk_st_find(f, "state") == NULL); // SGD keeps no state
    // w -= 0.5 * 1 twice on the segment; the float outside it stays.
    CHECK(w[0] == 0.5f && w[1] == 1.5f && w[2] == 4 && w[3] == 0 && w[4] == 1 && w[5] == 4);
    CHECK(lr[0] == 0.5f && lr[1] == 0.5f && step[0] == 1 && step[1] == 2);
    tk_st_close(f);
    unlink(in), unlink(out);
}

TK_TEST(drive_refuses_bad_cases) {
    const char *in = tmp("bad.safetensors"), *out = tmp("never.safetensors");
    tk_err e = {0};
    write_case(in, "{\"name\": \"sgd\", \"base_lr\": 0.5}", 0);
    CHECK_EQ_INT(drive(in, out, &e), TK_EDATA);
    char want[256];
    snprintf(want, sizeof want, "%s: no F32 tensor \"grads\" with 2 dimensions", in);
    CHECK_STR(e.what, want);
    write_case(in, "{\"name\": \"sgd\", \"base_lr\": 0.5, \"beta1\": 0.9}", 1);
    CHECK_EQ_INT(drive(in, out, &e), TK_EDATA);
    CHECK_STR(e.what, "\"beta1\" is not a key of optimizer \"sgd\"");
    CHECK(access(out, F_OK) != 0); // nothing written
    unlink(in);
    rmdir(tmpdir);
}
