// 3D U-Net (MLPerf Training v1.x image segmentation, KiTS19): the types shared by the files of
// lib/workloads/unet3d/ and the functions each file gives the others. The engine knows the model
// only through tk_workload_unet3d (workload.c).
//
// The model (the MLPerf reference, mlcommons/training retired_benchmarks/unet3d; its PyTorch
// peer is contrib/peers/unet3d.py, which documents the layers and the init): width W gives the
// filters W, 2W, 4W, 8W, 10W (W = 32 is the reference's 31,190,243 parameters):
//   input block: 2 conv blocks 1 -> W -> W
//   downsample i = 0..3: a conv block of stride 2 (filters[i] -> filters[i+1]), a conv block
//   bottleneck: the same, 10W -> 10W, stride 2
//   upsample j = 0..4: ConvTranspose3d 2x2x2 stride 2 with bias, concatenated with the skip
//     (the upsampled channels first), 2 conv blocks
//   output: Conv3d 1x1x1 with bias to 3 classes (logits)
//   conv block: Conv3d 3x3x3 padding 1 without bias, InstanceNorm3d (affine, eps 1e-5), ReLU
// Loss: Dice (softmax, classes 1 and 2, the reference's smoothing) + cross-entropy
// (kernels/dice_ce.h). Layouts: activations channels last (N, D, H, W, C); convolution weights
// K, T, R, S, C (kernels/conv3d.h, the peer's "ktrsc" layout); a transposed convolution's weight as
// its shape says (kernels/conv3d.h tk_conv3d_shape_transposed). fp32 on the cpu backend (the
// reference); bf16 activations and compute copies on cuda (fp32 master weights and gradients).
// Tensors are views into the engine's flat buffers, named as the reference's state dict
// ("input_block.conv1.conv.weight", ...: unet3d.py --names).
//
// Files and owners: model.c and step.c (the network: create, init, the training step, the eval
// forward), data.c (the training reader and the eval cases), config.c, eval.c, workload.c (the
// table, MLLOG keys).
#ifndef TK_WORKLOADS_UNET3D_UNET3D_H
#define TK_WORKLOADS_UNET3D_UNET3D_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "engine/config.h"
#include "engine/dist.h"
#include "engine/workload.h"
#include "gpu/gpu.h"

#define U3_CLASSES 3

// ---- the "data" section (data.c parses it: u3_data_cfg_parse) ----
// The reference's training transforms (pytorch_loader.py), per sample, in this order: a random
// crop of crop[] voxels, foreground-oversampled (with probability `oversampling` around the box
// of one of the two largest connected components of a random foreground class, else uniform),
// random flips of each spatial axis (probability 1/3 each), a brightness scaling (probability
// brightness_prob, by 1 + U(1 - f, 1 + f): the reference's `image * (1 + factor)`), Gaussian
// noise (probability noise_prob, std U(0, noise_std)); data.c gives the details. Each draw from
// Philox keyed by (seed, epoch, sample): the batch of a step is the same whatever the loader
// threads or the ranks.
typedef struct u3_data_cfg {
    int crop[3];                 // D, H, W of a training sample (data.crop; 128^3 the reference)
    double oversampling;         // data.oversampling (0.4)
    int flip;                    // data.flip (1): the random flips
    double brightness_prob, brightness_factor; // data.brightness.{prob, factor} (0.1, 0.3)
    double noise_prob, noise_std;              // data.noise.{prob, std} (0.1, 0.1)
    int shuffle;                 // data.shuffle (1): the cases in a new order each epoch
} u3_data_cfg;

// ---- the configuration (config.c) ----
typedef struct u3_config {
    int width;                   // model.width (32)
    int bf16;                    // model.precision bf16 (cuda), else fp32
    int64_t batch;               // the global batch (train.global_batch_size)
    int b;                       // this rank's (config.c: batch / world, the engine's check)
    uint64_t seed;               // train.seed
    u3_data_cfg data;
    double eval_overlap;         // eval.overlap (0.5)
    int eval_batch;              // eval.batch: windows per forward (the model's b when 0)
    tk_dist *dist;               // the ranks and the model's tensors (u3_config_ranks from the
    const tk_params *params;     // engine's tk_wl_env, before u3_create; NULL until then)
} u3_config;

