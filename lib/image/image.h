// Image decoders for the ResNet input pipeline: encoded JPEGs in, batches of transformed NHWC
// images out. Each decoder is a const table of functions (FFmpeg's AVCodec, SQLite's io_methods),
// found by name in decoders.c, so a GPU decoder (nvJPEG) joins without the loader changing. A
// decoder works on whole batches, so implementations can batch their work (nvJPEG's batched
// decode, the CPU decoder's threads). All of them plan each sample with tk_img_plan
// (transform.h): the same crop and flip for the same (seed, epoch, sample) on every decoder.
#ifndef TK_IMAGE_H
#define TK_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "image/transform.h"

#ifdef __cplusplus
extern "C" {
#endif

// One image of a batch: its encoded bytes and its sample index (the random key).
typedef struct {
    const uint8_t *data;
    size_t size;
    uint64_t sample;
} tk_img_job;

typedef struct {
    int threads;                 // cpu: worker threads (0 = 1)
    int device;                  // GPU decoders: the CUDA device
    void *stream;                // GPU decoders: unused (they work on a stream of their own and
                                 // finish the batch before run() returns)
    int host_out;                // GPU decoders: run() writes host memory (copied back) instead
                                 // of device memory
} tk_img_decoder_opts;

typedef struct tk_img_decoder tk_img_decoder; // each implementation's own state

typedef struct tk_img_decoder_ops {
    int version;                 // 2: the fields below; later versions only add fields
    const char *name;            // "cpu", "nvjpeg"
    int out_on_device;           // run() writes device memory (else host memory), unless opened
                                 // with host_out
    int (*open)(tk_img_decoder **d, const tk_img_decoder_opts *o, tk_err *e);
    // Decodes and transforms n images into out: n x t->out_h x t->out_w x 3, t->dtype, NHWC.
    // On a bad image the whole batch fails; the error's where names the sample ("sample S").
    int (*run)(tk_img_decoder *d, const tk_img_transform *t, const tk_img_job *jobs, size_t n,
               void *out, tk_err *e);
    void (*close)(tk_img_decoder *d);
    // version 2
    // Can it open here? 1, or 0 with why (a sentence: "libnvjpeg.so.13 not found ..."). NULL: always.
    int (*available)(char *why, size_t n);
    // Output buffers in the memory run() writes (device memory for out_on_device): the caller's
    // batch buffers. NULL: malloc/free.
    void *(*alloc_out)(tk_img_decoder *d, size_t bytes);
    void (*free_out)(tk_img_decoder *d, void *p);
} tk_img_decoder_ops;

extern const tk_img_decoder_ops tk_img_decoder_cpu;
extern const tk_img_decoder_ops tk_img_decoder_nvjpeg; // lib/image/nvjpeg.c

// The decoder called name, or NULL (decoders.c lists them).
const tk_img_decoder_ops *tk_img_decoder_find(const char *name);
// Names of the decoders built in, comma-separated ("cpu, nvjpeg"), and "auto".
const char *tk_img_decoder_names(void);
// The decoder to use for a name that may be "auto" (nvjpeg where it is available, else cpu), or
// a decoder that is not available here (then cpu): note (n bytes) says why when the answer is not
// the one named, else it is "". NULL for an unknown name.
const tk_img_decoder_ops *tk_img_decoder_pick(const char *name, char *note, size_t n);
// An open nvjpeg decoder in words, for benchmarks and tests: "nvJPEG 13.0.4 (libnvjpeg.so.13),
// hardware backend, ...".
const char *tk_img_nvjpeg_describe(const tk_img_decoder *d);
// Where an nvjpeg decoder's run() spent its time so far (host clock, summed over the batches):
// parse (headers, plans and nvJPEG's stream parse on the decoder's threads), submit (nvJPEG's
// batched decode call and the queuing of the rest), wait (until the stream had finished the
// batch: the GPU's share, and what it queued behind); and on the stream's clock (CUDA events) the
// spans of nvJPEG's decode (with the upload of CPU-decoded images) and of the resize kernels,
// their own time where nothing else runs on the GPU. Zeros for another decoder or none.
typedef struct {
    uint64_t batches, images;
    double parse_s, submit_s, wait_s;
    double decode_gpu_s, resize_gpu_s;
    uint64_t pinned_allocs, pinned_frees; // nvJPEG's pinned host buffers (cudaFreeHost waits for the device)
} tk_img_decoder_stats;
void tk_img_nvjpeg_stats(const tk_img_decoder *d, tk_img_decoder_stats *st);

// The CPU decoder's work for one image, the specification the other decoders match: header,
// plan, DCT-domain scale (t->dct_scale: the largest downscale 1/8, 1/4 or 1/2 that keeps the box
// at least the resized size), decode of only the rows and columns the filter reads, resampling,
// normalization. scratch: per-thread buffers, grown as needed (zero-initialize; free with
// tk_img_scratch_free). g (may be NULL) receives the geometry used, *num the DCT scale.
typedef struct {
    uint8_t *px;
    size_t pxcap;
    float *tmp;
    size_t tmpcap;
} tk_img_scratch;

int tk_img_decode_one(const tk_img_transform *t, const uint8_t *data, size_t size, uint64_t sample,
                      tk_img_scratch *scratch, void *out, tk_img_geom *g, int *num, tk_err *e);
void tk_img_scratch_free(tk_img_scratch *s);

// The decode of one box, in steps (what tk_img_decode_one does after planning its geometry; SSD's
// loader runs it with its own crop, lib/workloads/ssd/data.c): the box g->[x0, x1) x [y0, y1) of
// a width x height JPEG, resized to g->rw x g->rh, the window at (g->wx, g->wy) of out_w x out_h
// kept. The plan: the DCT scale num/8 (dct: tk_img_dct_num's, else 8) and both axes over the image
// as decoded at that scale (the box scaled by the decoded size over the full size, taps only
// from the pixels the box covers there). Free with tk_img_box_plan_free.
typedef struct {
    int num;
    tk_img_axis ax, ay;
} tk_img_box_plan;
int tk_img_box_plan_make(int width, int height, const tk_img_geom *g, int out_w, int out_h, int dct,
                         tk_img_box_plan *p, tk_err *e);
void tk_img_box_plan_free(tk_img_box_plan *p);
// Decodes the pixels p reads ([ax.lo, ax.hi) x [ay.lo, ay.hi) at scale p->num/8) and resamples
// them into out (mirrored when flip, as ro says), with s's buffers.
int tk_img_decode_box(const uint8_t *data, size_t size, const tk_img_box_plan *p, int flip, const tk_img_rs_out *ro,
                      tk_img_scratch *s, void *out, tk_err *e);

// The DCT scale num/8 for a box of bw x bh resized to rw x rh: the smallest num of 1, 2, 4, 8
// with bw * num / 8 >= rw and bh * num / 8 >= rh (8 when none is smaller).
int tk_img_dct_num(int bw, int bh, int rw, int rh);

#ifdef __cplusplus
}
#endif

#endif
