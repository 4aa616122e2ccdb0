// Run-length encoded binary masks with the semantics of COCO's maskApi: masks are column-major
// (x-major, the way COCO stores them), runs alternate 0s and 1s and start with a run of 0s.
// These functions reproduce pycocotools' results bit for bit, including the polygon rasterizer
// (frPoly), the bounding box of a run list (toBbox) and the compressed string format.
#ifndef TK_COCO_RLE_H
#define TK_COCO_RLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct coco_rle {
    uint32_t h, w;   // mask size
    size_t m;        // number of runs
    uint32_t *cnts;  // run lengths (malloc'd, or NULL when m == 0)
} coco_rle;

void coco_rle_free(coco_rle *r);
// Encode a column-major h*w mask of 0/non-0 bytes.
int coco_rle_encode(const uint8_t *mask, uint32_t h, uint32_t w, coco_rle *out, tk_err *e);
// Decode into a column-major h*w byte mask (r's runs must sum to at most h*w; the rest is 0).
void coco_rle_decode(const coco_rle *r, uint8_t *mask);
// Number of 1 pixels (uint32 arithmetic like maskApi's rleArea).
uint32_t coco_rle_area(const coco_rle *r);
// Bounding box [x, y, w, h] of the 1 pixels, as maskApi's rleToBbox computes it.
void coco_rle_to_bbox(const coco_rle *r, double bb[4]);
// Rasterize a polygon of k points (xy holds 2k doubles) into an h*w mask (maskApi's rleFrPoly).
int coco_rle_fr_poly(const double *xy, size_t k, uint32_t h, uint32_t w, coco_rle *out, tk_err *e);
// The mask of box [x, y, w, h] (rasterized as a 4-point polygon, like maskApi's rleFrBbox).
int coco_rle_fr_bbox(const double bb[4], uint32_t h, uint32_t w, coco_rle *out, tk_err *e);
// Union (intersect = 0) or intersection of n masks of one size; different sizes give an empty
// 0x0 mask, as in maskApi.
int coco_rle_merge(const coco_rle *rs, size_t n, int intersect, coco_rle *out, tk_err *e);
// COCO's compressed string (LEB128-like, 6 bits a character, offset 48, deltas from the run two
// back after the third). Returns a malloc'd NUL-terminated string, or NULL when out of memory.
char *coco_rle_to_string(const coco_rle *r);
// Parse a compressed string of len bytes. Fails (TK_EDATA) on characters outside '0'..'o', a
// truncated or too long value, or a run that is negative or above 2^32-1.
int coco_rle_fr_string(const char *s, size_t len, uint32_t h, uint32_t w, coco_rle *out, tk_err *e);
// Decode a compressed string into cnts (room for len values); *m gets the number of runs.
int coco_rle_fr_string_into(const char *s, size_t len, uint32_t *cnts, size_t *m, tk_err *e);
// Area, sum of the runs and toBbox of a compressed string, without decoding it into memory.
int coco_rle_string_stats(const char *s, size_t len, uint32_t h, uint32_t w, uint32_t *area,
                          uint64_t *total, double bb[4], tk_err *e);
// Sum of the runs (64-bit), to check that a mask does not overflow its h*w image.
uint64_t coco_rle_total(const coco_rle *r);
// IoU of m detections against n ground truths, o[g*m + d] (maskApi's layout). A crowd ground
// truth uses the detection's area as the union. Boxes are [x, y, w, h].
void coco_bb_iou(const double *dt, size_t m, const double *gt, size_t n, const uint8_t *iscrowd,
                 double *o);
// Masks of different sizes give -1 (where their boxes overlap), as in maskApi.
void coco_rle_iou(const coco_rle *dt, size_t m, const coco_rle *gt, size_t n,
                  const uint8_t *iscrowd, double *o);
// One pair, given the boxes of both masks (from coco_rle_to_bbox): what coco_rle_iou computes.
double coco_rle_iou_pair(const coco_rle *dt, const double dtbb[4], const coco_rle *gt,
                         const double gtbb[4], int crowd);

#endif
