// Internal layout shared by the COCO loader and evaluator (not a public header).
#ifndef TK_COCO_INT_H
#define TK_COCO_INT_H

#include <pthread.h>

#include "coco/coco.h"

// int64 -> int32 open-addressing hash map
typedef struct { int64_t *keys; int32_t *vals; size_t cap, n; } coco_map;
int coco_map_put(coco_map *m, int64_t key, int32_t val); // overwrites; -1 on ENOMEM
int32_t coco_map_get(const coco_map *m, int64_t key);     // -1 when absent
void coco_map_free(coco_map *m);

enum { SEG_NONE = 0, SEG_POLY, SEG_COUNTS, SEG_STRING, SEG_EMPTY };
typedef struct {
    uint8_t kind;      // SEG_*
    uint32_t h, w;     // RLE size (SEG_COUNTS, SEG_STRING)
    size_t off, n;     // POLY: first polygon, count; COUNTS: into u32 pool; STRING: into buffer
} coco_seg;

typedef struct { size_t start, n; } coco_poly; // n coordinates from coords[start]

// Segmentation storage of one file.
typedef struct {
    char *buf;         // the file (strings unescaped in place)
    size_t len;
    coco_poly *polys;
    size_t npolys, cap_polys;
    double *coords;
    size_t ncoords, cap_coords;
    uint32_t *counts;
    size_t ncounts, cap_counts;
} coco_store;

// The counts of an RLE segmentation given as a list (SEG_COUNTS): NULL when it has none (a file
// without any list has no counts array, and NULL + 0 is undefined).
static inline uint32_t *coco_seg_counts(const coco_store *st, const coco_seg *s) {
    return s->n ? st->counts + s->off : NULL;
}

typedef struct {
    int64_t id;
    int32_t img, cat;  // internal indices
    uint8_t crowd;
    double area, bbox[4];
    coco_seg seg;
    uint32_t file_idx; // index in $.annotations, for messages
} coco_gt_ann;

struct coco_gt {
    char name[256];
    coco_store st;
    size_t nimg, cap_img;
    int64_t *img_id;
    uint32_t *img_h, *img_w;
    uint8_t *img_declared; // listed in $.images (the others are only named by annotations)
    const char **img_file; // $.images[].file_name (into st.buf, not NUL-terminated; NULL if none)
    size_t *img_file_len;
    long dup_img;          // the first $.images index whose id was listed before, or -1
    int64_t dup_img_id;    // and that id
    coco_map img_map;
    size_t ncat, cap_cat;
    int64_t *cat_id;
    const char **cat_name;
    size_t *cat_name_len;
    uint8_t *cat_declared;
    coco_map cat_map;
    coco_gt_ann *anns;
    size_t nanns, cap_anns;
    size_t *img_start;     // [nimg+1] into by_img
    uint32_t *by_img;      // ann indices by image, then category id, then file order
    // rasterized masks for segm, built on first use
    pthread_mutex_t lock;
    int masks_ready;
    coco_rle *rle;
    double *rle_bb;
};

typedef struct {
    int32_t img, cat;
    double score, area, bbox[4];
    coco_seg seg;
    uint32_t file_idx;
} coco_dt_ann;

struct coco_dt {
    char name[256];
    const coco_gt *gt;
    coco_store st;
    coco_dt_ann *anns;
    size_t nanns, cap_anns;
    size_t dropped;
    int has_bbox_branch;   // loadRes' branch: the first result carries a box
    coco_rle *owned;       // masks of results given as polygons (by index)
    double *rbb;           // [nanns][4] the box of each result's mask (maskApi's toBbox)
    size_t *img_start;     // [gt->nimg+1]
    uint32_t *by_img;
};

// The mask of a segmentation in an h x w image (polygons are rasterized and merged).
int coco_seg_to_rle(const coco_store *st, const coco_seg *s, uint32_t h, uint32_t w, coco_rle *out,
                    tk_err *e);
// Stable merge sort of n indices (tmp holds n/2+1) by cmp(a, b, ctx) (<0, 0, >0).
typedef int (*coco_cmp_fn)(uint32_t a, uint32_t b, const void *ctx);
void coco_stable_sort(uint32_t *a, uint32_t *tmp, size_t n, coco_cmp_fn cmp, const void *ctx);
int coco_read_file(const char *path, char **buf, size_t *len, tk_err *e);
// TK_EDATA when dt has no results and flags do not allow that (allow: what would, for the hint).
int coco_dt_check_empty(const coco_dt *dt, int flags, const char *allow, tk_err *e);
// Builds dt's index by image (then category id) once its results are in (load.c).
int coco_dt_index(coco_dt *dt, tk_err *e);

#endif
