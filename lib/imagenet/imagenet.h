// ImageNet (ILSVRC2012) for the ResNet benchmark: the raw layouts and label files, the MLPerf
// reference's TFRecords, conversion to .tks (JPEG bytes kept, as MLPerf does), a synthetic
// dataset in the raw layout, and the loader that turns shards into batches
// (man/man1/prep.1, man/man5/tks.5 "imagenet schema").
//
// Labels: the index of the image's synset (WordNet id, "n01440764") in the sorted list of the
// dataset's synsets, 0..999 for the 1000 ILSVRC2012 classes. The reference's TFRecords number
// the same sorted list from 1 (0 was a background class): label = image/class/label - 1.
#ifndef TK_IMAGENET_H
#define TK_IMAGENET_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "image/image.h"
#include "tks/tks.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- synsets and label files (layout.c) -----------------------------------------------------
typedef struct {
    char (*id)[16];              // sorted, unique WordNet ids ("n" + 8 digits)
    int n;
} imagenet_synsets;

int imagenet_is_wnid(const char *s, size_t len);
// A synset list: the first word of each non-empty line is a WordNet id (LOC_synset_mapping.txt,
// words.txt-like files, a plain list). Sorted and deduplicated. Errors name FILE: line N.
int imagenet_synsets_load(imagenet_synsets *s, const char *path, tk_err *e);
int imagenet_synsets_parse(imagenet_synsets *s, const char *buf, size_t n, const char *name, tk_err *e);
int imagenet_synsets_from(imagenet_synsets *s, const char *const *ids, int n, tk_err *e); // copied, sorted
int imagenet_synset_index(const imagenet_synsets *s, const char *wnid); // label, or -1
uint32_t imagenet_synsets_crc(const imagenet_synsets *s);                // CRC-32 of "id\n" x n
void imagenet_synsets_free(imagenet_synsets *s);

// Validation labels, in one of the forms users have:
//   kaggle:  LOC_val_solution.csv: "ImageId,PredictionString" then "ILSVRC2012_val_00000001,n01751748
//            x y x y ..." (the label is the first synset of the row)
//   list:    one WordNet id per line, line i for the i-th image in file-name order
//            (TensorFlow's imagenet_2012_validation_synset_labels.txt, the reference's
//            synset_labels.txt)
//   devkit:  ILSVRC2012_validation_ground_truth.txt: one ILSVRC2012_ID (1..1000) per line, line i
//            for ILSVRC2012_val_<i+1, 8 digits>; needs the devkit's synset order (meta.mat's
//            ILSVRC2012_ID -> WNID), given as a list of 1000 WordNet ids in ILSVRC2012_ID order
typedef enum { IMAGENET_LABELS_KAGGLE = 1, IMAGENET_LABELS_LIST, IMAGENET_LABELS_DEVKIT } imagenet_labels_kind;

typedef struct {
    imagenet_labels_kind kind;
    size_t n;
    char (*image)[64];           // kaggle: the ImageId of entry i; else ""
    char (*wnid)[16];            // kaggle, list: the synset of entry i; devkit: from the id order
    int *id;                     // devkit: the ILSVRC2012_ID of entry i
    uint64_t *line;              // entry i's line in the file, for messages
} imagenet_labels;

// Parses a label file (the kind from its content: a "ImageId," header, WordNet ids, or
// integers). devkit_order: the WordNet ids in ILSVRC2012_ID order (NULL: a devkit file is
// an error saying so).
int imagenet_labels_parse(imagenet_labels *l, const char *buf, size_t n, const char *name,
                          const imagenet_synsets *devkit_order_unsorted, tk_err *e);
int imagenet_labels_load(imagenet_labels *l, const char *path, const imagenet_synsets *devkit_order, tk_err *e);
void imagenet_labels_free(imagenet_labels *l);
// A list of WordNet ids in file order (not sorted): the devkit's ILSVRC2012_ID order.
int imagenet_synset_order_load(imagenet_synsets *s, const char *path, tk_err *e);

// ---- the images of a source (layout.c) -------------------------------------------------------
typedef struct {
    char *path;                  // the file
    const char *name;            // its base name (inside path)
    int label;                   // index in the synsets; -1 = to be skipped (reason below)
    int skip_reason;             // imagenet_skip_* when label == -1
} imagenet_item;

typedef struct {
    imagenet_item *v;
    size_t n, cap;
} imagenet_items;

