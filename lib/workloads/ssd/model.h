// SSD300-ResNet34, the v1.x MLPerf reference's network (mlcommons/training single_stage_detector/ssd
// before v2.0: ssd300.py SSD300, base_model.py ResNet34), forward and backward on lib/blocks.
//
// The network (channels as the reference at width 64; the layers scale with width, which only
// the tests change):
// - The trunk: torchvision's resnet34 up to its layer3 (conv4_x): conv1 7x7/2 + bn1 + ReLU, max
//   pool 3x3/2, layer1 (3 basic blocks of 64), layer2 (4 of 128, the first stride 2 with a 1x1
//   projection), layer3 (6 of 256) with its first block's conv1 and downsample at stride 1 (the
//   reference's _ModifyBlock: 38x38 at 300x300 input). BatchNorm in training mode, as the
//   reference trains it (its train.py freezes nothing), eps 1e-5, momentum 0.1 (PyTorch's).
// - The additional layers (_build_additional_features at out_size 38): five blocks, each
//   Conv2d 1x1 (bias) + ReLU + Conv2d 3x3 (bias) + ReLU: channels 256->256->512, 512->256->512,
//   512->128->256 (3x3 stride 2 padding 1), 256->128->256, 256->128->256 (3x3, stride 1, no
//   padding): the maps 38, 19, 10, 5, 3, 1. No BatchNorm there (the reference has none).
// - The heads: per map k a 3x3 padding-1 Conv2d (bias) to nd_k 4 box offsets (loc.k) and one to
//   nd_k classes scores (conf.k), nd = [4, 6, 6, 6, 4, 4]; outputs as bbox_view makes them:
//   loc (N, 4, B), conf (N, classes, B), B = sum nd_k H_k W_k (8732 at 300x300), each map's
//   PyTorch (N, nd A, H, W) output viewed as (N, A, nd H W), concatenated in map order
//   (kernels/ssd_head.h has the element mapping; ssd_config.box_major writes the same numbers
//   transposed, (N, B, 4) and (N, B, classes), as the loss reads them). The model runs a map's
//   loc and conf as ONE convolution of nd (4 + classes) filters: conf.k's tensors are declared
//   packed right after loc.k's (TK_PARAM_PACKED), so their weights and biases are one array
//   each. On cuda the filters are padded with zero ones to a multiple of 8 (340 and 510 at 81
//   classes: cuDNN's NHWC engines want it; ssd_conv_b.wp), their gradients dropped.
//
// Tensors: the reference's state-dict names (SSD300's, so that its checkpoints map 1:1):
// model.layer1.0.weight (conv1), model.layer1.1.* (bn1), model.layer1.4.I.* (torchvision's
// layer1), model.layer1.5.I.* (layer2), model.layer2.0.I.* (layer3), additional_blocks.K.0.* and
// .2.*, loc.K.*, conf.K.*; conv weights (K, R, S, C) (channels last: PyTorch's (K, C, R, S)
// transposed). Running statistics after the dense tensors. The reference's num_batches_tracked
// buffers are not kept (BatchNorm's momentum is set: they change nothing).
//
// Init (ssd_init_weights): the trunk as torchvision's resnet34() (kaiming_normal_ fan_out ReLU:
// N(0, 2 / (K R S)); BN 1, 0), which an --init-checkpoint of torchvision's pretrained weights
// replaces (ssd_import_torchvision, as the reference loads resnet34-333f7ec4.pth); the additional
// layers' and heads' weights xavier_uniform_ (the reference's _init_weights: U(-a, a), a =
// sqrt(6 / (fan_in + fan_out)), fan = C R S, K R S), their biases PyTorch's Conv2d default
// U(-1/sqrt(C R S), 1/sqrt(C R S)) (_init_weights leaves tensors of one dimension alone).
//
// The stem (conv1 7x7/2 on the normalized images) runs as lib/blocks/stem.h makes it run (shared
// with ResNet-50): on cuda by default as the 4x4 convolution over a space-to-depth copy of the
// input (kernels/stem_s2d.h; the same 147 products an output, summed in another order), else the
// 7x7 one over the images zero-padded to 4 channels; ssd_config.stem (model.stem) picks. Its
// master weight stays the reference's 7x7 (model.layer1.0.weight (64, 7, 7, 3) here, torchvision's
// conv1.weight on import): the compute weight is derived from it each forward.
//
// Precision: fp32 on either backend; bf16 activations and compute copies on cuda (NHWC, fp32
// master weights and gradients, BN statistics fp32), the outputs loc and conf fp32 either way.
//
// NVIDIA's v1.0/v1.1 submissions (MXNet, mlcommons/training_results_v1.x NVIDIA/benchmarks/ssd)
// keep the semantics: their additional layers are the same (use_bn forced off "MLPerf", 3x3
// strides 2, 2, 2, 1, 1, paddings 1, 1, 1, 0, 0, biases, ReLU); they change the execution: NHWC,
// fp16 (bf16 here), BN fused with its ReLU and residual add (the blocks' fusions here), BN
// statistics over groups of GPUs (bn_group: not here; one rank's batch), running statistics
// all-reduced before each evaluation. Nothing there is frozen: the trunk's BN trains.
#ifndef TK_WORKLOADS_SSD_MODEL_H
#define TK_WORKLOADS_SSD_MODEL_H

#include "blocks/blocks.h"
#include "blocks/stem.h"
#include "engine/params.h"
#include "engine/workload.h"

#define SSD_MAPS 6
#define SSD_EXTRA 5               // additional blocks
#define SSD_BLOCKS 13             // the trunk's basic blocks: 3 + 4 + 6
#define SSD_NBUF 6                // backward scratch buffers
#define SSD_MAX_CONVS 64

