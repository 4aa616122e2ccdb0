// SSD300's input pipeline (MLPerf Training v1.x single-stage detector, SSD300 with a ResNet-34
// backbone): prep coco's .tks records (lib/cocodata/prep.h: jpeg, image_id, height, width, boxes
// x1 y1 x2 y2 in pixels, labels 1..80, ...) into training and evaluation batches.
//
// Training, per image, as the reference (mlcommons/training single_stage_detector/ssd, v1.0/v1.1
// tree: utils.py COCODetection, SSDCropping, RandomHorizontalFlip, SSDTransformer):
//   1. boxes normalised by the record's width and height (COCODetection: l / wtot, t / htot, ...)
//      in float32; every annotation counts, crowds included (the reference reads them all);
//   2. SSDCropping(num_cropping_iterations = 1, train.py's default and the v1.x MLPerf setting,
//      logged as max_samples): loop { choose uniformly one of the 7 options: none (the whole
//      image), min IoU 0.1, 0.3, 0.5, 0.7, 0.9, or no IoU bound; none returns at once; else
//      `crop_tries` attempts of: w, h ~ U(0.3, 1), rejected unless 0.5 <= w / h <= 2;
//      left ~ U(0, 1 - w), top ~ U(0, 1 - h); accepted when every box's IoU with the crop is
//      > min IoU (strictly) and at least one box's center lies strictly inside the crop }.
//      On acceptance the boxes whose centers are inside are kept (in order), clipped to the crop,
//      and renormalised ((x - left) / w, ...); the pixels kept are [int(left W), int(right W)) x
//      [int(top H), int(bottom H)) (PIL's crop of the truncated indices). A failed attempt
//      chooses the option again (the reference's `while True`). An image without boxes can only
//      end with "none". After SSD_CROP_MAX_ROUNDS choices (never reached in practice: (6/7)^1000)
//      the whole image is used.
//   3. RandomHorizontalFlip(0.5): the image mirrored, boxes x1' = 1 - x2, x2' = 1 - x1.
//   4. Resize((300, 300)): Pillow's bilinear (triangle filter widened by the downscale factor),
//      as lib/image's resampling computes it (kernels/img_resize.h: in float, rounded to bytes;
//      Pillow's own fixed-point passes differ from it by at most 1 on some bytes).
//   5. ColorJitter(brightness 0.125, contrast 0.5, saturation 0.5, hue 0.05) on those bytes, as
//      torchvision does on a PIL image (kernels/img_jitter_px.h: a random order of the four, factors
//      U(0.875, 1.125), U(0.5, 1.5), U(0.5, 1.5), U(-0.05, 0.05)).
//   6. ToTensor + Normalize(mean [0.485, 0.456, 0.406], std [0.229, 0.224, 0.225]) in float32:
//      (p / 255 - mean) / std.
// The reference then encodes the boxes against the 8732 default boxes (its Encoder); that is the
// model's side (the boxes leave here as ltrb in [0, 1] with their labels). NVIDIA's v1.1
// submission (training_results_v1.1 NVIDIA/benchmarks/ssd/implementations/mxnet,
// input_pipeline.py, DALI) keeps the crop's options and ranges (RandomBBoxCrop thresholds
// 0, 0.1 .. 0.9, scaling [0.3, 1], aspect ratio [0.5, 2], allow_no_crop, num_attempts 1) but
// decodes only the crop (ImageSlice), resizes with DALI's triangular filter on the GPU, and then
// jitters in a fixed order, Hsv (saturation U(0.5, 1.5), hue U(-0.5, 0.5) degrees: far less than
// the reference's 0.05 of the circle, 18 degrees) then BrightnessContrast (U(0.875, 1.125),
// U(0.5, 1.5)), mirroring in CropMirrorNormalize. We follow the reference's order, ranges and
// Pillow's arithmetic instead.
//
// Evaluation (SSDTransformer(val=True)): Resize((300, 300)) of the whole image and the
// normalisation, nothing random; the image id and the original height and width kept for
// coco-eval, the ground-truth boxes (normalised) and labels padded as for training. (The
// reference's COCODetection drops images without annotations from both splits, so its eval runs
// on val2017's 4952 annotated images; prep coco --eval keeps all 5000: which to score is the eval
// side's choice. Its training DataLoader also keeps the epoch's last partial batch; here every
// batch is whole, as the engine counts steps per epoch.)
//
// Batch layout, B images of one batch (ssd_batch):
//   image     f32 (B, S, S, 3) NHWC, or (B, 3, S, S) with opts.chw; S = opts.size (300)
//   boxes     f32 (B, M, 4): x1 y1 x2 y2 in [0, 1]; rows past nbox are 0; M = opts.max_boxes
//   labels    i32 (B, M): 1..K, 0 past nbox (the reference's padding value, the background class)
//   nbox      i32 (B): boxes kept
//   image_id  i64 (B): the COCO image id
//   size      i32 (B, 2): the original height, width (from the record)
// An image with more than M boxes (after the crop) is TK_EDATA naming its record (the reference
// pads its eval targets to 200 and would fail there too).
//
// Randomness: each sample's draws come from Philox keyed (seed; record, epoch, TK_RNG_AUGMENT
// tagged for SSD, block): blocks 0..3 the flip and the jitter, blocks from 16 the crop's rounds,
// so a sample's bytes depend only on (seed, epoch, record), never on the thread, the reader or the
// rank that decodes it. The epoch's order is a Fisher-Yates shuffle keyed (seed; TK_RNG_SHUFFLE,
// epoch, i) (opts.shuffle); global batch i of an epoch is positions [i B, (i + 1) B) of it and
// rank r of world takes b = B / world of them, from i B + r b.
#ifndef TK_WORKLOADS_SSD_DATA_H
#define TK_WORKLOADS_SSD_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "image/image.h"
#include "img_jitter_px.h"
#include "img_jitter.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SSD_CROP_OPTIONS 7       // none, 0.1, 0.3, 0.5, 0.7, 0.9, no bound
#define SSD_CROP_MAX_ROUNDS 1000