enum { // the reasons prep skips an image with --skip-bad, counted in its summary
    IMAGENET_SKIP_NOT_IMAGE = 0, IMAGENET_SKIP_TRUNCATED, IMAGENET_SKIP_CORRUPT, IMAGENET_SKIP_TOO_LARGE,
    IMAGENET_SKIP_UNKNOWN_SYNSET, IMAGENET_SKIP_NO_LABEL, IMAGENET_SKIP_EMPTY_CLASS, IMAGENET_SKIP_LABEL_RANGE,
    IMAGENET_SKIP_KINDS
};
extern const char *const imagenet_skip_names[IMAGENET_SKIP_KINDS];

typedef struct {
    const char *synsets_file;    // the class list (else: the class folders, or the label file's)
    const char *labels_file;     // flat validation folders
    const char *devkit_synsets;  // the devkit's ILSVRC2012_ID order, for a devkit labels file
    int skip_bad;                // skip and count instead of failing
} imagenet_scan_opts;

typedef struct {
    uint64_t skipped[IMAGENET_SKIP_KINDS];
    uint64_t ignored_files;      // files that are not .JPEG/.jpg/.jpeg/.png (by name)
    int layout;                  // 1 class folders, 2 flat + labels
} imagenet_scan_stats;

// Lists the images of dir: class folders (nXXXXXXXX/*.JPEG: train/, or val/ sorted into folders),
// or a flat folder of images labelled by o->labels_file. Items come sorted (by class folder, then
// file name; flat: by file name), so the output does not depend on the file system's order.
int imagenet_scan(const char *dir, const imagenet_scan_opts *o, imagenet_items *items, imagenet_synsets *syn,
                  imagenet_scan_stats *st, tk_err *e);
void imagenet_items_free(imagenet_items *it);

// ---- TFRecords (tfrecord.c) ------------------------------------------------------------------
// TFRecord framing: uint64 length, uint32 masked CRC-32C of the length, the data, uint32 masked
// CRC-32C of the data (masked: ((c >> 15) | (c << 17)) + 0xa282ead8), all little-endian.
uint32_t imagenet_crc32c(uint32_t crc, const void *p, size_t n);
static inline uint32_t imagenet_crc_mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

typedef struct imagenet_tfrecord imagenet_tfrecord;
int imagenet_tfrecord_open(imagenet_tfrecord **t, const char *path, tk_err *e);
// The next record (valid until the next call): *data NULL at the end. Errors name FILE: offset N.
int imagenet_tfrecord_next(imagenet_tfrecord *t, const uint8_t **data, size_t *n, uint64_t *offset, tk_err *e);
void imagenet_tfrecord_close(imagenet_tfrecord *t);
// Does the file start like a TFRecord (a record header whose length CRC matches)?
int imagenet_is_tfrecord(const char *path);

// The fields of a tf.train.Example that prep reads; pointers into the record.
typedef struct {
    const uint8_t *encoded;      // image/encoded
    size_t encoded_len;
    int64_t label;               // image/class/label (-1 when absent)
    const uint8_t *filename;     // image/filename (NULL when absent)
    size_t filename_len;
    const uint8_t *synset;       // image/class/synset (NULL when absent)
    size_t synset_len;
} imagenet_example;

// Parses a serialized Example (protobuf wire format, our own reader): TK_EDATA "bad Example: why".
int imagenet_example_parse(const uint8_t *p, size_t n, imagenet_example *x, tk_err *e);

// ---- conversion to .tks (prep.c) -------------------------------------------------------------
// The schema: jpeg u8 [-1] (the file's bytes, PNG and CMYK converted to RGB JPEG), label i16,
// height i32, width i32, name u8 [-1] (the file's base name).
void imagenet_schema(tks_schema *s, const char *split, const imagenet_synsets *syn, int nclasses);

typedef struct {
    int threads;                 // worker threads (0 = 1)
    int skip_bad;
    int check_decode;            // decode every image (at 1/8 scale) to catch truncated data
    int quality;                 // JPEG quality of converted images (100, as the reference)
    const char *split;           // meta "split" ("train", "val", ...)
    int tfrecord_classes;        // TFRecord labels 1..this (1000)
    void (*progress)(void *ctx, uint64_t done); // called now and then with the records so far
    void *progress_ctx;
} imagenet_prep_opts;

