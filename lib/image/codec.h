// JPEG and PNG coding for the ImageNet tools: reading a JPEG's header, decoding a region of a
// JPEG (optionally downscaled in the DCT domain) to RGB, encoding RGB to JPEG, and PNG to RGB and
// back. libjpeg-turbo and libpng behind small C calls; built without them (TK_HAVE_JPEG /
// TK_HAVE_PNG unset), every call fails with TK_EUSAGE and says so.
#ifndef TK_IMAGE_CODEC_H
#define TK_IMAGE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// Images with more pixels are refused before anything is allocated: Pillow's decompression-bomb
// limit (2 x 89,478,485 pixels), so anything Pillow opens, we open. Each side is at most 65,500
// (libjpeg's JPEG_MAX_DIMENSION).
#define TK_IMG_MAX_PIXELS 178956970ull

int tk_img_have_jpeg(void);
int tk_img_have_png(void);

typedef enum {
    TK_IMG_NOT_IMAGE = 0,
    TK_IMG_JPEG,
    TK_IMG_PNG,
} tk_img_format;

// What the first bytes say: JPEG (FF D8 FF) or PNG (the 8-byte signature).
tk_img_format tk_img_sniff(const uint8_t *p, size_t n);

typedef enum {
    TK_JPEG_GRAY = 1,
    TK_JPEG_YCBCR,   // or RGB stored as is: three components
    TK_JPEG_CMYK,    // CMYK or YCCK: four components
} tk_jpeg_color;

typedef struct {
    int width, height;
    int components;        // 1, 3 or 4
    tk_jpeg_color color;
    int progressive;
} tk_jpeg_info;

// Reads the header (through the first SOF marker) and checks the size limits. TK_EDATA with a
// message for people ("not a JPEG file", "image is 20000 x 20000 pixels, more than ...").
int tk_jpeg_info_read(const uint8_t *p, size_t n, tk_jpeg_info *info, tk_err *e);

// The size of the image decoded at scale num/8 (num 1..8): libjpeg's ceil(side * num / 8).
static inline int tk_jpeg_scaled(int side, int num) { return (int)(((long long)side * num + 7) / 8); }

// Per-decode facts for callers that want them (NULL = don't care).
typedef struct {
    int warnings;          // libjpeg warnings (corrupt data that it decoded around)
    int adobe;             // an Adobe APP14 marker (CMYK stored inverted)
} tk_jpeg_stats;

// Decodes the rows [y0, y0+h) and columns [x0, x0+w) of the image as decoded at scale num/8
// into RGB bytes (out, rows stride bytes apart). Grayscale is replicated to R=G=B; CMYK/YCCK is
// converted as TensorFlow's decoder does (Adobe files: R = C*K/255, else (255-C)(255-K)/255,
// integer division). Only the needed rows and iMCU columns are decoded. A file that ends early
// ("premature end") is TK_EDATA ("truncated JPEG data"); other libjpeg warnings are counted.
int tk_jpeg_decode(const uint8_t *p, size_t n, int num, int x0, int y0, int w, int h, uint8_t *out,
                   size_t stride, tk_jpeg_stats *st, tk_err *e);

// RGB (or gray, channels 1) bytes to a baseline JPEG in *out (malloc'd, *outn bytes), with
// chroma subsampling 4:2:0 (sub420) or 4:4:4, the islow DCT and standard tables at quality q.
int tk_jpeg_encode(const uint8_t *px, int width, int height, int channels, int quality, int sub420,
                   uint8_t **out, size_t *outn, tk_err *e);
// The same, but as 4-component CMYK with an Adobe marker (inverted, as Photoshop writes it),
// so that decoding with tk_jpeg_decode gives back about px: for tests and synthetic data.
int tk_jpeg_encode_cmyk(const uint8_t *px_rgb, int width, int height, int quality, uint8_t **out,
                        size_t *outn, tk_err *e);

// PNG to RGB bytes (*px malloc'd, width*3 per row), as TensorFlow's decode_png(channels=3):
// palette expanded, gray replicated, alpha dropped, 16-bit samples cut to their high byte.
int tk_png_decode(const uint8_t *p, size_t n, uint8_t **px, int *width, int *height, tk_err *e);
// RGB bytes to a PNG in *out (malloc'd).
int tk_png_encode(const uint8_t *px, int width, int height, uint8_t **out, size_t *outn, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
