// PNG through libpng (codec.h): decoding to RGB the way TensorFlow's decode_png(channels=3)
// does (the MLPerf reference's stage 1 converts ImageNet's one PNG that way), and encoding RGB.
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "image/codec.h"

int tk_img_check_size(long long w, long long h, tk_err *e); // jpeg.c

#ifndef TK_HAVE_PNG

int tk_img_have_png(void) { return 0; }

static int no_png(tk_err *e) {
    tk_err_set(e, TK_EUSAGE, "this trainkit was built without libpng");
    return tk_err_hint(e, "install libpng-dev (contrib/setup-deps.sh) and rebuild");
}

int tk_png_decode(const uint8_t *p, size_t n, uint8_t **px, int *width, int *height, tk_err *e) {
    (void)p, (void)n, (void)px, (void)width, (void)height;
    return no_png(e);
}
int tk_png_encode(const uint8_t *px, int width, int height, uint8_t **out, size_t *outn, tk_err *e) {
    (void)px, (void)width, (void)height, (void)out, (void)outn;
    return no_png(e);
}

#else

#include <png.h>

int tk_img_have_png(void) { return 1; }

typedef struct {
    const uint8_t *p;
    size_t n, pos;
    char msg[256];
    jmp_buf jb;
} pngsrc;

static void on_error(png_structp ps, png_const_charp msg) {
    pngsrc *s = png_get_error_ptr(ps);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    longjmp(s->jb, 1);
}

static void on_warning(png_structp ps, png_const_charp msg) { (void)ps, (void)msg; }

static void on_read(png_structp ps, png_bytep out, png_size_t len) {
    pngsrc *s = png_get_io_ptr(ps);
    if (len > s->n - s->pos) png_error(ps, "truncated PNG data");
    memcpy(out, s->p + s->pos, len);
    s->pos += len;
}

int tk_png_decode(const uint8_t *p, size_t n, uint8_t **px, int *width, int *height, tk_err *e) {
    *px = NULL;
    if (tk_img_sniff(p, n) != TK_IMG_PNG) return tk_err_set(e, TK_EDATA, "not a PNG file");
    pngsrc s = {.p = p, .n = n};
    png_structp ps = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, on_error, on_warning);
    png_infop pi = ps ? png_create_info_struct(ps) : NULL;
    if (!pi) {
        png_destroy_read_struct(&ps, NULL, NULL);
        return tk_err_set(e, TK_EIO, "out of memory");
    }
    uint8_t *volatile img = NULL;
    png_bytep *volatile rows = NULL;
    int rc = 0;
    if (setjmp(s.jb)) {
        rc = tk_err_set(e, TK_EDATA, "bad PNG data: %s", s.msg);
        free(img);
        goto out;
    }
    png_set_read_fn(ps, &s, on_read);
    png_read_info(ps, pi);
    png_uint_32 w = png_get_image_width(ps, pi), h = png_get_image_height(ps, pi);
    if ((rc = tk_img_check_size(w, h, e))) goto out;
    int ct = png_get_color_type(ps, pi);
    png_set_expand(ps);             // palette -> RGB, gray < 8 bits -> 8 bits, tRNS -> alpha
    png_set_strip_16(ps);           // 16-bit samples: the high byte
    png_set_strip_alpha(ps);        // alpha dropped, not composited
    if (!(ct & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(ps);
    png_set_interlace_handling(ps);
    png_read_update_info(ps, pi);
    if (png_get_rowbytes(ps, pi) != (size_t)w * 3) png_error(ps, "unexpected row size after conversion to RGB");
    img = malloc((size_t)w * h * 3);
    rows = malloc(h * sizeof *rows);
    if (!img || !rows) {
        free(img);
        rc = tk_err_set(e, TK_EIO, "out of memory for a %ux%u PNG", w, h);
        goto out;
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = img + (size_t)y * w * 3;
    png_read_image(ps, rows);
    *px = img;
    *width = (int)w;
    *height = (int)h;
out:
    free(rows);
    png_destroy_read_struct(&ps, &pi, NULL);
    return rc;
}

int tk_png_encode(const uint8_t *px, int width, int height, uint8_t **out, size_t *outn, tk_err *e) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)width;
    im.height = (png_uint_32)height;
    im.format = PNG_FORMAT_RGB;
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&im, NULL, &size, 0, px, 0, NULL))
        return tk_err_set(e, TK_EINTERNAL, "PNG encoding failed: %s", im.message);
    *out = malloc(size);
    if (!*out) return tk_err_set(e, TK_EIO, "out of memory");
    if (!png_image_write_to_memory(&im, *out, &size, 0, px, 0, NULL)) {
        free(*out);
        *out = NULL;
        return tk_err_set(e, TK_EINTERNAL, "PNG encoding failed: %s", im.message);
    }
    *outn = size;
    return 0;
}

#endif
