// BERT as a workload (lib/workloads/bert) on the cpu backend: the whole model's gradient against
// finite differences of its loss (dropout on: the masks are fixed by the update counter), the
// configuration's checks, the .tks reader's checks of every record (errors name the file and the
// record), the Hugging Face import, the MLLOG keys, and the MLPerf config's numbers.
#include <unistd.h>

#include "core/mllog.h"
#include "engine/instance.h"
#include "tks/tks.h"
#include "tk_test.h"
#include "tk_test_cpu.h"
#include "workloads/bert/bert.h"

static const char *cfg_text =
    "{\"workload\": \"bert\", \"model\": {\"vocab_size\": 37, \"hidden_size\": 16, \"num_layers\": 2, "
    "\"num_heads\": 2, \"intermediate_size\": 24, \"max_position_embeddings\": 16, \"type_vocab_size\": 2, "
    "\"max_seq_length\": 12, \"max_predictions_per_seq\": 3, \"hidden_dropout\": 0.1, "
    "\"attention_dropout\": 0.1, \"dropout\": true, \"initializer_range\": 0.5, \"precision\": \"fp32\", "
    "\"unpad\": false, \"unpad_bucket\": 1024}, "
    "\"train\": {\"global_batch_size\": 4, \"max_epochs\": 1, \"evals_per_epoch\": 1, \"seed\": 5}, "
    "\"optimizer\": {\"name\": \"sgd\", \"base_lr\": 0.1, \"warmup_steps\": 0, \"decay_start_step\": 0, "
    "\"decay_steps\": 0, \"poly_power\": 1.0, \"min_lr\": 0.0}, "
    "\"target\": {\"metric\": \"mlm_accuracy\", \"mlm_accuracy\": 0.7}}";

// An instance of the config with overrides; NULL (and e filled) on error.
static tk_instance *make(char *const *sets, int nsets, const char *meta, tk_err *e) {
    tk_instance *I = calloc(1, sizeof *I);
    json_t *root = json_loads(cfg_text, 0, NULL);
    int rc = tk_instance_config(I, root, "cfg.json", sets, nsets, meta, e);
    json_decref(root);
    tk_ctx *c = tk_test_cpu();
    c->threads = 1;
    if (!rc) rc = tk_instance_create(I, c, NULL, 0, e);
    if (!rc) rc = tk_instance_optimizer(I, 1, e);
    if (!rc) rc = tk_instance_init_weights(I, 5, e);
    if (rc) {
        if (I->cfg || I->effective) tk_instance_destroy(I);
        free(I);
        return NULL;
    }
    return I;
}

static void destroy(tk_instance *I) {
    tk_instance_destroy(I);
    free(I);
}

// A small batch: sequences of 12 with lengths 12, 7, 9, 5; masked positions distinct.
static void put_batch(tk_bert *m) {
    static const int len[4] = {12, 7, 9, 5};
    for (int b = 0; b < 4; b++) {
        m->in_len[b] = len[b];
        m->in_nsp[b] = b & 1;
        for (int t = 0; t < 12; t++) {
            m->in_ids[b * 12 + t] = t < len[b] ? (t == 0 ? 2 : 5 + (b * 7 + t * 3) % 32) : 0;
            m->in_seg[b * 12 + t] = t < len[b] && t > len[b] / 2;
        }
        m->in_nmask[b] = b == 3 ? 1 : 3;
        for (int k = 0; k < 3; k++) {
            m->in_pos[b * 3 + k] = k < m->in_nmask[b] ? 1 + k * 2 : 0;
            m->in_mid[b * 3 + k] = k < m->in_nmask[b] ? 5 + (b + k * 11) % 32 : 0;
        }
    }
}

static double loss(tk_instance *I) {
    tk_err e = {0};
    I->loss_acc[0] = I->loss_acc[1] = 0;
    if (I->wl->step(I->model, &e)) abort();
    return I->loss_acc[0];
}

