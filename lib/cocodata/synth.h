// Synthetic COCO 2017 in the real layout (prep(1) "prep synth coco"): DIR/train2017/*.jpg,
// DIR/val2017/*.jpg, DIR/annotations/instances_{train,val}2017.json and DIR/manifest.json, for
// testing the SSD and Mask R-CNN data paths and training end to end without the real set.
//
// Each image (480-640 pixels a side by default) holds 1-8 planted objects of COCO_SYNTH_CLASSES
// classes; a class is a shape (disc, square, triangle, ...) with its own texture and colours, at
// a random place, rotation and scale (small, medium and large COCO areas). Later objects are
// drawn over earlier ones. Every drawn pixel of an object is annotated:
//   - an object nothing covers: its shape polygon, whose rasterization by COCO's rule (maskApi's
//     rleFrPoly, lib/coco/rle.h) is exactly the set of pixels drawn with it;
//   - a partly covered object: the outlines of its visible pixels (along pixel edges, corners at
//     integer coordinates), again rasterizing to exactly its visible pixels;
//   - a crowd (about 3% of the objects: a cluster of small copies of one shape): iscrowd 1 and an
//     uncompressed RLE {"size": [h, w], "counts": [...]}, as COCO's crowd annotations are.
// area = the number of pixels of the annotation's mask, bbox = its [x, y, w, h] as maskApi's
// toBbox computes it. Placements that would hide more than 60% of an earlier object, leave a
// hole in its visible part, or leave fewer than 16 pixels of the new object are drawn again (up to
// 12 tries; then the object is left out), so no drawn object goes unannotated.
// The categories list holds COCO's 80 categories with their real ids and names; the planted
// classes map onto a non-contiguous subset of the ids (coco_synth_class_cat).
#ifndef TK_COCODATA_SYNTH_H
#define TK_COCODATA_SYNTH_H

#include <stdint.h>

#include "core/err.h"

#define COCO_SYNTH_CLASSES 12
#define COCO_SYNTH_MAX_OBJECTS 8
// Image sides (the generator keeps a mask of the image per object and thread: 2048^2 bytes each).
#define COCO_SYNTH_MIN_SIDE 64
#define COCO_SYNTH_MAX_SIDE 2048

typedef struct {
    uint64_t train_images, val_images;
    int min_side, max_side;      // each side uniform in [min_side, max_side] (480, 640)
    int width, height;           // > 0: every image this size instead
    int quality;                 // JPEG quality (90)
    uint64_t seed;
    int threads;
    // Easier sets (for a detector that must learn in minutes; 0: the default). Objects an image
    // uniform in [min_objects, max_objects] (1, COCO_SYNTH_MAX_OBJECTS), of the first `classes`
    // planted classes (COCO_SYNTH_CLASSES), every non-crowd object of the large size when
    // large_only. The defaults draw the same numbers as without these fields: the same bytes.
    int min_objects, max_objects;
    int classes;
    int large_only;
} coco_synth_opts;

typedef struct {
    uint64_t images, annotations, crowd, occluded, polygons;
    uint64_t per_class[COCO_SYNTH_CLASSES];  // annotations (crowd included)
    uint64_t by_area[3];         // non-crowd annotations of COCO's small, medium and large areas
    uint64_t bytes;              // JPEG bytes
} coco_synth_split_stats;

typedef struct {
    coco_synth_split_stats split[2]; // train, val
} coco_synth_stats;

// Writes the tree at dir (which must not exist, or be an empty directory) through dir.tmp.PID,
// renamed at the end: nothing is left on failure. progress (may be NULL) gets the images done.
int coco_synth(const char *dir, const coco_synth_opts *o, coco_synth_stats *st,
               void (*progress)(void *ctx, uint64_t done), void *pctx, tk_err *e);

// The COCO category id of planted class k, and the class's description ("disc, stripes").
int coco_synth_class_cat(int k);
const char *coco_synth_class_desc(int k);

#endif