typedef struct ssd_config {
    int b;                        // samples a forward
    int size;                     // input side (300)
    int classes;                  // label_num, background included (81 for COCO)
    int width;                    // the trunk's first width (64: the reference; tests use less)
    int bf16;                     // cuda: bf16 activations
    int head_align;               // the heads' filters padded to a multiple of it (0: 8 on cuda,
                                  // 1 on the cpu; the tests pad on the cpu too)
    int box_major;                // loc, conf (and dloc, dconf) box-major, (b, B, 4) and (b, B,
                                  // classes): the loss's and the NMS's layout (the workload's);
                                  // 0: the reference's (b, 4, B), (b, classes, B)
    double bn_eps, bn_momentum;   // 1e-5, 0.1
    int stem;                     // a tk_blk_stem_form (lib/blocks/stem.h): auto (0: s2d on cuda
                                  // where cuDNN plans it, else direct), s2d (the cpu: the same
                                  // computation's references), direct
} ssd_config;

typedef struct ssd_block {        // a torchvision BasicBlock
    tk_blk_unit u1, u2, ud;       // conv1 + bn1 + ReLU; conv2 + bn2 (+ shortcut) + ReLU; downsample
    int down;
    const void *in;
} ssd_block;

typedef struct ssd_conv_b {       // a convolution with a bias (the additional layers, the heads)
    tk_blk_conv c;
    float *b, *db;                // (K) fp32
    int pb;
    void *y;                      // its output (rows, K) in t, the bias (and ReLU) applied in place
    // cuda, a head: its filters padded to a multiple of 8 (c.s.K; c.kw the real count) for cuDNN's
    // NHWC kernels: the compute weight wp (zero filters after the real ones, refreshed from the
    // master weight each forward), the bias bp and its gradient dbp (c.s.K fp32); else NULL
    void *wp;
    float *bp, *dbp;
} ssd_conv_b;

typedef struct ssd_model {
    ssd_config cfg;
    tk_ctx *c;
    tk_params *P;
    struct tk_cudnn *dnn;         // cuda only
    tk_dtype t;
    int b, S;
    tk_blk_env env;
    tk_blk_unit u0;               // the stem's unit (conv1, bn1, ReLU)
    tk_blk_stem stem;             // its form, input x (the images in its layout, in t) and compute
                                  // weight wp (lib/blocks/stem.h)
    tk_blk_pool mp;
    ssd_block blk[SSD_BLOCKS];
    ssd_conv_b xa[SSD_EXTRA], xb[SSD_EXTRA]; // each additional block's 1x1 and 3x3
    ssd_conv_b head[SSD_MAPS];    // loc.k and conf.k as one convolution
    int pconf[SSD_MAPS];          // conf.k.weight's tensor (loc.k.weight: head[k].c.pidx)
    int chan[SSD_MAPS], mid[SSD_EXTRA], nd[SSD_MAPS];
    int side[SSD_MAPS];           // the maps' sides
    int64_t boxes;                // B: default boxes an image
    const void *feat[SSD_MAPS];   // the maps: blk[12].u2.z, then xb[k].y
    // buffers (one arena)
    float *in_img;                // (b, S, S, 3) fp32: the normalized images, channels last
    void *pool;
    uint8_t *pool_idx;
    float *loc, *conf;            // (b, 4, B), (b, classes, B) fp32 (box_major: (b, B, 4), (b, B, classes))
    float *dloc, *dconf;          // their gradients, the backward's input (the loss's)
    void *g[SSD_NBUF];            // backward scratch, each the largest activation
    void *bias_ws;
    tk_cast_span casts[SSD_MAX_CONVS];
    int ncasts;
    tk_blk_grads grads;
} ssd_model;

// The reference's configuration: 300x300, 81 classes, width 64, fp32, batch b.
ssd_config ssd_config_default(int b);
// The model on env (its params, its arena: tk_wl_env as a workload table's create gets it). The
// input must make all six maps (size >= 257 at any width: TK_EUSAGE below).
int ssd_create(const ssd_config *cfg, const tk_wl_env *env, ssd_model **out, tk_err *e);
void ssd_destroy(ssd_model *m);
// The reference's initialization (above) from seed; running statistics mean 0, variance 1.
int ssd_init_weights(ssd_model *m, uint64_t seed, tk_err *e);
// After the master weights changed outside the optimizer (a load): the compute copies.
int ssd_weights_loaded(ssd_model *m, tk_err *e);
// loc, conf from in_img; train: BatchNorm's batch statistics (and running update), else the
// running statistics.
int ssd_forward(ssd_model *m, int train, tk_err *e);
// The backward of the last training forward from dloc, dconf: every dense gradient overwritten
// (and the heads' outputs head[k].y: their gradients go there).
int ssd_backward(ssd_model *m, tk_err *e);
// Elements of the trainable tensors (19,972,534 for the reference at 81 classes).
int64_t ssd_param_count(const ssd_model *m);
// torchvision's resnet34 state dict as safetensors (contrib/tools/tv2st.py; conv weights (K, C,
// R, S)) into the trunk: conv1.* -> model.layer1.0.*, bn1.* -> model.layer1.1.*, layer1.* ->
// model.layer1.4.*, layer2.* -> model.layer1.5.*, layer3.* -> model.layer2.0.*; layer4 and fc
// ignored. A file with the SSD's own names (model.layer1.0.weight, ..., loc.0.weight: the
// reference's state dict, same layouts) loads too, every tensor it has; a trainkit checkpoint
// (format trainkit-checkpoint-1: our layouts) loads as the engine loads one, every tensor of the
// model required. A tensor of the wrong type or shape is TK_EDATA naming the file and the
// tensor; none matching, TK_EDATA.
int ssd_import_torchvision(ssd_model *m, const char *path, tk_err *e);

#endif