// (padded, and packed: model.unpad with its own hidden-dropout masks, rows rounded up to 8)
static void gradient_case(int unpad, int *tk_failed_) {
    tk_err e = {0};
    char *sets[] = {"model.unpad=true", "model.unpad_bucket=8"};
    tk_instance *I = make(sets, unpad ? 2 : 0, NULL, &e);
    if (!I) printf("# %s\n", e.what);
    CHECK(I != NULL);
    if (!I) return;
    tk_bert *m = I->model;
    put_batch(m);
    m->rows = tk_bert_rows_for(m, m->in_len);
    CHECK_EQ_INT(m->rows, unpad ? 40 : 48); // 33 real tokens
    *I->step = 3; // the dropout masks of update 3, in every evaluation below
    double l0 = loss(I);
    CHECK(l0 > 0 && l0 == l0);
    size_t n = I->P.dense_n;
    float *g = malloc(n * sizeof *g);
    memcpy(g, I->P.dense_g, n * sizeof *g);
    // every tensor: its largest gradient element and a few others
    int checked = 0, bad = 0;
    for (int i = 0; i < I->P.ndense; i++) {
        tk_param *p = &I->P.p[i];
        size_t off = (size_t)((float *)p->w - I->P.dense_w), k = (size_t)tk_param_numel(p), big = 0;
        for (size_t j = 1; j < k; j++)
            if (fabsf(g[off + j]) > fabsf(g[off + big])) big = j;
        size_t pick[3] = {big, k / 3, k - 1};
        for (int q = 0; q < 3; q++) {
            float *w = (float *)p->w + pick[q], keep = *w;
            double h = 4e-3, f[2];
            for (int s = 0; s < 2; s++) {
                *w = keep + (float)(s ? -h : h);
                f[s] = loss(I);
            }
            *w = keep;
            double fd = (f[0] - f[1]) / (2 * h), an = g[off + pick[q]];
            // the key bias's gradient is 0 (softmax ignores a constant per row): noise on both sides
            double scale = fabs(fd) > 2e-2 ? fabs(fd) : 2e-2; // (fp32 loss: differences carry ~1e-4 of noise)
            if (!(fabs(fd - an) <= 2e-2 * scale)) {
                for (double hh = 4e-3; hh > 1e-4; hh /= 4) {
                    double ff[2];
                    for (int s = 0; s < 2; s++) {
                        *w = keep + (float)(s ? -hh : hh);
                        ff[s] = loss(I);
                    }
                    *w = keep;
                    printf("#     h %g: %.6g\n", hh, (ff[0] - ff[1]) / (2 * hh));
                }
                printf("#   %s[%zu]: analytic %.6g, differences %.6g\n", p->name, pick[q], an, fd);
                bad++;
            }
            checked++;
        }
    }
    printf("# %d gradient elements against central differences, %d off\n", checked, bad);
    CHECK(bad == 0 && checked == 3 * I->P.ndense);
    // the vocabulary padding rows (37 -> 40) of the word embeddings and the output bias: 0
    tk_param *wp = &I->P.p[tk_params_find(&I->P, "bert.embeddings.word_embeddings.weight")];
    CHECK_EQ_INT(wp->shape[0], 40);
    for (int r = 37; r < 40; r++)
        for (int h = 0; h < 16; h++) CHECK(((float *)wp->w)[r * 16 + h] == 0 && wp->g[r * 16 + h] == 0);
    free(g);
    destroy(I);
}

TK_TEST(whole_model_gradient_matches_differences) { gradient_case(0, tk_failed_); }
TK_TEST(unpadded_gradient_matches_differences) { gradient_case(1, tk_failed_); }

