// lib/workloads/dlrm through the engine's instance (as train-step makes and trains it): dense
// gradients of a whole step against finite differences, checkpoint save/load round trip,
// bit-identical continuation, and configuration errors.
#include <stdint.h>
#include <unistd.h>

#include "bce.h"
#include "core/philox.h"
#include "dlrm_case.h"
#include "engine/dist.h"
#include "tk_test.h"
#include "tk_test_cpu.h"
#include "tks/tks.h"
#include "workloads/dlrm/data.h"

static const char *CFG =
    "{\"workload\": \"dlrm\", \"name\": \"t\","
    " \"model\": {\"num_dense\": 3, \"embedding_dim\": 4, \"bottom_mlp\": [5, 4],"
    "   \"top_mlp\": [6, 3, 1], \"interaction_width\": null, \"table_sizes\": [7, 3, 11],"
    "   \"max_table_rows\": 0, \"table_dtype\": \"f32\"},"
    " \"train\": {\"global_batch_size\": 8, \"max_epochs\": 1, \"evals_per_epoch\": 1, \"seed\": 5},"
    " \"optimizer\": {\"name\": \"sgd\", \"base_lr\": 0.5, \"warmup_steps\": 2, \"decay_start_step\": 3,"
    "   \"decay_steps\": 4, \"poly_power\": 2.0, \"min_lr\": 0.0},"
    " \"target\": {\"metric\": \"auc\", \"auc\": 0.8025}}";

// The model of CFG with the overrides, one rank on the cpu: I->model, a tk_dlrm.
static int make(tk_instance *I, char *const *sets, int nsets, tk_err *e) {
    return dlrm_make(I, CFG, sets, nsets, tk_test_cpu(), NULL, 0, e);
}

static void batch(tk_instance *I, uint64_t salt) {
    uint8_t l[8];
    int32_t d[8 * 3], k[8 * 3];
    for (int b = 0; b < 8; b++) {
        tk_philox_ctr r = tk_philox_draw(salt, 77, (uint64_t)b);
        l[b] = r.v[0] & 1;
        for (int j = 0; j < 3; j++) d[b * 3 + j] = (int32_t)(r.v[1 + j % 3] % 50) - 3;
        k[b * 3 + 0] = (int32_t)(r.v[1] % 7);
        k[b * 3 + 1] = (int32_t)(r.v[2] % 3);
        k[b * 3 + 2] = (int32_t)(r.v[3] % 11);
    }
    tk_err e;
    dlrm_put(I, l, d, k, 8, &e);
}

static double loss_now(tk_dlrm *m) {
    tk_err e;
    double acc[2] = {0, 0};
    tk_dlrm_forward(m, m->in_dense, m->in_cat, 8, m->logit, &e);
    tk_bce_logits(m->c, m->logit, m->in_label, 8, NULL, acc, &e);
    return acc[0];
}

TK_TEST(dense_gradients_match_finite_differences) {
    tk_instance I;
    tk_err e;
    char *sets[] = {"optimizer.base_lr=0", "optimizer.warmup_steps=0", "optimizer.decay_steps=0"};
    CHECK_EQ_INT(make(&I, sets, 3, &e), 0);
    tk_dlrm *m = I.model;
    if (!m) return;
    batch(&I, 1);
    CHECK_EQ_INT(tk_instance_step(&I, &e), 0); // lr 0: gradients only, weights unchanged
    // Central differences; a ReLU kink inside [x-h, x+h] makes the two one-sided differences
    // disagree, and such points are skipped (few: the check below counts the rest).
    int checked = 0, skipped = 0;
    for (int l = 0; l < m->nlayers; l++) {
        tk_dlrm_layer *L = &m->L[l];
        for (int k = 0; k < 2; k++) {
            float *p = k ? L->b : L->W, *g = k ? L->db : L->dW;
            int n = k ? L->out : L->in * L->out;
            for (int i = 0; i < n; i++) {
                const float h = 1e-3f;
                float s = p[i];
                double l0 = loss_now(m);
                p[i] = s + h;
                double lp = loss_now(m);
                p[i] = s - h;
                double lm = loss_now(m);
                p[i] = s;
                double fp = (lp - l0) / h, fm = (l0 - lm) / h, fd = (lp - lm) / (2 * h);
                if (fabs(fp - fm) > 5e-4) {
                    skipped++;
                    continue;
                }
                if (!(fabs(g[i] - fd) <= 1e-3 * fmax(1, fabs(fd)) + 2e-4))
                    printf("#   layer %d %s[%d]: %g vs %g\n", l, k ? "b" : "W", i, g[i], fd);
                CHECK(fabs(g[i] - fd) <= 1e-3 * fmax(1, fabs(fd)) + 2e-4);
                checked++;
            }
        }
    }
    CHECK(skipped * 5 < checked);
    printf("#   %d checked, %d skipped at a ReLU kink\n", checked, skipped);
    CHECK(checked > 20);
    tk_instance_destroy(&I);
}

