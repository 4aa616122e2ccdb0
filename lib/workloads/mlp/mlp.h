// A small second workload: a multilayer perceptron click-through classifier on the dense features
// of Criteo-format records (prep criteo's .tks: label u8, dense i32[num_dense]; the categorical
// ids are not used), log(x+1) -> Linear+ReLU ... -> Linear -> logit, binary cross-entropy, metric
// the exact ROC AUC. It is not an MLPerf benchmark: it exists to show the training engine with a
// workload that leaves everything shared to it (its optimizer updates every tensor, its gradients
// are all-reduced by the engine, bucketed and overlapped with the backward through grads_ready)
// and with DLRM's data, so CI trains it in seconds. Data parallel over the ranks: every rank reads
// the whole global batch and trains its share of the rows; evaluation runs on every rank alike.
#ifndef TK_WORKLOADS_MLP_H
#define TK_WORKLOADS_MLP_H

#include <stdint.h>

#include "engine/workload.h"

// The precisions it supports (its table's, model.precision: engine/cfg.h tk_cfg_precision).
extern const char *const tk_mlp_precisions[];

#define TK_MLP_MAX_LAYERS 9

typedef struct tk_mlp_config {
    int num_dense;               // dense features a record (13 for Criteo)
    int nhidden, hidden[TK_MLP_MAX_LAYERS - 1]; // hidden widths; a last layer of width 1 follows
    int tf32;                    // model.precision "tf32": the cuda GEMMs on the tensor cores
    int batch;                   // the global batch (train.global_batch_size)
} tk_mlp_config;

typedef struct tk_mlp_layer {
    int in, out, relu;
    float *W, *b, *dW, *db;      // W (out, in) as torch.nn.Linear
    float *x, *y;                // input (rows, in) and output (rows, out) activations
    void *aux;                   // the ReLU mask of y
    size_t woff;                 // W's float offset in the dense span (grads_ready)
} tk_mlp_layer;

typedef struct tk_mlp {
    tk_ctx *c;
    tk_mlp_config cfg;
    tk_wl_env env;               // (its buffers: in the engine's activation arena)
    int nl, b;                   // layers; rows of this rank (batch / world)
    tk_mlp_layer L[TK_MLP_MAX_LAYERS];
    uint8_t *in_label;           // (B) the whole global batch
    int32_t *in_dense;           // (B, num_dense)
    float *x0, *dlogit, *dy[2];  // (b, num_dense), (b), ping-pong (b, max width)
    double *auc;                 // device scalar
} tk_mlp;

// The functions the workload table names have the types of its members (engine/workload.h): the
// configuration is a tk_mlp_config (one block: the table frees it with free), the model a tk_mlp.
int tk_mlp_config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **cfg,
                        tk_err *e);
int tk_mlp_create(const void *cfg, const tk_wl_env *env, void **model, tk_err *e);
void tk_mlp_destroy(void *model);
int tk_mlp_init_weights(void *model, uint64_t seed, tk_err *e);
// The table's batch: "batch.label" u8 (B), "batch.dense" i32 (B, num_dense) (the reader's, in
// workload.c) in the model's device buffers.
int tk_mlp_batch(const void *model, tk_wl_field *f);
// Forward of n <= b rows of dense (device, raw counts) into logits out (n, device).
int tk_mlp_forward(tk_mlp *m, const int32_t *dense, int n, float *out, tk_err *e);
// Forward, loss and backward of this rank's rows of the input batch (capturable).
int tk_mlp_step(void *model, tk_err *e);

#endif
