// ResNet-50 v1.5 (MLPerf Training v1.x image classification): the types shared by the files of
// lib/workloads/resnet/ and the functions each file gives the others. The engine knows the model
// only through tk_workload_resnet (workload.c).
//
// The model (He et al. 2016; torchvision's resnet50, the MLPerf reference's "v1.5"):
//   stem: 7x7/2 conv (width ch) -> BN -> ReLU -> 3x3/2 max pool
//   stages s = 0..3 of layers[s] bottleneck blocks, planes = width 2^s, out = planes * expansion:
//     1x1 conv -> BN -> ReLU -> 3x3 conv (stride 2 in the first block of stages 1..3: v1.5 puts
//     the stride here, v1 in the 1x1) -> BN -> ReLU -> 1x1 conv -> BN, plus the shortcut (the
//     input, or 1x1/stride conv -> BN in each stage's first block) -> ReLU
//   global average pool -> fully connected (classes) -> softmax cross-entropy, label smoothing
// layers [3, 4, 6, 3], width 64, expansion 4, 1000 classes is ResNet-50 (25,557,032 parameters,
// as torchvision's); a smaller width and depth is the same network for the CPU.
//
// Layouts: activations NHWC (channels last, as cuDNN's fast kernels and NVIDIA's MLPerf runs), conv
// weights KRSC (torchvision's KCRS with C last; --init-checkpoint converts), the FC weight
// (classes, features) as torchvision's. fp32 on the cpu backend (the reference); on cuda fp32 or
// bf16 activations with the engine's bf16 weight copy (fp32 master weights and gradients).
// Parameters are views into the engine's flat buffers (dense: conv and FC weights, FC bias, BN
// gamma and beta; then BN's running statistics, checkpointed but not trained), named as
// torchvision's state dict ("layer1.0.conv1.weight", "bn1.running_mean").
#ifndef TK_WORKLOADS_RESNET_RESNET_H
#define TK_WORKLOADS_RESNET_RESNET_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "blocks/blocks.h"
#include "blocks/stem.h"
#include "core/err.h"
#include "core/mllog.h"
#include "engine/config.h"
#include "engine/workload.h"
#include "gpu/gpu.h"

// The precisions it supports (its table's, model.precision: engine/cfg.h tk_cfg_precision).
extern const char *const rn_precisions[];

#define RN_MAX_STAGES 4
#define RN_MAX_BLOCKS 64
#define RN_NBUF 5 // backward scratch buffers (a block's backward holds at most 4 at once)

enum { RN_INIT_TORCHVISION = 0, RN_INIT_MLPERF = 1 };

struct rn_dataset;

// What the loader threads' readers share (config.c makes it): the training set is read into
// memory once for all of them.
typedef struct rn_shared {
    pthread_mutex_t mu;
    struct rn_dataset *train;    // the cached training set, and the files it came from
    char **paths;
    int npaths;
    // the GPU decoder's time in the training readers (tk_img_nvjpeg_stats), added up as they close
    uint64_t dec_batches, dec_images, dec_pinned_allocs, dec_pinned_frees;
    double dec_parse_s, dec_submit_s, dec_wait_s, dec_decode_gpu_s, dec_resize_gpu_s;
} rn_shared;

typedef struct rn_config {
    // "model"
    int nstages, layers[RN_MAX_STAGES];
    int width, expansion, classes, image_size;
    int bf16;                    // "precision": "bf16" (cuda only)
    double label_smoothing, bn_eps, bn_momentum;
    int init, zero_init_residual;
    int stem;                    // "stem": a tk_blk_stem_form (lib/blocks/stem.h: auto = s2d on cuda
                                 // where cuDNN plans it, else direct; s2d; direct)
    // "data"
    int eval_resize;             // JPEG eval: shorter side resized to this, then center crop
    double scale_min, scale_max, ratio_min, ratio_max;
    int flip;
    float mean[3], std[3];       // (pixel - mean) / std, pixels in 0..255
    char decoder[16];            // the image decoder (lib/image): "cpu"
    // from the engine's sections
    int64_t batch;               // global
    uint64_t seed;
    rn_shared *sh;
} rn_config;