typedef struct {
    uint64_t seed;
    int size;                    // output side (300)
    int max_boxes;               // M (200)
    int crop_tries;              // attempts per chosen option (1, the reference's num_cropping_iterations)
    int crop, flip, jitter;      // each augmentation on (1) or off
    double brightness, contrast, saturation, hue; // ColorJitter's (0.125, 0.5, 0.5, 0.05)
    float mean[3], std[3];       // of p / 255
    int chw;                     // image (B, 3, S, S) instead of NHWC
    int threads;                 // threads decoding one batch (pthreads; 0 or 1: the caller's)
    int batch;                   // the global batch (training readers)
    int shuffle;                 // epoch order shuffled (1) or the records' order
    int device_jitter;           // training batches as resized bytes + each image's jitter job
                                 // (ssd_batch.image_u8, .jobs) for kernels/img_jitter.h on the
                                 // device, instead of jittered, normalised floats
    int dct;                     // decode at a DCT scale 1/2, 1/4 or 1/8 where the crop stays at
                                 // least size x size there (0: always full size, the reference)
} ssd_data_opts;

void ssd_data_opts_default(ssd_data_opts *o);

// The minimum IoU of option k (0 none, 6 no bound: -inf), as the reference lists them.
double ssd_crop_min_iou(int k);

// One sample's random stream: Philox blocks of (seed, epoch, record), drawn in order.
typedef struct {
    uint64_t seed;
    uint32_t epoch, rec, block;
    uint32_t w[4];
    int used;                    // words of w taken (4: the next draw reads a new block)
} ssd_rng;

void ssd_rng_init(ssd_rng *r, uint64_t seed, uint32_t epoch, uint32_t rec, uint32_t block);
uint32_t ssd_rng_u32(ssd_rng *r);
double ssd_rng_unit(ssd_rng *r); // [0, 1), 53 bits
double ssd_rng_uniform(ssd_rng *r, double lo, double hi);

// An accepted crop: option k, rounds = options chosen (1 + failed ones); the crop in [0, 1] and
// its pixels [x0, x1) x [y0, y1) of a W x H image. k = 0: the whole image.
typedef struct {
    int option, rounds;
    double left, top, w, h, right, bottom; // right = left + w, bottom = top + h
    int x0, y0, x1, y1;
} ssd_crop;

// The reference's test of one attempt (left, top, w, h) for minimum IoU min_iou: 1 when every
// box's IoU with it is > min_iou and some box's center is strictly inside it. boxes: n x 4 f32
// x1 y1 x2 y2 in [0, 1]; the IoU in float32 as its calc_iou_tensor.
int ssd_crop_accepts(const float *boxes, int n, double min_iou, double left, double top, double w, double h);

// SSDCropping's choice for an image of W x H with n boxes, from r.
void ssd_crop_choose(ssd_rng *r, const float *boxes, int n, int W, int H, int tries, ssd_crop *c);

// The boxes of a chosen crop: those whose centers are strictly inside, clipped and renormalised
// (float32, as the reference), into out_boxes / out_labels (room for n). Returns how many.
// Option 0: all of them, unchanged.
int ssd_crop_boxes(const ssd_crop *c, const float *boxes, const int32_t *labels, int n, float *out_boxes,
                   int32_t *out_labels);

