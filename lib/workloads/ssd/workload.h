// SSD300-ResNet34 (MLPerf Training v1.x single-stage detector, COCO) as a workload of the training
// engine: the types its files share (workload.c: config, reader, step, table; eval.c: the COCO
// evaluation). The network is model.h's, the data pipeline data.h's, the box math
// kernels/ssd_box.h's.
//
// The loss's layout. The reference's network writes loc (N, 4, D) and conf (N, C, D) (ssd300.py
// bbox_view); kernels/ssd_box.h's loss and kernels/ssd_nms.h read box-major (N, D, 4) and (N, D, C)
// (the same numbers transposed; the reference permutes too before its decode). The workload's
// network gathers its heads' outputs box-major (ssd_config.box_major, kernels/ssd_head.h) and
// scatters the loss's gradients from that layout: no transposes in the step or the evaluation.
// The default boxes are in the network's order (map, size, row, column: the reference's
// DefaultBoxes order, which its heads' bbox_view follows too).
//
// Ground truth in the batch: the reader compacts each image's boxes (after the augmentation) into
// one list, image n's at rows gt_off[n] .. gt_off[n + 1] - 1 (kernels/ssd_box.h tk_ssd_match's
// form); the rows after gt_off[b] are zero.
#ifndef TK_WORKLOADS_SSD_WORKLOAD_H
#define TK_WORKLOADS_SSD_WORKLOAD_H

#include "engine/config.h"
#include "engine/workload.h"
#include "img_jitter.h"
#include "ssd_box.h"
#include "workloads/ssd/data.h"
#include "workloads/ssd/model.h"

typedef struct ssd_wl_config {
    ssd_config net;              // b: this rank's share once create knows the ranks
    ssd_data_opts data;          // the training pipeline (batch: the global batch, seed: train.seed)
    int64_t batch;               // train.global_batch_size
    uint64_t seed;
    char eval_annotations[1024]; // eval.annotations: the COCO annotation JSON of the eval images
    double nms_iou;              // eval.nms_iou (0.5), eval.score_threshold (0.05), eval.max_output (200)
    double score_thresh;
    int max_output;
} ssd_wl_config;

typedef struct ssd_wl {
    ssd_wl_config cfg;
    tk_wl_env env;
    tk_ctx *c;
    ssd_model *net;
    int b, M, D, C;              // images a step, boxes an image at most, default boxes, classes
    tk_arena ar;                 // the workload's own device buffers (the network's are the engine's)
    float *gt;                   // inputs: (b M, 4) ltrb in [0, 1], compacted
    int32_t *gt_label, *gt_off;  // (b M), (b + 1)
    float *ploc, *pconf;         // the network's outputs (its loc, conf), box-major (b, D, 4), (b, D, C)
    float *dploc, *dpconf;       // the loss's gradients in that layout (the network's dloc, dconf)
    float *gbox;                 // the matching's (b, D, 4) xywh
    int32_t *label;              // (b, D)
    float *dbox_xywh, *dbox_ltrb;// (D, 4) each
    float *loss;                 // the step's loss (1)
    void *match_ws, *loss_ws;
    uint8_t *img_u8;             // data.device_jitter: the batch's resized bytes (b, S, S, 3) and
    tk_img_jitter_job *jobs;     // each image's jitter (b), jittered and normalised into the
    void *jitter_ws;             // network's input by the img_jitter op at the step's start
    float *host_dbox_xywh;       // (D, 4) on the host, for the eval's decoding
} ssd_wl;

// The default-box layout of the network's maps at input side S (side[k] the maps' sides):
// dboxes300_coco at S = 300; at other sides the same sizes and steps scaled by S / 300 (rounded),
// the maps the network's.
void ssd_wl_dbox_cfg(int S, const int side[SSD_MAPS], tk_ssd_dbox_cfg *g);

// ---- eval.c: the table's eval set and evaluate (COCO bbox AP, "map") ----
int ssd_evalset_load(void *model, char *const *paths, int npaths, void **es, tk_err *e);
int64_t ssd_evalset_count(const void *es);
void ssd_evalset_free(void *model, void *es);
int ssd_evaluate(void *model, void *es, double *map, tk_err *e);
// A detection's ltrb in [0, 1] as COCO's x y w h in the image's W x H pixels (tk_ssd_nms_coco_box),
// an infinite value (a decoded width that overflowed) as +-FLT_MAX: pycocotools' outcome for it.
void ssd_eval_coco_box(const float ltrb[4], double W, double H, double xywh[4]);

#endif
