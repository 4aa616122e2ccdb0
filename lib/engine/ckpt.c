// Checkpoint save and load over tk_params (ckpt.h).
#include "engine/ckpt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGE_BYTES ((size_t)16 << 20) // host staging of device tensors
#define CK_CHUNK ((size_t)4 << 20)     // bytes of a tensor a rank sends to rank 0 at a time

static void as_st(const tk_param *p, tk_st_tensor *t) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", p->name);
    t->dtype = p->dtype;
    t->ndim = p->ndim;
    for (int d = 0; d < p->ndim; d++) t->shape[d] = p->shape[d];
}

int tk_ckpt_entries(const tk_params *P, tk_ckpt_entry **out, int *n, tk_err *e) {
    tk_ckpt_entry *ent = calloc((size_t)P->n + 1, sizeof *ent);
    if (!ent) return tk_err_set(e, TK_EIO, "out of host memory");
    int k = 0;
    for (int i = 0; i < P->n; i++) {
        if (!tk_param_held(P, &P->p[i])) continue;
        as_st(&P->p[i], &ent[k].t);
        ent[k].src = P->p[i].w;
        ent[k++].dev = 1;
    }
    *out = ent;
    *n = k;
    return 0;
}

int tk_ckpt_write(tk_ctx *c, const char *path, const tk_ckpt_entry *ent, int n, const json_t *meta, tk_err *e) {
    tk_st_tensor *t = calloc((size_t)n + 1, sizeof *t);
    char *stage = malloc(STAGE_BYTES);
    if (!stage || !t) {
        free(t);
        free(stage);
        return tk_err_set(e, TK_EIO, "out of host memory");
    }
    for (int i = 0; i < n; i++) t[i] = ent[i].t;
    tk_st_writer *w = NULL;
    int rc = tk_st_writer_open(&w, path, t, n, meta, e);
    free(t);
    for (int i = 0; !rc && i < n; i++) {
        uint64_t nb = tk_st_nbytes(&ent[i].t);
        for (uint64_t off = 0; !rc && off < nb; off += STAGE_BYTES) {
            size_t k = nb - off < STAGE_BYTES ? (size_t)(nb - off) : STAGE_BYTES;
            const char *src = (const char *)ent[i].src + off;
            if (ent[i].dev) {
                rc = tk_memcpy_d2h(c, stage, src, k, TK_STREAM_COMPUTE, e);
                if (!rc) rc = tk_ctx_sync(c, e);
                src = stage;
            }
            if (!rc) rc = tk_st_writer_put(w, src, k, e);
        }
    }
    free(stage);
    if (rc) {
        if (w) tk_st_writer_abort(w);
        return rc;
    }
    return tk_st_writer_commit(w, e);
}

// Several ranks: rank 0 writes; a tensor of rank s != 0 reaches it in chunks of CK_CHUNK bytes
// through all-gathers (every rank takes part, only block s is used: the collectives have no
// point-to-point send), so the memory needed is (W + 1) chunks whatever the tensor sizes. A local
// I/O error on rank 0 does not stop the collective sequence (the peers would be left waiting):
// the ranks agree on the outcome at the end.
static int save_dist(tk_dist *d, const tk_params *P, const char *path, const json_t *meta, tk_err *e) {
    tk_ctx *c = d->c;
    const int W = d->world, r = d->rank, CS = TK_STREAM_COMPUTE;
    tk_err le;
    tk_err_clear(&le);
    int lrc = 0; // a local failure (rank 0's file), reported after the agreement
    char *stage = malloc(CK_CHUNK);
    tk_st_tensor *t = calloc((size_t)P->n + 1, sizeof *t);
    if (!stage || !t) lrc = tk_err_set(&le, TK_EIO, "out of host memory");
    char *dbuf = NULL;
    int rc = tk_malloc(c, (void **)&dbuf, CK_CHUNK * (size_t)(W + 1), e);
    if (rc) {
        free(stage);
        free(t);
        return rc;
    }
    char *send = dbuf, *recv = dbuf + CK_CHUNK;
    tk_st_writer *w = NULL;
    if (r == 0 && !lrc) {
        for (int i = 0; i < P->n; i++) as_st(&P->p[i], &t[i]);
        lrc = tk_st_writer_open(&w, path, t, P->n, meta, &le);
    }
    for (int i = 0; !rc && i < P->n; i++) {
        const tk_param *p = &P->p[i];
        uint64_t nb = tk_param_bytes(p);
        int s = p->owner < 0 ? 0 : p->owner;
        if (s == 0 && r != 0) continue; // rank 0 has it: nothing to exchange
        for (uint64_t off = 0; !rc && off < nb; off += CK_CHUNK) {
            size_t k = nb - off < CK_CHUNK ? (size_t)(nb - off) : CK_CHUNK;
            const char *src = p->w ? (const char *)p->w + off : NULL;
            if (s != 0) {
                if (r == s) rc = tk_memcpy_d2d(c, send, src, k, CS, e);
                if (!rc) rc = tk_all_gather(d->comm, send, recv, k, TK_U8, CS, e);
                src = recv + (size_t)s * k;
            }
            if (!rc && r == 0 && !lrc) {
                rc = tk_dist_sync(d, e);
                if (!rc) lrc = tk_memcpy_d2h(c, stage, src, k, CS, &le);
                if (!lrc) lrc = tk_ctx_sync(c, &le);
                if (!lrc) lrc = tk_st_writer_put(w, stage, k, &le);
            }
        }
    }
    if (w) {
        if (rc || lrc) tk_st_writer_abort(w);
        else lrc = tk_st_writer_commit(w, &le);
    }
    // Agree on the outcome: every rank returns an error when one failed.
    int64_t all[TK_MAX_WORLD];
    if (!rc) rc = tk_dist_gather_i64(d, lrc ? 1 : 0, all, 0, e);
    tk_free(c, dbuf);
    free(stage);
    free(t);
    if (rc) return rc;
    if (lrc) {
        *e = le;
        return lrc;
    }
    for (int i = 0; i < W; i++)
        if (all[i]) return tk_err_set(e, TK_EIO, "rank %d failed to write the checkpoint %s", i, path);
    return 0;
}