// A bottleneck block of three units (lib/blocks: convolution, BN, ReLU; the third's ReLU after
// the residual add, in its BN's pass) and, in each stage's first, the projection shortcut ud.
typedef struct rn_block {
    int stage, unit, down;
    tk_blk_unit u1, u2, u3, ud;  // u3.mask: out > 0 as bits (kernels/bn.h tk_bn_fwd_train_mask) for
                                 // its BN's backward, where the backend writes them; else NULL (u3.z read)
    const void *in;              // its input: the stem's pooled output or the previous block's u3.z
} rn_block;

typedef struct rn_model {
    rn_config cfg;
    tk_ctx *c;
    tk_params *P;
    tk_dist *dist;
    struct tk_cudnn *dnn;        // cuda only
    tk_dtype t;                  // activations: TK_F32 or TK_BF16
    int b;                       // per-rank batch
    int S;                       // image size
    tk_blk_stem stem;            // the stem's form (lib/blocks/stem.h: s2d or direct, its input
                                 // channels cin, the own forward kernel), its input x and compute
                                 // weight wp; its unit is u0
    tk_blk_env env;              // the blocks' (c, dnn, t as above; the BN and weight-gradient scratch)
    float *lr;
    int64_t *step;
    double *loss_acc;
    // stem: its unit (the ReLU's output u0.z written only where the pool does not apply the BN
    // itself), the max pool
    tk_blk_unit u0;
    void *pool;                  // the max pool's output
    uint8_t *pool_idx;
    tk_blk_pool mp;
    int H0;                      // after the conv
    int nblk;
    rn_block blk[RN_MAX_BLOCKS];
    // head
    int Cf;
    int pfw, pfb;
    float *fcw, *fcb, *dfcw, *dfcb;
    void *feat, *dfeat, *dlogits;
    float *logits;
    // buffers (in the engine's activation arena, tk_wl_env.acts)
    uint8_t *in_img;             // (b, S, S, 3) u8: the batch's images (normalized on the device)
    int32_t *in_label;           // (b)
    void *g[RN_NBUF];            // backward scratch, each the largest activation
    void *xent_ws;
    int64_t *top1;               // device counter
    tk_cast_span casts[4 * RN_MAX_BLOCKS]; // each convolution's dwt into its dw (grads)
    int ncasts;
    tk_blk_grads grads;          // the engine's grads_ready (several ranks): each block's gradients
                                 // reported (their casts first) as its backward completes them
} rn_model;

// The functions the table (workload.c) names have its members' exact types (void * for the
// rn_model, rn_config, rn_reader and rn_evalset they are given): DESIGN.md section 3a.

// ---- config.c ----
extern const char *const rn_sections[];
int rn_config_parse(json_t *root, const char *path, const tk_run_cfg *run, rn_config *cfg, tk_err *e);
void rn_config_release(rn_config *cfg);
// The table's config and config_free: an rn_config parsed into *cfg (malloc'ed), and its release.
int rn_config_new(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **cfg,
                  tk_err *e);
void rn_config_free(void *cfg);

// ---- model.c ----
// cfg: an rn_config; *model: the rn_model.
int rn_create(const void *cfg, const tk_wl_env *env, void **model, tk_err *e);
void rn_destroy(void *model);
int rn_init_weights(void *model, uint64_t seed, tk_err *e);
// After the master weights changed outside the optimizer: the compute copies.
int rn_weights_loaded(void *model, tk_err *e);
// The stem's compute weight (lib/blocks/stem.h): after every update (the table's after_update: the optimizer wrote the fp32
// stem weight and the engine's bf16 copy).
int rn_refresh_stem(void *model, tk_err *e);
// The torchvision name of tensor i's MLPerf (MXNet) name, for weights_initialization; NULL for
// the running statistics.
const char *rn_mlperf_name(const rn_model *m, int pidx, char *buf, size_t n);