// The unpadded step (the real tokens packed, rows rounded up to 8 with rows past them) gives the
// padded step's loss and gradients bit for bit: the GEMMs' sums run over the same real rows in
// the same order (the padding rows add exact zeros), the attention sees the same per-head
// products and dropout elements, the embeddings run padded in both. The hidden dropouts after the
// layers' dense outputs are drawn over the packed rows (another draw of the same distribution),
// so they are off here; the embeddings' and the attention's dropouts are on. Two batches: the
// second shorter, so rows real in the first are padding in the second (their stale values must
// not reach any gradient).
TK_TEST(unpadded_step_equals_padded) {
    tk_err e = {0};
    char *pad[] = {"model.hidden_dropout=0"}, *unp[] = {"model.hidden_dropout=0", "model.unpad=true",
                                                       "model.unpad_bucket=8"};
    tk_instance *I = make(pad, 1, NULL, &e), *J = make(unp, 3, NULL, &e);
    CHECK(I && J);
    if (!I || !J) return;
    tk_bert *a = I->model, *b = J->model;
    size_t n = I->P.dense_n;
    for (int round = 0; round < 2; round++) {
        put_batch(a), put_batch(b);
        if (round == 1)
            for (int s = 0; s < 4; s++) a->in_len[s] = b->in_len[s] = 6 + s % 3; // 6 7 8 6: 27 tokens
        a->rows = tk_bert_rows_for(a, a->in_len), b->rows = tk_bert_rows_for(b, b->in_len);
        CHECK_EQ_INT(b->rows, round ? 32 : 40);
        *I->step = *J->step = 2 + round;
        double la = loss(I), lb = loss(J);
        printf("# round %d: loss padded %.9g, unpadded %.9g\n", round, la, lb);
        CHECK(la == lb && la > 0);
        size_t diff = 0;
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            diff += I->P.dense_g[i] != J->P.dense_g[i];
            double d = fabs((double)I->P.dense_g[i] - J->P.dense_g[i]);
            worst = d > worst ? d : worst;
        }
        printf("# round %d: %zu of %zu gradient elements differ (largest difference %.3g)\n", round, diff, n, worst);
        CHECK(diff == 0);
    }
    // whole training iterations through the engine's instance (schedule, step, optimizer): the
    // same weights after two updates (and the weights moved)
    float *w0 = malloc(n * sizeof(float));
    memcpy(w0, I->P.dense_w, n * sizeof(float));
    for (int k = 0; k < 2; k++) {
        put_batch(a), put_batch(b);
        a->rows = tk_bert_rows_for(a, a->in_len), b->rows = tk_bert_rows_for(b, b->in_len);
        CHECK(tk_instance_step(I, &e) == 0 && tk_instance_step(J, &e) == 0);
    }
    CHECK(memcmp(I->P.dense_w, J->P.dense_w, n * sizeof(float)) == 0);
    CHECK(memcmp(I->P.dense_w, w0, n * sizeof(float)) != 0);
    free(w0);
    destroy(I), destroy(J);
}

TK_TEST(dropout_changes_with_the_update_and_turns_off) {
    tk_err e = {0};
    tk_instance *I = make(NULL, 0, NULL, &e);
    char *off[] = {"model.dropout=false"};
    tk_instance *J = make(off, 1, NULL, &e);
    CHECK(I && J);
    if (!I || !J) return;
    put_batch(I->model), put_batch(J->model);
    *I->step = 1;
    double a = loss(I), a2 = loss(I);
    *I->step = 2;
    double b = loss(I);
    CHECK(a == a2 && a != b); // the masks are the update's
    *J->step = 1;
    double c = loss(J);
    *J->step = 2;
    CHECK(c == loss(J));
    destroy(I), destroy(J);
}

TK_TEST(config_errors) {
    tk_err e = {0};
    char *s1[] = {"model.num_heads=3"};
    CHECK(make(s1, 1, NULL, &e) == NULL && e.code == TK_EDATA && strstr(e.what, "must divide hidden_size"));
    char *s2[] = {"model.max_seq_length=20"};
    CHECK(make(s2, 1, NULL, &e) == NULL && strstr(e.where, "cfg.json: $.model.max_seq_length"));
    char *s3[] = {"model.vocab_size=\"data\""};
    CHECK(make(s3, 1, NULL, &e) == NULL && strstr(e.what, "needs the training data's schema meta \"vocab_size\""));
    tk_instance *I = make(s3, 1, "{\"vocab_size\": 61}", &e);
    CHECK(I != NULL);
    if (I) destroy(I);
    char *s4[] = {"model.precision=bf16"}; // the engine's check: the cpu backend has no bf16 compute
    CHECK(make(s4, 1, NULL, &e) == NULL && e.code == TK_EUSAGE);
    CHECK_STR(e.what, "bert: precision bf16 needs the cuda backend");
    char *s4t[] = {"model.precision=tf32"}; // tf32 rounds cuda's tensor-core inputs: the cpu computes fp32
    I = make(s4t, 1, NULL, &e);
    CHECK(I != NULL);
    if (I) destroy(I);
    char *s5[] = {"train.global_batch_size=3"};
    I = make(s5, 1, NULL, &e);
    CHECK(I != NULL);
    if (I) destroy(I);
    json_t *root = json_loads(cfg_text, 0, NULL);
    json_object_set_new(json_object_get(root, "model"), "hiden_size", json_integer(3));
    tk_instance J;
    CHECK(tk_instance_config(&J, root, "cfg.json", NULL, 0, NULL, &e) == TK_EDATA);
    CHECK(strstr(e.where, "$.model.hiden_size") != NULL);
    tk_instance_destroy(&J);
    json_decref(root);
}

