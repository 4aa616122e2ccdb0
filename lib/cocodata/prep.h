// COCO 2017 (instances_*.json, or the MLPerf SSD reference's bbox_only_instances_*.json, and the
// image folder) -> one .tks record per image for SSD and Mask R-CNN (man/man1/prep.1 "coco",
// man/man5/tks.5). The JPEG bytes are kept as they are in the file (decoded at training time).
//
// Schema: jpeg u8 [-1], image_id i64, height i32, width i32, boxes f32 [-1, 4] (x1, y1, x2, y2 in
// pixels: the reference's (left, top, left + width, top + height), not clamped, not normalized),
// labels i32 [-1] (1..K: the rank of the category id among the file's sorted category ids, as
// the reference numbers its categories; 0 is background), iscrowd u8 [-1], area f32 [-1],
// segm u8 [-1] (one entry per box, in box order, little-endian):
//   u8 0                                   no segmentation (bbox_only files)
//   u8 1, u32 P, P x (u32 C, C x f32)      polygons: P polygons of C coordinates x0 y0 x1 y1 ...
//   u8 2, u32 h, u32 w, u32 M, M x u32     RLE: the counts (compressed strings are decoded)
// Boxes within an image keep the annotations' file order.
#ifndef TK_COCODATA_PREP_H
#define TK_COCODATA_PREP_H

#include <stdint.h>

#include "core/err.h"

typedef struct {
    int eval;                    // keep every image (evaluation); else drop those without a usable box
    void (*progress)(void *ctx, uint64_t done);
    void *progress_ctx;
} coco_prep_opts;

typedef struct {
    uint64_t images;             // listed in $.images
    uint64_t records;            // written
    uint64_t annotations, crowd; // annotations written, of which iscrowd
    uint64_t polygons, rle;      // annotations with polygons / an RLE mask
    uint64_t dropped_no_annotations;  // training: images without any annotation
    uint64_t dropped_empty_boxes;     // training: images whose boxes all have a side <= 1 pixel
    uint64_t jpeg_bytes;
    int categories;
} coco_prep_stats;

// Reads ann_path and the images image_dir/<file_name>, writes out_path (atomically: nothing is
// left on failure). Errors: TK_EDATA for bad annotations (named by JSON path) or images (named by
// file and image id), TK_EIO for files that cannot be read.
int coco_prep(const char *ann_path, const char *image_dir, const char *out_path, const coco_prep_opts *o,
              coco_prep_stats *st, tk_err *e);

#endif