// ---- step.c ----
// Forward of img (b, S, S, 3) u8 (normalized into stem.x first): training (batch statistics, running
// update) or eval.
int rn_forward(rn_model *m, const uint8_t *img, int train, tk_err *e);
// The forward's first op alone: img (b, S, S, 3) u8 normalized into stem.x in the stem's layout.
int rn_stem_input(rn_model *m, const uint8_t *img, tk_err *e);
// Convolution cv's forward of x into y as the step runs it (train: with its BN's statistics into
// cv->sums where the plan fuses them; the stem's as lib/blocks/stem.h runs it).
int rn_conv_fwd(rn_model *m, const tk_blk_conv *cv, const void *x, void *y, int train, tk_err *e);
// The loss of labels on the last training forward, and the backward: dense gradients written.
int rn_backward(rn_model *m, const int32_t *label, tk_err *e);
int rn_train_step(void *model, tk_err *e); // both on the input buffers

// ---- data.c ----
typedef struct rn_reader rn_reader;
// rank of world: the reader decodes this rank's share of each global batch. cfg: an rn_config;
// *rd: the rn_reader.
int rn_reader_open(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e);
void rn_reader_close(void *rd);
uint64_t rn_reader_count(void *rd);
// The engine's device batches (workload.h reader_device): JPEG records with a decoder that writes
// device memory (nvjpeg) decode their images (field 0) into memory of CUDA device `device` from
// now on: returns 1 << 0; else 0 (host bytes, as before). Before the first batch only.
unsigned rn_reader_device(void *rd, int device);
// Batch `step` of the run (this rank's share of the global batch) into fields[0], the images
// ((b, S, S, 3) u8: the model normalizes on the device), and fields[1], the labels ((b) i32).
int rn_reader_batch(void *rd, int64_t step, int64_t spe, void *const *fields, tk_err *e);
void rn_shared_free(rn_shared *sh);
// The eval set in paths: *n_all records, of which this rank's [lo, hi) decoded for evaluation
// (resize + center crop, u8) into *img (malloc'ed, hi - lo images) and *label.
int rn_decode_eval(const rn_config *cfg, char *const *paths, int npaths, int64_t *n_all, int64_t rank, int64_t world,
                   uint8_t **img, int32_t **label, int64_t *lo, int64_t *hi, tk_err *e);

// ---- eval.c ----
typedef struct rn_evalset {
    int64_t n;                   // images in the whole set
    int64_t lo, hi;              // this rank's
    int64_t nb;                  // this rank's batches (the last padded with label -1)
    uint8_t *img;                // nb * b images (u8) in the backend's memory
    int32_t *label;
} rn_evalset;
// model: the rn_model; *es, es: an rn_evalset.
int rn_evalset_load(void *model, char *const *paths, int npaths, void **es, tk_err *e);
int64_t rn_evalset_count(const void *es);
void rn_evalset_free(void *model, void *es);
int rn_evaluate(void *model, void *es, double *top1, tk_err *e);

// ---- ckpt.c ----
int rn_import_torchvision(void *model, const char *path, tk_err *e);
// The table's dump_describe (lib/engine/workload.h): "batch.image" F32 (b, S, S, 3), the images as
// the step's first op normalizes them (widened from bf16), "after.NAME" (the running statistics
// after the step), the layout and configuration in the metadata. The step is rn_train_step.
int rn_dump_describe(void *model, tk_wl_dump *d, tk_err *e);

// (ResNet's ops, their dispatchers included, are kernels/{conv,bn,pool,xent_smooth,img_norm,stem_s2d,stem_conv};
// its convolution + BN (+ ReLU) units, their fusions and the max pool run through lib/blocks.)

#endif