int tk_ckpt_save(tk_dist *d, const tk_params *P, const char *path, const json_t *meta, tk_err *e) {
    if (d->world > 1) return save_dist(d, P, path, meta, e);
    tk_ckpt_entry *ent;
    int n;
    TRY(tk_ckpt_entries(P, &ent, &n, e));
    int rc = tk_ckpt_write(d->c, path, ent, n, meta, e);
    free(ent);
    return rc;
}

static void shape_str(tk_dtype dt, int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "%s [", tk_dtype_name(dt));
    for (int d = 0; d < ndim && o < n; d++) o += (size_t)snprintf(buf + o, n - o, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

typedef struct {
    tk_ctx *c;
    char *dst;
} load_arg;

static int to_device(void *arg, uint64_t off, const void *chunk, size_t n, tk_err *e) {
    load_arg *a = arg;
    TRY(tk_memcpy_h2d(a->c, a->dst + off, chunk, n, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(a->c, e);
}

static int discard(void *arg, uint64_t off, const void *chunk, size_t n, tk_err *e) {
    (void)arg, (void)off, (void)chunk, (void)n, (void)e;
    return 0;
}

// tk_ckpt_verify through the caller's staging buffer.
static int verify_rest(const tk_st_file *f, const unsigned char *done, void *buf, int *unchecked, tk_err *e) {
    int rc = 0, none = 0;
    for (int i = 0; !rc && i < f->n; i++) {
        if (done && done[i]) continue;
        if (!f->t[i].has_crc) none++;
        else rc = tk_st_read_verified(f, &f->t[i], discard, NULL, buf, STAGE_BYTES, e);
    }
    if (unchecked) *unchecked = none;
    return rc;
}

int tk_ckpt_verify(const tk_st_file *f, const unsigned char *done, int *unchecked, tk_err *e) {
    char *buf = malloc(STAGE_BYTES);
    if (!buf) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = verify_rest(f, done, buf, unchecked, e);
    free(buf);
    return rc;
}

const tk_st_tensor *tk_ckpt_source(const tk_st_file *f, const tk_param *p, int flags) {
    if (!(flags & TK_CKPT_EMA) || !(p->flags & TK_PARAM_DENSE)) return tk_st_find(f, p->name);
    char name[TK_PARAM_NAME + 8];
    snprintf(name, sizeof name, "ema.%s", p->name);
    return tk_st_find(f, name);
}

int tk_ckpt_load(const tk_params *P, const char *path, int flags, json_t **meta, int *verified, tk_err *e) {
    if (meta) *meta = NULL;
    tk_st_file *f;
    TRY(tk_st_open(&f, path, e));
    int rc = 0, all_crc = 1;
    unsigned char *done = calloc((size_t)f->n + 1, 1); // tensors some rank loads
    if (!done) rc = tk_err_set(e, TK_EIO, "out of host memory");
    // Every tensor is checked against the model before any data moves.
    for (int i = 0; !rc && i < P->n; i++) {
        const tk_param *p = &P->p[i];
        if ((flags & TK_CKPT_MODEL_ONLY) && (p->flags & TK_PARAM_EXTERN)) continue;
        const tk_st_tensor *t = tk_ckpt_source(f, p, flags);
        if (t) done[t - f->t] = 1;
        if (!tk_param_held(P, p)) continue; // (its rank checks it)
        char want[96], got[96];
        shape_str(p->dtype, p->ndim, p->shape, want, sizeof want);
        if (!t) {
            const char *pfx = (flags & TK_CKPT_EMA) && (p->flags & TK_PARAM_DENSE) ? "ema." : "";
            rc = tk_err_set(e, TK_EDATA, "%s: tensor '%s%s' (%s) is missing", path, pfx, p->name, want);
            break;
        }
        shape_str(t->dtype, t->ndim, t->shape, got, sizeof got);
        if (strcmp(want, got) != 0) {
            rc = tk_err_set(e, TK_EDATA, "%s: tensor '%s' is %s, the model has %s", path, t->name, got, want);
            tk_err_hint(e, "the checkpoint was written with another configuration");
        }
    }
    char *stage = rc ? NULL : malloc(STAGE_BYTES);
    if (!rc && !stage) rc = tk_err_set(e, TK_EIO, "out of host memory");
    // The tensors no rank loads (the optimizer's state under TK_CKPT_MODEL_ONLY, tensors the model
    // lacks: evaluate makes no optimizer) are verified too, by rank 0, before any data moves: a
    // file that loads is whole, whichever of its tensors a reader wants.
    int unchecked = 0;
    if (!rc && P->rank == 0) rc = verify_rest(f, done, stage, &unchecked, e);
    all_crc = unchecked == 0;
    for (int i = 0; !rc && i < P->n; i++) {
        const tk_param *p = &P->p[i];
        if (!tk_param_held(P, p) || ((flags & TK_CKPT_MODEL_ONLY) && (p->flags & TK_PARAM_EXTERN))) continue;
        const tk_st_tensor *t = tk_ckpt_source(f, p, flags);
        all_crc &= t->has_crc;
        load_arg a = {.c = P->c, .dst = p->w};
        rc = tk_st_read_verified(f, t, to_device, &a, stage, STAGE_BYTES, e);
    }
    free(stage);
    free(done);
    if (!rc && meta) *meta = json_incref(f->meta);
    if (verified) *verified = all_crc;
    tk_st_close(f);
    return rc;
}

// ---- the metadata ----

static int bad_meta(const char *path, const char *key, const char *want, const char *got, tk_err *e) {
    tk_err_set(e, TK_EDATA, "checkpoint metadata '%s': expected %s, got '%.40s'", key, want, got);
    return tk_err_where(e, "%s", path);
}

// A decimal count: digits only (strtoll alone takes blanks, a sign and trailing text).
static int parse_count(const char *s, int64_t *out) {
    if (*s < '0' || *s > '9') return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno) return -1;
    *out = v;
    return 0;
}

int tk_ckpt_meta_parse(const json_t *meta, const char *path, tk_ckpt_meta *m, tk_err *e) {
    static const char *const counts[] = {"step", "samples_seen", "epoch", "world_size"};
    int64_t *const dst[] = {&m->step, &m->samples_seen, &m->epoch, &m->world_size};
    const char *s;
    memset(m, 0, sizeof *m);
    m->format = json_string_value(json_object_get(meta, "format"));
    m->workload = json_string_value(json_object_get(meta, "workload"));
    m->config = json_string_value(json_object_get(meta, "config"));
    for (int i = 0; i < 4; i++) {
        *dst[i] = -1;
        if ((s = json_string_value(json_object_get(meta, counts[i]))) && parse_count(s, dst[i]))
            return bad_meta(path, counts[i], "a decimal count", s, e);
    }
    if ((s = m->config_hash = json_string_value(json_object_get(meta, "config_hash")))) {
        int ok = strlen(s) == 16;
        for (int i = 0; ok && i < 16; i++) ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
        if (!ok) return bad_meta(path, "config_hash", "16 hexadecimal digits", s, e);
    }
    if ((s = m->rng = json_string_value(json_object_get(meta, "rng")))) {
        static const char pfx[] = "philox4x32-10:";
        const char *d = s + sizeof pfx - 1;
        char *end;
        int ok = strncmp(s, pfx, sizeof pfx - 1) == 0 && *d >= '0' && *d <= '9';
        if (ok) {
            errno = 0;
            m->seed = strtoull(d, &end, 10);
            ok = !*end && !errno;
        }
        if (!ok) return bad_meta(path, "rng", "'philox4x32-10:SEED'", s, e);
    }
    return 0;
}

json_t *tk_ckpt_meta_json(const tk_ckpt_meta *m) {
    char step[32], samples[32], epoch[32], rng[64];
    snprintf(step, sizeof step, "%lld", (long long)m->step);
    snprintf(samples, sizeof samples, "%lld", (long long)m->samples_seen);
    snprintf(epoch, sizeof epoch, "%lld", (long long)m->epoch);
    snprintf(rng, sizeof rng, "philox4x32-10:%llu", (unsigned long long)m->seed);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "format", TK_CKPT_FORMAT, "workload",
                          m->workload, "step", step, "samples_seen", samples, "epoch", epoch, "config_hash",
                          m->config_hash, "rng", rng, "config", m->config);
    if (o && m->world_size > 0) json_object_set_new(o, "world_size", json_sprintf("%lld", (long long)m->world_size));
    return o;
}
