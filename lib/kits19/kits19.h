// KiTS19 preprocessing for 3D U-Net (prep kits19, man/man1/prep.1): what the MLPerf reference's
// preprocess_dataset.py (mlcommons/training, image_segmentation/pytorch, later
// retired_benchmarks/unet3d/pytorch) does to each case, with the same float arithmetic, so the
// .npy files it writes are byte-identical:
//   1. the volumes as nibabel gives them: get_fdata() (scaled) as float32 / uint8, axes (i, j, k)
//      of the NIfTI file, called (D, H, W) here; spacing = pixdim[1..3] of the image;
//   2. resample to spacing (1.6, 1.2, 1.2): shape = int(spacing / target * shape), the image with
//      torch's trilinear interpolate (align_corners=True), the label with its nearest;
//   3. the image clipped to [-79, 304] and normalized, (x - 101) / 76.9, in float32;
//   4. both edge-padded to at least 128 on each axis (the odd voxel after);
//   5. saved as (1, D, H, W) '<f4' and '|u1' arrays (np.save, NPY 1.0).
// The reference resamples every case: its test `spacing != target` compares float32 pixdims with
// the doubles 1.6 and 1.2, which never hold the same value.
#ifndef TK_KITS19_H
#define TK_KITS19_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "tks/tks.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KITS19_MAX_ID 210      // the reference skips case ids >= 210 (KiTS19's unlabelled test set)
#define KITS19_MIN_SHAPE 128   // padded to at least this on each axis (the training patch)
#define KITS19_CLIP_MIN (-79.0f)
#define KITS19_CLIP_MAX 304.0f
#define KITS19_MEAN 101.0f
#define KITS19_STD 76.9f
extern const double kits19_target_spacing[3]; // (1.6, 1.2, 1.2) mm

// The reference's split: the 42 evaluation case numbers of its evaluation_cases.txt, used when no
// such file is given.
#define KITS19_EVAL_CASES 42
extern const char *const kits19_eval_cases[KITS19_EVAL_CASES];

// NIfTI order (dim[1] = D varying fastest) -> C order (D, H, W), W fastest; esize bytes a voxel.
void kits19_to_c_order(const void *in, const int64_t shape[3], void *out, size_t esize);

// The resampled shape: (int64)(spacing[a] / target[a] * shape[a]) in double, as numpy's
// (spc / targ * shp).astype(int). TK_EDATA (what = the axis) when an axis would be empty or
// a spacing is not a positive number.
int kits19_new_shape(const double spacing[3], const int64_t shape[3], int64_t out[3], tk_err *e);

// in: C-order float volume of ishape; out: C-order oshape. Trilinear, align_corners=True, with
// torch's CPU arithmetic: per axis the weights (l0, l1) and indices computed in float; then along
// W, H, D in turn t = fma(t_lo, l0, t_hi * l1), the form that torch's kernel takes when compiled
// for AVX2/AVX-512 (what x86 machines run: the compiler fuses `t0 * w0 + t1 * w1` into one fma;
// torch forced to ATEN_CPU_CAPABILITY=default rounds both products instead and differs in the
// last bit). Uses OpenMP threads; TK_EIO when memory runs out.
int kits19_resample_linear(const float *in, const int64_t ishape[3], float *out, const int64_t oshape[3],
                           tk_err *e);
// The same for labels with torch's 'nearest': source index floor(k * (float)in / out).
int kits19_resample_nearest(const uint8_t *in, const int64_t ishape[3], uint8_t *out, const int64_t oshape[3],
                            tk_err *e);
// x = (clip(x, -79, 304) - 101) / 76.9, each step rounded to float (numpy on a float32 array).
void kits19_normalize(float *x, size_t n);
// Padding to KITS19_MIN_SHAPE: padded shape and the voxels added before (the rest go after).
void kits19_pad_shape(const int64_t shape[3], int64_t padded[3], int64_t before[3]);
// C-order `in` (shape) -> C-order `out` (padded), edge mode (np.pad(mode="edge")); esize bytes
// per voxel.
void kits19_pad_edge(const void *in, const int64_t shape[3], void *out, const int64_t padded[3],
                     const int64_t before[3], size_t esize);

// The NPY 1.0 header numpy's np.save writes for a C-order (1, D, H, W) array of descr ("<f4",
// "|u1"): magic, version, header length, the dict, spaces (numpy >= 1.24 also leaves 21 - digits
// of shape[0] spaces for growth; for these shapes the total is the same as older numpy's), '\n',
// a multiple of 64 bytes. Returns its length (at most cap), 0 if cap is too small.
size_t kits19_npy_header(char *buf, size_t cap, const char *descr, const int64_t shape[3]);