TK_TEST(save_load_and_bit_identical_continuation) {
    tk_instance A, B;
    tk_err e;
    CHECK_EQ_INT(make(&A, NULL, 0, &e), 0);
    CHECK_EQ_INT(make(&B, NULL, 0, &e), 0);
    tk_dlrm *a = A.model, *b = B.model;
    if (!a || !b) return;
    char dir[] = "/tmp/tk-dlrm-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    // a: 2 steps, save, 2 more. b: load after 2, 2 more. Same weights, bit for bit.
    for (int s = 0; s < 2; s++) {
        batch(&A, 10 + s);
        CHECK_EQ_INT(tk_instance_step(&A, &e), 0);
    }
    json_t *meta = json_pack("{s:s}", "step", "2");
    CHECK_EQ_INT(tk_instance_save(&A, path, meta, &e), 0);
    json_decref(meta);
    json_t *got = NULL;
    CHECK_EQ_INT(tk_instance_load(&B, path, 0, &got, NULL, &e), 0);
    CHECK_STR(json_string_value(json_object_get(got, "step")), "2");
    json_decref(got);
    CHECK_EQ_INT(tk_instance_write_step(&B, 2, &e), 0);
    for (int s = 2; s < 4; s++) {
        batch(&A, 10 + s);
        CHECK_EQ_INT(tk_instance_step(&A, &e), 0);
        batch(&B, 10 + s);
        CHECK_EQ_INT(tk_instance_step(&B, &e), 0);
    }
    size_t bytes = (size_t)((char *)a->tables - (char *)a->dense_w) + (size_t)a->rows_total * 4 * 4;
    CHECK(memcmp(a->dense_w, b->dense_w, bytes) == 0);
    int64_t sa, sb;
    dlrm_read_step(&A, &sa, &e);
    dlrm_read_step(&B, &sb, &e);
    CHECK(sa == 4 && sb == 4);
    // A model of another shape refuses the checkpoint, naming the tensor.
    tk_instance D;
    char *sets[] = {"model.bottom_mlp=[6,4]"};
    CHECK_EQ_INT(make(&D, sets, 1, &e), 0);
    if (D.model) {
        CHECK_EQ_INT(tk_instance_load(&D, path, 0, NULL, NULL, &e), TK_EDATA);
        CHECK(strstr(e.what, "tensor 'bot_mlp.0.weight' is F32 [5, 3], the model has F32 [6, 3]") != NULL);
    }
    tk_instance_destroy(&D);
    unlink(path);
    rmdir(dir);
    tk_instance_destroy(&A);
    tk_instance_destroy(&B);
}

TK_TEST(config_errors_name_the_key) {
    tk_instance I;
    tk_err e;
    char *bad1[] = {"optimizer.base_rate=2"};
    CHECK_EQ_INT(make(&I, bad1, 1, &e), TK_EUSAGE);
    CHECK_STR(e.what, "--set: unknown configuration key 'optimizer.base_rate'");
    tk_instance_destroy(&I);
    char *bad2[] = {"train.global_batch_size=0"};
    CHECK_EQ_INT(make(&I, bad2, 1, &e), TK_EDATA);
    CHECK_STR(e.where, "cfg: $.train.global_batch_size");
    tk_instance_destroy(&I);
    char *bad3[] = {"model.table_sizes=\"data\""};
    CHECK_EQ_INT(make(&I, bad3, 1, &e), TK_EDATA);
    tk_instance_destroy(&I);
    // "precision": fp32, tf32 or bf16; bf16 is cuda-only: the cpu reference refuses it (usage)
    {
        json_t *r = json_loads(CFG, 0, NULL);
        json_object_set_new(json_object_get(r, "model"), "precision", json_string("fp16"));
        CHECK_EQ_INT(tk_instance_config(&I, r, "cfg", NULL, 0, NULL, &e), TK_EDATA);
        CHECK_STR(e.where, "cfg: $.model.precision");
        tk_instance_destroy(&I);
        json_object_set_new(json_object_get(r, "model"), "precision", json_string("bf16"));
        CHECK_EQ_INT(tk_instance_config(&I, r, "cfg", NULL, 0, NULL, &e), 0);
        const tk_dlrm_config *pc = I.cfg;
        CHECK(pc->bf16 == 1 && pc->tf32 == 0);
        CHECK_EQ_INT(tk_instance_create(&I, tk_test_cpu(), NULL, 0, &e), TK_EUSAGE);
        CHECK_STR(e.what, "dlrm: precision bf16 needs the cuda backend");
        CHECK(I.model == NULL);
        tk_instance_destroy(&I);
        json_decref(r);
    }
    char *ok[] = {"model.table_sizes=[2,2,2]", "model.max_table_rows=1"};
    json_t *root = json_loads(CFG, 0, NULL);
    CHECK_EQ_INT(tk_instance_config(&I, root, "cfg", ok, 2, NULL, &e), 0);
    const tk_dlrm_config *cfg = I.cfg;
    CHECK(cfg->table_rows[0] == 1 && cfg->interaction_width == 4 + 6);
    json_t *eff = I.effective;
    uint64_t h1 = tk_config_hash(eff);
    CHECK(I.hash == h1);
    json_object_set_new(json_object_get(eff, "train"), "max_epochs", json_integer(9));
    CHECK(tk_config_hash(eff) == h1); // epochs do not change the trajectory
    json_object_set_new(json_object_get(eff, "train"), "seed", json_integer(9));
    CHECK(tk_config_hash(eff) != h1);
    tk_instance_destroy(&I);
    json_decref(root);
}