// ---- the reader ----

// A .tks file of n records in prep bert's schema of input_ids i16[Lf], segment_ids u8[Ls],
// masked_lm_positions and masked_lm_ids i16[Pf] (records of 10 tokens, 2 masked), record `bad`
// given field=value.
static void write_shaped(const char *path, int n, int Lf, int Ls, int Pf, int bad, const char *field, int value) {
    tks_schema s = {0};
    const char *names[7] = {"input_ids", "segment_ids", "seq_len", "masked_lm_positions", "masked_lm_ids",
                            "num_masked", "next_sentence_labels"};
    tks_dtype dt[7] = {TKS_I16, TKS_U8, TKS_I16, TKS_I16, TKS_I16, TKS_I16, TKS_U8};
    int64_t shp[7] = {Lf, Ls, 0, Pf, Pf, 0, 0};
    for (int f = 0; f < 7; f++) {
        snprintf(s.f[f].name, sizeof s.f[f].name, "%s", names[f]);
        s.f[f].dtype = dt[f], s.f[f].ndim = shp[f] > 0, s.f[f].shape[0] = shp[f];
    }
    s.nfields = 7;
    snprintf(s.meta_json, sizeof s.meta_json, "{\"vocab_size\": 37, \"max_seq_length\": 12, \"max_predictions_per_seq\": 3}");
    tk_err e = {0};
    if (tks_schema_finish(&s, &e)) abort();
    int16_t *ids = calloc((size_t)n * Lf, 2), *len = calloc(n, 2), *pos = calloc((size_t)n * Pf, 2),
            *mid = calloc((size_t)n * Pf, 2), *nm = calloc(n, 2);
    uint8_t *seg = calloc((size_t)n * Ls, 1), *nsp = calloc(n, 1);
    for (int r = 0; r < n; r++) {
        len[r] = 10, nm[r] = 2, nsp[r] = r & 1;
        for (int t = 0; t < 10; t++) ids[r * Lf + t] = (int16_t)(5 + (r + t) % 30), seg[r * Ls + t] = t > 5;
        pos[r * Pf] = 3, pos[r * Pf + 1] = 6, mid[r * Pf] = 9, mid[r * Pf + 1] = 10;
    }
    if (bad >= 0) {
        if (!strcmp(field, "seq_len")) len[bad] = (int16_t)value;
        else if (!strcmp(field, "input_ids")) ids[bad * Lf + 4] = (int16_t)value;
        else if (!strcmp(field, "masked_lm_positions")) pos[bad * Pf + 1] = (int16_t)value;
        else if (!strcmp(field, "num_masked")) nm[bad] = (int16_t)value;
        else if (!strcmp(field, "next_sentence_labels")) nsp[bad] = (uint8_t)value;
    }
    const void *cols[7] = {ids, seg, len, pos, mid, nm, nsp};
    tks_writer *w;
    tks_writer_opts o = {.records_per_frame = 5};
    if (tks_writer_open(&w, path, &s, &o, &e) || tks_writer_append(w, cols, (size_t)n, &e) || tks_writer_close(w, &e))
        abort();
    free(ids), free(len), free(pos), free(mid), free(nm), free(seg), free(nsp);
}

// (L 12, P 3)
static void write_shard(const char *path, int n, int bad, const char *field, int value) {
    write_shaped(path, n, 12, 12, 3, bad, field, value);
}