// RandomHorizontalFlip's boxes: x1' = 1 - x2, x2' = 1 - x1.
void ssd_flip_boxes(float *boxes, int n);

// ColorJitter.get_params from r: a uniformly random order of the four (Fisher-Yates) and the
// factors U(max(0, 1 - b), 1 + b), U(max(0, 1 - c), 1 + c), U(max(0, 1 - s), 1 + s), U(-h, h).
void ssd_jitter_draw(ssd_rng *r, const ssd_data_opts *o, tk_img_jitter *j);

// The decode of crop c of a W x H JPEG into o->size x o->size: its DCT scale (o->dct) and the
// resampling's axes over the image decoded at that scale (lib/image/image.h).
int ssd_decode_plan(const ssd_crop *c, int W, int H, const ssd_data_opts *o, tk_img_box_plan *p, tk_err *e);

// ToTensor + Normalize of S x S RGB bytes into one image of the batch (NHWC or CHW).
void ssd_normalize(const uint8_t *px, int S, const ssd_data_opts *o, float *out);

// The records, read into memory (the JPEG bytes as they are).
typedef struct ssd_dataset ssd_dataset;
int ssd_dataset_load(char *const *paths, int npaths, ssd_dataset **d, tk_err *e);
void ssd_dataset_free(ssd_dataset *d);
int64_t ssd_dataset_count(const ssd_dataset *d);
// Record i's fields (pointers into the dataset; boxes x1 y1 x2 y2 in pixels).
typedef struct {
    const uint8_t *jpeg;
    size_t jpeg_size;
    int64_t image_id;
    int32_t height, width;
    int nbox;
    const float *boxes;
    const int32_t *labels;
} ssd_record;
void ssd_dataset_record(const ssd_dataset *d, int64_t i, ssd_record *r);

typedef struct {
    float *image;                // unused when image_u8 is given (data.device_jitter)
    float *boxes;
    int32_t *labels, *nbox;
    int64_t *image_id;
    int32_t *size;
    uint8_t *image_u8;           // NULL, or (B, S, S, 3) resized bytes before the jitter (NHWC)
    tk_img_jitter_job *jobs;     // with image_u8: (B) each one's jitter (TK_IMG_JITTER_NONE: none)
} ssd_batch;

// What a sample's augmentation did (for tests and statistics).
typedef struct {
    ssd_crop crop;
    int flip;
    tk_img_jitter jitter;
} ssd_sample_info;

// Per-thread buffers of the decoding (zero-initialize; free with ssd_scratch_free).
typedef struct {
    tk_img_scratch dec;          // the decode's and the resampling's (lib/image/image.h)
    uint8_t *img;                // the S x S bytes
    float *nb;                   // normalised boxes
    int32_t *nl;
    int nbcap;
} ssd_scratch;
void ssd_scratch_free(ssd_scratch *s);

// Record rec as sample k of the batch out: train (the augmentation of (seed, epoch, rec)) or eval.
// Bad JPEG bytes or a record whose image is not its height x width are TK_EDATA naming the record.
int ssd_sample(const ssd_dataset *d, const ssd_data_opts *o, int train, uint32_t epoch, int64_t rec,
               ssd_scratch *s, const ssd_batch *out, int k, ssd_sample_info *info, tk_err *e);

// Records rec[0 .. n) into out's samples 0 .. n-1, on o->threads threads (the bytes do not depend
// on the thread count). The error is the first failing sample's.
int ssd_samples(const ssd_dataset *d, const ssd_data_opts *o, int train, uint32_t epoch, const int64_t *rec, int n,
                const ssd_batch *out, tk_err *e);

// A training reader: rank's share of each global batch (b = batch / world samples).
typedef struct ssd_reader ssd_reader;
int ssd_reader_open(const ssd_data_opts *o, const ssd_dataset *d, int rank, int world, ssd_reader **r, tk_err *e);
void ssd_reader_close(ssd_reader *r);
int ssd_reader_per_rank(const ssd_reader *r);
// Batch `step` (0-based over the run; spe steps per epoch) into out.
int ssd_reader_batch(ssd_reader *r, int64_t step, int64_t spe, const ssd_batch *out, tk_err *e);
// The epoch's record order (ssd_dataset_count entries), for tests.
int ssd_epoch_order(const ssd_data_opts *o, int64_t n, uint32_t epoch, int64_t *perm, tk_err *e);

// Evaluation: records [first, first + n) in order into out (no augmentation).
int ssd_eval_batch(const ssd_dataset *d, const ssd_data_opts *o, int64_t first, int n, const ssd_batch *out,
                   tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