typedef struct {
    uint64_t records, bytes;     // written, and their JPEG bytes
    uint64_t skipped[IMAGENET_SKIP_KINDS];
    uint64_t converted_cmyk, converted_png, grayscale, progressive, jpeg_warnings;
    int classes;
    double seconds;
} imagenet_prep_stats;

// Converts a list of image files (imagenet_scan) into w, in order.
int imagenet_prep_files(const imagenet_items *items, const imagenet_synsets *syn, tks_writer *w,
                        const imagenet_prep_opts *o, imagenet_prep_stats *st, tk_err *e);
// Converts TFRecord files into w, in order. syn (may be NULL) checks image/class/synset.
int imagenet_prep_tfrecords(char *const *files, int nfiles, const imagenet_synsets *syn, tks_writer *w,
                            const imagenet_prep_opts *o, imagenet_prep_stats *st, tk_err *e);

// ---- synthetic ImageNet (synth.c) ------------------------------------------------------------
typedef struct {
    int classes;                 // 1000
    int train_per_class;         // images per class in train/
    int val_per_class;           // images per class in val/
    int width, height;           // the typical size (500 x 375); sizes vary around it
    int quality;                 // JPEG quality (90)
    uint64_t seed;
    double odd_fraction;         // share of grayscale / CMYK / PNG-disguised files each
    int threads;
} imagenet_synth_opts;

typedef struct {
    uint64_t train, val, bytes, grayscale, cmyk, png;
} imagenet_synth_stats;

// Writes dir/train/<wnid>/<wnid>_<k>.JPEG, dir/val/ILSVRC2012_val_<8 digits>.JPEG (flat),
// dir/LOC_val_solution.csv, dir/LOC_synset_mapping.txt, dir/ILSVRC2012_validation_ground_truth.txt
// with dir/devkit_synsets.txt (the id order), and dir/manifest.json. dir must not exist or be
// empty; everything is written under a temporary name first and renamed at the end.
int imagenet_synth(const char *dir, const imagenet_synth_opts *o, imagenet_synth_stats *st,
                   void (*progress)(void *ctx, uint64_t done), void *progress_ctx, tk_err *e);
// The synthetic class c's WordNet id.
void imagenet_synth_wnid(int c, char out[16]);

// ---- the loader (loader.c) -------------------------------------------------------------------
typedef struct {
    int batch;
    tk_img_transform t;          // mode (train: shuffled, full batches; eval: in order), sizes, dtype, seed
    const tk_img_decoder_ops *decoder; // NULL: the CPU decoder (tk_img_decoder_pick finds one)
    tk_img_decoder_opts dopts;
    int prefetch;                // batches decoded ahead (default 2)
    size_t window_frames;        // train: records are shuffled within windows of this many frames
                                 // (in a shuffled frame order); 0: all frames, held in memory
    void *(*alloc)(size_t bytes, void *ctx); // batch buffers (e.g. pinned memory); NULL: malloc
    void (*release)(void *p, void *ctx);
    void *alloc_ctx;
} imagenet_loader_opts;

typedef struct {
    void *images;                // n x out_h x out_w x 3, NHWC, t.dtype; device memory when the
                                 // decoder writes there (out_on_device without dopts.host_out);
                                 // else alloc's
    int32_t *labels;
    size_t n;                    // images (the last eval batch may be short)
    uint64_t index;              // batch index in the epoch
} imagenet_batch;

typedef struct imagenet_loader imagenet_loader;
int imagenet_loader_open(imagenet_loader **L, char *const *files, int nfiles, const imagenet_loader_opts *o, tk_err *e);
uint64_t imagenet_loader_records(const imagenet_loader *L);
uint64_t imagenet_loader_batches(const imagenet_loader *L); // per epoch
// Starts epoch `epoch` (its order and crops come from (seed, epoch)); batches of the previous
// epoch not yet taken are dropped.
int imagenet_loader_epoch(imagenet_loader *L, uint32_t epoch, tk_err *e);
// The next batch, or *b = NULL at the end of the epoch; blocks until it is decoded. Give it back
// with imagenet_loader_done: the loader decodes into `prefetch` slots, so hold fewer than that
// many batches at once (the next one needs a free slot to be made in).
int imagenet_loader_next(imagenet_loader *L, imagenet_batch **b, tk_err *e);
void imagenet_loader_done(imagenet_loader *L, imagenet_batch *b);
void imagenet_loader_close(imagenet_loader *L);

#ifdef __cplusplus
}
#endif

#endif