static int read_all(const char *path, int L, int P, tk_err *e) {
    void *d;
    char *paths[1] = {(char *)path};
    const tk_bert_config c = {.L = L, .P = P, .vocab = 37, .types = 2, .batch = 4};
    TRY(tk_bert_data_open(&c, 0, 1, paths, 1, &d, e));
    int n = (int)tk_bert_data_count(d);
    int32_t ids[20 * 12], len[20], pos[20 * 3], mid[20 * 3], nm[20], nsp[20];
    uint8_t seg[20 * 12];
    int rc = tk_bert_data_read(d, 0, n, ids, seg, len, pos, mid, nm, nsp, e);
    if (!rc && (len[7] != 10 || ids[7 * L + 2] != 5 + 9 % 30 || pos[7 * P + 1] != 6 || nm[7] != 2 || nsp[7] != 1 ||
                (L > 10 && ids[7 * L + 10] != 0)))
        rc = tk_err_set(e, TK_EINTERNAL, "record 7 read wrong");
    tk_bert_data_close(d);
    return rc;
}

TK_TEST(reader_checks_every_record) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/tk_bert_%d.tks", (int)getpid());
    tk_err e = {0};
    write_shard(path, 20, -1, NULL, 0);
    CHECK(read_all(path, 12, 3, &e) == 0);
    CHECK(read_all(path, 10, 2, &e) == 0); // a file of longer rows feeds a smaller model
    CHECK(read_all(path, 9, 3, &e) == TK_EDATA && strstr(e.what, "a sequence of 10 tokens is longer than model.max_seq_length 9"));
    char want[128];
    snprintf(want, sizeof want, "%s: record 0", path);
    CHECK(strstr(e.where, want) != NULL);
    struct { const char *f; int v; const char *what; } cases[] = {
        {"seq_len", 13, "seq_len 13 is outside [1, 12]"},
        {"seq_len", 0, "seq_len 0 is outside [1, 12]"},
        {"input_ids", 37, "input_ids[4] = 37 is not a token id"},
        {"input_ids", -2, "input_ids[4] = -2 is not a token id"},
        {"masked_lm_positions", 10, "masked_lm_positions[1] = 10 is outside the sequence"},
        {"num_masked", 4, "num_masked 4 is outside [0, 3]"},
        {"next_sentence_labels", 2, "next_sentence_labels 2 is not 0 or 1"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        write_shard(path, 20, 13, cases[k].f, cases[k].v);
        int rc = read_all(path, 12, 3, &e);
        snprintf(want, sizeof want, "%s: record 13", path);
        CHECK(rc == TK_EDATA && strstr(e.what, cases[k].what) && strstr(e.where, want));
        if (rc != TK_EDATA || !strstr(e.what, cases[k].what)) printf("#   %s -> %s\n", cases[k].what, e.what);
    }
    // a file that is not BERT's
    tks_schema s = {0};
    snprintf(s.f[0].name, sizeof s.f[0].name, "label");
    s.f[0].dtype = TKS_U8, s.nfields = 1;
    tks_schema_finish(&s, &e);
    tks_writer *w;
    uint8_t one = 1;
    const void *col[1] = {&one};
    tks_writer_opts o = {0};
    CHECK(tks_writer_open(&w, path, &s, &o, &e) == 0 && tks_writer_append(w, col, 1, &e) == 0 && tks_writer_close(w, &e) == 0);
    CHECK(read_all(path, 12, 3, &e) == TK_EDATA && strstr(e.what, "field 'input_ids' must be i16[N]") && strstr(e.where, path));
    unlink(path);
}