// ---- data.c: the training reader and the eval cases ----
// The "data" section (data: root's member "data", NULL when absent) into *dc (defaults above for
// what it leaves out; unknown keys and bad values TK_EDATA naming path and $.data.KEY, as every
// config error).
int u3_data_cfg_parse(json_t *data, const char *path, u3_data_cfg *dc, tk_err *e);
// The table's reader (cfg: the u3_config): the training cases of the .tks files of prep kits19
// (kits19.h: slabs of whole D-slices, a case its records in order), read once into host memory
// shared by every reader of the process; reader_count: the cases; read_batch: this rank's b
// samples of global batch `step` (the global batch's samples b * rank .. b * rank + b - 1, b =
// cfg->batch / world: u3_data_open computes it, cfg->b unused) into
// fields[0] (f32 image, b x crop D x H x W x 1) and fields[1] (u8 label, b x D x H x W).
int u3_data_open(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e);
void u3_data_close(void *rd);
uint64_t u3_data_count(void *rd);
int u3_data_batch(void *rd, int64_t step, int64_t steps_per_epoch, void *const *fields, tk_err *e);

// Whole cases for the evaluation, in host memory: the cases of the files with case index
// i % world == rank (every case when world is 1), in the files' order.
typedef struct u3_case {
    int id;                      // case_00123: 123
    int64_t shape[3];            // D, H, W
    float *image;                // D * H * W
    uint8_t *label;
} u3_case;
typedef struct u3_cases {
    int n;
    int total;                   // the cases over all ranks
    u3_case *c;
} u3_cases;
int u3_cases_load(char *const *paths, int npaths, int rank, int world, u3_cases *out, tk_err *e);
void u3_cases_free(u3_cases *cs);

// ---- model.c, step.c: the network ----
typedef struct u3_model u3_model;
// The table's create / destroy / init_weights (the reference's init, from seed).
int u3_create(const void *cfg, const tk_wl_env *env, void **model, tk_err *e);
void u3_destroy(void *model);
int u3_init_weights(void *model, uint64_t seed, tk_err *e);
// The table's weights_loaded: after the engine loaded the master weights (a checkpoint, a resume),
// the bf16 compute copies rewritten from them.
int u3_weights_loaded(void *model, tk_err *e);
// The table's batch: field 0 the image (f32, b x crop x 1; the step's first op
// casts it to the activation type), field 1 the label (u8, b x crop).
int u3_batch(const void *model, tk_wl_field *f);
// The table's step: forward, Dice+CE, backward of the input batch (dense gradients, loss_acc).
int u3_train_step(void *model, tk_err *e);
// The evaluation forward: B (<= the model's b) windows x (f32, B x crop x 1, the backend's memory)
// into logits y (the model's activation type, B x crop x U3_CLASSES, channels last; ld =
// U3_CLASSES). No gradients, nothing saved; may be captured in a CUDA graph.
int u3_forward_eval(void *model, const float *x, int B, void *y, tk_err *e);
// The model's activation type (TK_F32 / TK_BF16), its config and context.
tk_dtype u3_act_type(const void *model);
const u3_config *u3_model_config(const void *model);
tk_ctx *u3_model_ctx(const void *model);
// The table's dump_describe: "batch.image" F32 (b, D, H, W, 1), "batch.label" U8 (b, D, H, W, 1),
// as contrib/peers/unet3d.py --compare reads them in the ktrsc layout.
int u3_dump_describe(void *model, tk_wl_dump *d, tk_err *e);
// The MLLOG weights_initialization name of dense tensor i (closed_unet3d's 50 names), or NULL.
const char *u3_mlperf_name(const void *model, int i);

// ---- config.c, eval.c ----
int u3_config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **cfg,
                    tk_err *e);
void u3_config_free(void *cfg);
extern const char *const u3_precisions[];
extern const char *const u3_sections[]; // the table's extra sections: "eval"
// The ranks of the model about to be created (workload.c's create calls it before u3_create):
// cfg->b = this rank's share of the global batch (tk_per_rank_batch, the engine's check: TK_EUSAGE
// unless the world divides it), cfg->dist and cfg->params from env. u3_config_parse leaves b the
// global batch.
int u3_config_ranks(u3_config *cfg, const tk_wl_env *env, tk_err *e);
// The table's eval set: the eval cases (u3_cases_load) in the backend's memory; evaluate: the
// sliding-window mean Dice of kidney and tumor over every case (kernels/swin.h, dice_score.h),
// collective on several ranks.
int u3_evalset_load(void *model, char *const *paths, int npaths, void **es, tk_err *e);
// The same from cases already in host memory (this rank's, cases->total over all ranks): *cases
// is taken (emptied), whatever the result.
int u3_evalset_from_cases(void *model, u3_cases *cases, void **es, tk_err *e);
int64_t u3_evalset_count(const void *es);
void u3_evalset_free(void *model, void *es);
int u3_evaluate(void *model, void *es, double *dice, tk_err *e);

#endif