// One preprocessed case: C-order (D, H, W) volumes.
typedef struct {
    int64_t shape[3];
    float *image;
    uint8_t *label;
} kits19_case;

// Reads CASE_DIR/imaging.nii.gz and segmentation.nii.gz and preprocesses them (steps 1-4).
// TK_EDATA naming the file for: a missing segmentation, not a 3-D volume, image and label shapes
// that differ, a label other than 0, 1, 2, a bad spacing; TK_EIO when a file cannot be read.
int kits19_case_load(const char *case_dir, kits19_case *c, tk_err *e);
void kits19_case_free(kits19_case *c);

// The case directories of a data directory, as the reference picks them: entries whose name
// contains "case" (here: directories only), sorted by name, the number after the first '_' below
// KITS19_MAX_ID (others are counted in *skipped). names[i] is "case_XXXXX"; free with
// kits19_list_free. TK_EDATA when a name has no number after its first '_'.
typedef struct {
    char **names;
    int *ids;
    int n, skipped;
} kits19_list;
int kits19_list_cases(const char *dir, kits19_list *l, tk_err *e);
void kits19_list_free(kits19_list *l);
// The key the reference matches against evaluation_cases.txt: the part of the name after its last
// '_' ("00123" for case_00123).
const char *kits19_case_key(const char *name);

// ---- prep kits19 (prep.c) ----------------------------------------------------------------------
// The evaluation list (evaluation_cases.txt: one case name a line, the reference's form): its
// non-empty lines with their line numbers. path NULL: the reference's 42 cases.
typedef struct kits19_eval_list {
    char **key;                  // the lines, '\n' removed (only that, as the reference does)
    int *line, n;
} kits19_eval_list;
int kits19_eval_list_load(kits19_eval_list *l, const char *path, tk_err *e);
void kits19_eval_list_free(kits19_eval_list *l);
// checksum.json: a JSON object of .npy file name -> md5 (32 hex digits); TK_EDATA naming the
// file (and line) otherwise.
int kits19_checksum_load(json_t **out, const char *path, tk_err *e);

// The .tks schema (prep(1), KiTS19): a case is too large for one record (64 MiB;
// a real case reaches 400 x 400 x 400 voxels, 320 MB of float), so each record holds a slab of
// whole D-slices, and a case is its records in order (z = 0, then the next slab, ...):
//   case  i32        the case number (case_00123: 123)
//   shape i32 (3)    the whole case's (D, H, W) after preprocessing
//   z     i32        the first D-slice of this record
//   image f32 (-1)   n * H * W values, slices z .. z + n - 1, C order (W fastest)
//   label u8 (-1)    the same voxels' labels
// n = the slices that fit the record size asked for (image and label together; default
// KITS19_SLAB_BYTES), at least 1.
#define KITS19_SLAB_BYTES ((size_t)32 << 20)
// Builds the schema for one split ("train", "eval"); TK_EUSAGE only on a bug.
int kits19_schema(tks_schema *s, const char *split, tk_err *e);

typedef struct {
    const char *data_dir;        // holds case_XXXXX/{imaging,segmentation}.nii.gz
    const char *out_dir;         // NULL, or: train.tks and eval.tks are written there
    const char *npy_dir;         // NULL, or: case_XXXXX_{x,y}.npy are written there
    const char *eval_cases;      // NULL: DATA_DIR/evaluation_cases.txt, else the reference's list
    const char *checksum;        // NULL: DATA_DIR/checksum.json when there, else none
    const char *write_checksum;  // NULL, or a checksum.json of the .npy files is written there
    size_t record_bytes;         // the slab size of the records (0: KITS19_SLAB_BYTES)
    void (*progress)(void *ctx, uint64_t cases_done);
    void *progress_ctx;
} kits19_prep_opts;

typedef struct {
    char name[64];               // "case_00123"
    int id, eval;
    int64_t shape[3];
    char md5_x[33], md5_y[33];   // md5 of the .npy files (written or not)
} kits19_case_info;

typedef struct {
    int cases, train, eval, skipped;
    int checksum_entries;        // entries verified (0: no checksum file)
    char eval_source[4096];      // the evaluation list used ("built-in" or its path)
    char checksum_source[4096];  // "" or the checksum file's path
    uint64_t voxels;             // after preprocessing, all cases
    kits19_case_info *info;      // cases entries
} kits19_prep_stats;

// Runs the whole preprocessing. Every output is written to a temporary name and renamed only
// when every case was read, preprocessed and checked: a failure leaves no output behind.
// TK_EDATA for bad input (naming the file), TK_EIO for files that cannot be read or written.
int kits19_prep(const kits19_prep_opts *o, kits19_prep_stats *st, tk_err *e);
void kits19_prep_stats_free(kits19_prep_stats *st);

#ifdef __cplusplus
}
#endif

#endif