// The engine's one check of a global batch against the world (every workload's create and
// reader_open ask it): a usage error naming the workload, with the key to change as the hint.
TK_TEST(per_rank_batch_is_checked_once_in_the_engine) {
    tk_err e;
    int64_t b = -1;
    CHECK_EQ_INT(tk_per_rank_batch("dlrm", 240, 8, &b, &e), 0);
    CHECK(b == 30);
    CHECK_EQ_INT(tk_per_rank_batch("mlp", 240, 7, &b, &e), TK_EUSAGE);
    CHECK(b == 0);
    CHECK_STR(e.what, "mlp: the global batch (240) must be a multiple of the world size (7)");
    CHECK_STR(e.hint, "set train.global_batch_size to a multiple of 7");
    CHECK_EQ_INT(tk_per_rank_batch("resnet", 5000000000LL, 3, &b, &e), TK_EUSAGE);
    CHECK_STR(e.what, "resnet: the global batch (5000000000) must be a multiple of the world size (3)");
    CHECK_EQ_INT(tk_per_rank_batch("resnet", 8, 0, &b, &e), TK_EUSAGE);
}

// The engine's one parse of model.precision, over each workload's list: absent is fp32; a word
// the workload does not support is a config error naming the key, listing its words.
TK_TEST(precision_is_parsed_once_over_the_workloads_list) {
    tk_err e;
    tk_precision p = TK_PRECISION_BF16;
    json_t *r = json_loads("{\"model\": {}}", 0, NULL);
    CHECK_EQ_INT(tk_cfg_precision(r, "cfg", tk_dlrm_precisions, &p, &e), 0);
    CHECK(p == TK_PRECISION_FP32);
    json_object_set_new(json_object_get(r, "model"), "precision", json_string("tf32"));
    CHECK_EQ_INT(tk_cfg_precision(r, "cfg", tk_dlrm_precisions, &p, &e), 0);
    CHECK(p == TK_PRECISION_TF32);
    static const char *const fp32_bf16[] = {"fp32", "bf16", NULL}; // ResNet's
    CHECK_EQ_INT(tk_cfg_precision(r, "cfg", fp32_bf16, &p, &e), TK_EDATA);
    CHECK_STR(e.where, "cfg: $.model.precision");
    CHECK_STR(e.what, "expected \"fp32\" or \"bf16\"");
    json_object_set_new(json_object_get(r, "model"), "precision", json_string("bf16"));
    CHECK_EQ_INT(tk_cfg_precision(r, "cfg", fp32_bf16, &p, &e), 0);
    CHECK(p == TK_PRECISION_BF16);
    json_decref(r);
}

// ---- the training reader's share of a rank ----

enum { RN = 30, RB = 12, RD = 3, RT = 4 }; // records, global batch, dense features, tables
static const int64_t RROWS[RT] = {5, 1, 9, 1000};