// One reader over files of different lengths (a 12-token shard and a 16-token one): each record
// read at its file's stride; a file whose segment_ids are not as long as its input_ids is a schema
// error naming it.
TK_TEST(reader_files_of_their_own_lengths) {
    char a[64], b[64];
    snprintf(a, sizeof a, "/tmp/tk_bert_a_%d.tks", (int)getpid());
    snprintf(b, sizeof b, "/tmp/tk_bert_b_%d.tks", (int)getpid());
    tk_err e = {0};
    write_shaped(a, 20, 12, 12, 3, 13, "input_ids", 7);
    write_shaped(b, 20, 16, 16, 4, 13, "input_ids", 8);
    char *paths[2] = {a, b};
    const int L = 12, P = 3;
    const tk_bert_config c = {.L = L, .P = P, .vocab = 37, .types = 2, .batch = 4};
    void *d = NULL;
    CHECK_EQ_INT(tk_bert_data_open(&c, 0, 1, paths, 2, &d, &e), 0);
    if (!d) return;
    CHECK_EQ_INT(tk_bert_data_count(d), 40);
    int32_t ids[40 * 12], len[40], pos[40 * 3], mid[40 * 3], nm[40];
    uint8_t seg[40 * 12];
    CHECK_EQ_INT(tk_bert_data_read(d, 3, 37, ids, seg, len, pos, mid, nm, NULL, &e), 0); // across the files
    for (int o = 0; o < 37; o++) {
        const int r = (o + 3) % 20; // the record in its file
        CHECK(len[o] == 10 && nm[o] == 2 && pos[o * P + 1] == 6 && mid[o * P + 1] == 10 && pos[o * P + 2] == 0);
        CHECK(ids[o * L + 2] == 5 + (r + 2) % 30 && ids[o * L + 9] == 5 + (r + 9) % 30 && ids[o * L + 10] == 0);
        CHECK(seg[o * L + 5] == 0 && seg[o * L + 6] == 1 && seg[o * L + 10] == 0);
        CHECK_EQ_INT(ids[o * L + 4], r == 13 ? 7 + (o + 3 >= 20) : 5 + (r + 4) % 30);
    }
    tk_bert_data_close(d);
    write_shaped(b, 20, 12, 11, 3, -1, NULL, 0);
    CHECK_EQ_INT(tk_bert_data_open(&c, 0, 1, paths, 2, &d, &e), TK_EDATA);
    CHECK(strstr(e.what, "schema: field 'segment_ids' must be as long as 'input_ids' (a BERT record from prep bert)"));
    CHECK(strstr(e.where, b) != NULL);
    unlink(a), unlink(b);
}

// ---- MLLOG, checkpoints, the MLPerf config ----

TK_TEST(mllog_keys_of_lamb) {
    tk_err e = {0};
    tk_instance *I = make(NULL, 0, NULL, &e);
    if (!I) return;
    // BERT's names for the optimizer keys, valued from a parsed LAMB section (MLPerf's) by the engine
    json_t *lamb = json_loads("{\"name\": \"lamb\", \"base_lr\": 0.00035, \"beta1\": 0.9, \"beta2\": 0.999, \"eps\": 1e-06, "
                              "\"weight_decay\": 0.01, \"lr_schedule\": \"warmup_poly\", \"warmup_steps\": 0, "
                              "\"start_warmup_step\": 0, \"total_steps\": 7100, \"poly_power\": 1.0}",
                              0, NULL);
    CHECK(tk_opt_config_parse(lamb, "lamb.json", "optimizer", 0, &I->run.opt, &e) == 0);
    json_decref(lamb);
    char path[64];
    snprintf(path, sizeof path, "/tmp/tk_bert_mllog_%d", (int)getpid());
    unlink(path);
    tk_mllog L;
    CHECK(tk_mllog_open(&L, path, 0, &e) == 0);
    L.fixed_time_ms = 1;
    CHECK(tk_optimizer_mllog(&L, &I->run, I->wl->opt_mllog, &e) == 0);
    CHECK(I->wl->mllog_hparams(I->model, &I->run, &L, &e) == 0);
    CHECK(I->wl->mllog_weights(I->model, &L, &e) == 0);
    tk_mllog_close(&L);
    FILE *f = fopen(path, "r");
    char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    const char *want[] = {"\"key\": \"opt_base_learning_rate\", \"value\": 0.00035,",
                          "\"key\": \"opt_lamb_beta_1\", \"value\": 0.9,",
                          "\"key\": \"opt_lamb_beta_2\", \"value\": 0.999,",
                          "\"key\": \"opt_epsilon\", \"value\": 1e-06,",
                          "\"key\": \"opt_lamb_weight_decay_rate\", \"value\": 0.01,",
                          "\"key\": \"opt_learning_rate_training_steps\", \"value\": 7100,",
                          "\"key\": \"num_warmup_steps\", \"value\": 0,",
                          "\"key\": \"start_warmup_step\", \"value\": 0,",
                          "\"key\": \"max_predictions_per_seq\", \"value\": 3,",
                          "\"tensor\": \"bert/encoder/layer_1/output/LayerNorm/beta\"",
                          "\"tensor\": \"cls/seq_relationship/output_bias\""};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        if (!strstr(buf, want[k])) {
            printf("#   missing %s in %.300s\n", want[k], buf);
            CHECK(0);
        }
    int inits = 0;
    for (char *p = buf; (p = strstr(p, "weights_initialization")); p++) inits++;
    CHECK_EQ_INT(inits, 5 + 16 * 2 + 9); // the tensors closed_bert.yaml names for 2 layers
    unlink(path);
    destroy(I);
}