// Record i of the shard: label i % 2, dense 100 i + j, ids 7 i + 3 t (above some tables' rows).
static void reader_shard(const char *path, int bad_label_at, int negative_id_at) {
    tks_schema s = {0};
    const char *names[3] = {"label", "dense", "cat"};
    const tks_dtype dt[3] = {TKS_U8, TKS_I32, TKS_I32};
    const int64_t len[3] = {0, RD, RT};
    for (int f = 0; f < 3; f++) {
        snprintf(s.f[f].name, sizeof s.f[f].name, "%s", names[f]);
        s.f[f].dtype = dt[f], s.f[f].ndim = len[f] > 0, s.f[f].shape[0] = len[f];
    }
    s.nfields = 3;
    tk_err e = {0};
    uint8_t l[RN];
    int32_t d[RN * RD], k[RN * RT];
    for (int i = 0; i < RN; i++) {
        l[i] = (uint8_t)(i % 2);
        for (int j = 0; j < RD; j++) d[i * RD + j] = 100 * i + j;
        for (int t = 0; t < RT; t++) k[i * RT + t] = 7 * i + 3 * t;
    }
    if (bad_label_at >= 0) l[bad_label_at] = 2;
    if (negative_id_at >= 0) k[negative_id_at * RT + 2] = -4;
    const void *cols[3] = {l, d, k};
    tks_writer *w;
    tks_writer_opts o = {.records_per_frame = 5}; // batches of 12 straddle frames
    if (tks_schema_finish(&s, &e) || tks_writer_open(&w, path, &s, &o, &e) || tks_writer_append(w, cols, RN, &e) ||
        tks_writer_close(w, &e))
        abort();
}

// Batch `step` as rank `rank` of `world` reads it.
static int reader_batch(const char *path, int rank, int world, int64_t step, uint8_t *l, int32_t *d, int32_t *k,
                        tk_err *e) {
    tk_dlrm_config cfg = {.num_dense = RD, .num_tables = RT, .batch = RB};
    memcpy(cfg.table_rows, RROWS, sizeof RROWS);
    char *paths[1] = {(char *)path};
    void *rd;
    TRY(tk_dlrm_data_open(&cfg, rank, world, paths, 1, &rd, e));
    void *f[3] = {l, d, k};
    int rc = tk_dlrm_data_batch(rd, step, RN / RB, f, e);
    tk_dlrm_data_close(rd);
    return rc;
}

// Rank r of W gets, of each global batch, only its samples [r*b, (r+1)*b) (b = B/W): their
// labels, dense features and folded ids (the layout of the model's batch, the table's batch
// member, whose step all-gathers the ids), nothing past them. So each sample is decoded by one rank: a bad record stops only the
// rank whose share holds it.
TK_TEST(reader_gives_each_rank_only_its_share) {
    const char *path = tk_test_path("tk-dlrm", "share.tks");
    reader_shard(path, -1, -1);
    tk_err e;
    for (int64_t step = 0; step < 3; step++) { // 2 batches an epoch: step 2 is batch 0 again
        const int first = (int)(step % 2) * RB;
        for (int W = 1; W <= 4; W++) {
            const int b = RB / W;
            for (int r = 0; r < W; r++) {
                uint8_t l[RB + 1];
                int32_t d[RB * RD + 1], k[RB * RT + 1];
                memset(l, 0xee, sizeof l), memset(d, 0xee, sizeof d), memset(k, 0xee, sizeof k);
                CHECK_EQ_INT(reader_batch(path, r, W, step, l, d, k, &e), 0);
                int ok = 1;
                for (int i = 0; i < b; i++) {
                    int rec = first + r * b + i;
                    ok &= l[i] == rec % 2;
                    for (int j = 0; j < RD; j++) ok &= d[i * RD + j] == 100 * rec + j;
                    for (int t = 0; t < RT; t++) ok &= k[i * RT + t] == (7 * rec + 3 * t) % RROWS[t];
                }
                // nothing past the share
                ok &= l[b] == 0xee && d[b * RD] == (int32_t)0xeeeeeeee && k[b * RT] == (int32_t)0xeeeeeeee;
                if (!ok) printf("#   step %lld, rank %d of %d: wrong batch\n", (long long)step, r, W);
                CHECK(ok);
            }
        }
    }
    // W must divide the global batch (the engine's one check, at open)
    uint8_t l[RB];
    int32_t d[RB * RD], k[RB * RT];
    CHECK_EQ_INT(reader_batch(path, 0, 5, 0, l, d, k, &e), TK_EUSAGE);
    CHECK_STR(e.what, "dlrm: the global batch (12) must be a multiple of the world size (5)");
    // a bad label and a negative id in rank 3's share of 4 (records 9..11 of batch 0): rank 3 says
    // so, naming the record; the others never decode it
    char want[600];
    snprintf(want, sizeof want, "%s: record 10", path);
    for (int bad = 0; bad < 2; bad++) {
        reader_shard(path, bad ? -1 : 10, bad ? 10 : -1);
        for (int r = 0; r < 4; r++) {
            CHECK_EQ_INT(reader_batch(path, r, 4, 0, l, d, k, &e), (r == 3 ? TK_EDATA : 0));
            if (r < 3) continue;
            CHECK_STR(e.what, bad ? "categorical feature 2 has a negative id -4" : "label 2 is not 0 or 1");
            CHECK_STR(e.where, want);
        }
    }
    unlink(path);
    tk_test_rmdir();
}