// The MLPerf configuration's evaluation cadence: floor(0.05 (230.23 GBS + 3,000,000) / 25,000) x 25,000
// samples, as NVIDIA's v1.1 BERT computes it.
TK_TEST(mlperf_config_numbers) {
    const char *root = getenv("TK_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/share/workloads/bert/config.json", root ? root : ".");
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    CHECK(c != NULL);
    if (!c) return;
    json_int_t gbs = json_integer_value(json_object_get(json_object_get(c, "train"), "global_batch_size"));
    json_int_t every = json_integer_value(json_object_get(json_object_get(c, "train"), "eval_every_samples"));
    CHECK_EQ_INT(every, (json_int_t)(0.05 * (230.23 * (double)gbs + 3000000.0) / 25000.0) * 25000);
    json_t *m = json_object_get(c, "model");
    CHECK_EQ_INT(json_integer_value(json_object_get(m, "hidden_size")), 1024);
    CHECK_EQ_INT(json_integer_value(json_object_get(m, "num_layers")), 24);
    CHECK_EQ_INT(json_integer_value(json_object_get(m, "vocab_size")), 30522);
    CHECK(json_real_value(json_object_get(json_object_get(c, "target"), "mlm_accuracy")) == 0.72);
    json_decref(c);
}

// The unpadded batch's rank order (data.c): a permutation whose halves and quarters carry nearly
// the same tokens. By hand: lengths 1 2 3 4 sort to positions 3 2 1 0, dealt A B B A: halves
// {3, 0} and {2, 1} (5 tokens each), each already in its order.
TK_TEST(balanced_rank_order) {
    tk_err e = {0};
    int order[64], tmp[64];
    const int32_t four[4] = {1, 2, 3, 4};
    CHECK_EQ_INT(tk_bert_balance_order(four, 4, order, tmp, &e), 0);
    const int want[4] = {3, 0, 2, 1};
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(order[i], want[i]);
    // random batches of 64 with MLPerf-like lengths (a quarter 512, the rest 20-511): every
    // rank slice of 2 and 4 ranks within max - min of its share, and on average far closer than
    // the data's order
    uint64_t x = 88172645463325252ull;
    double gap_data = 0, gap_bal = 0;
    for (int t = 0; t < 200; t++) {
        int32_t len[64];
        int lo = 512, hi = 0;
        for (int i = 0; i < 64; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            len[i] = x % 4 == 0 ? 512 : 20 + (int32_t)((x >> 8) % 492);
            lo = len[i] < lo ? len[i] : lo, hi = len[i] > hi ? len[i] : hi;
        }
        CHECK_EQ_INT(tk_bert_balance_order(len, 64, order, tmp, &e), 0);
        int seen[64] = {0};
        for (int i = 0; i < 64; i++) seen[order[i]]++;
        for (int i = 0; i < 64; i++) CHECK_EQ_INT(seen[i], 1);
        for (int W = 2; W <= 4; W *= 2) {
            long total = 0, part[4] = {0}, data[4] = {0};
            for (int i = 0; i < 64; i++) part[i / (64 / W)] += len[order[i]], data[i / (64 / W)] += len[i], total += len[i];
            for (int r = 0; r < W; r++) {
                CHECK(labs(part[r] * W - total) <= (long)(hi - lo) * W);
                if (W == 2) gap_bal += labs(part[r] - part[1 - r]), gap_data += labs(data[r] - data[1 - r]);
            }
        }
    }
    printf("#   mean |half - half| tokens: data order %.0f, balanced %.0f\n", gap_data / 400, gap_bal / 400);
    CHECK(gap_bal * 10 < gap_data);
}
