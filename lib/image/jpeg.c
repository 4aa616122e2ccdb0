// JPEG through libjpeg-turbo (codec.h): header, region decode with DCT-domain downscaling,
// CMYK/gray to RGB, and encoding. libjpeg reports fatal errors through error_exit, which must
// not return: it longjmps back into the call that started the work, which then fails with the
// library's message.
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/codec.h"

tk_img_format tk_img_sniff(const uint8_t *p, size_t n) {
    if (n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return TK_IMG_JPEG;
    if (n >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0) return TK_IMG_PNG;
    return TK_IMG_NOT_IMAGE;
}

// The size checks shared by JPEG and PNG (codec.h: TK_IMG_MAX_PIXELS).
int tk_img_check_size(long long w, long long h, tk_err *e);
int tk_img_check_size(long long w, long long h, tk_err *e) {
    if (w < 1 || h < 1) return tk_err_set(e, TK_EDATA, "image is %lld x %lld pixels", w, h);
    if (w > 65500 || h > 65500 || (unsigned long long)w * (unsigned long long)h > TK_IMG_MAX_PIXELS)
        return tk_err_set(e, TK_EDATA, "image is %lld x %lld pixels, more than the %llu allowed", w, h,
                          TK_IMG_MAX_PIXELS);
    return 0;
}

#ifndef TK_HAVE_JPEG

int tk_img_have_jpeg(void) { return 0; }

static int no_jpeg(tk_err *e) {
    tk_err_set(e, TK_EUSAGE, "this trainkit was built without libjpeg-turbo");
    return tk_err_hint(e, "install libjpeg62-turbo-dev (contrib/setup-deps.sh) and rebuild");
}

int tk_jpeg_info_read(const uint8_t *p, size_t n, tk_jpeg_info *info, tk_err *e) {
    (void)p, (void)n, (void)info;
    return no_jpeg(e);
}
int tk_jpeg_decode(const uint8_t *p, size_t n, int num, int x0, int y0, int w, int h, uint8_t *out,
                   size_t stride, tk_jpeg_stats *st, tk_err *e) {
    (void)p, (void)n, (void)num, (void)x0, (void)y0, (void)w, (void)h, (void)out, (void)stride, (void)st;
    return no_jpeg(e);
}
int tk_jpeg_encode(const uint8_t *px, int width, int height, int channels, int quality, int sub420,
                   uint8_t **out, size_t *outn, tk_err *e) {
    (void)px, (void)width, (void)height, (void)channels, (void)quality, (void)sub420, (void)out, (void)outn;
    return no_jpeg(e);
}
int tk_jpeg_encode_cmyk(const uint8_t *px_rgb, int width, int height, int quality, uint8_t **out,
                        size_t *outn, tk_err *e) {
    (void)px_rgb, (void)width, (void)height, (void)quality, (void)out, (void)outn;
    return no_jpeg(e);
}

#else

#include <jerror.h>
#include <jpeglib.h>

int tk_img_have_jpeg(void) { return 1; }

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    int warnings, eof;
} errmgr;

static void on_error(j_common_ptr c) {
    errmgr *m = (errmgr *)c->err;
    c->err->format_message(c, m->msg);
    longjmp(m->jb, 1);
}

static void on_message(j_common_ptr c, int level) {
    errmgr *m = (errmgr *)c->err;
    if (level >= 0) return; // trace messages
    if (c->err->msg_code == JWRN_JPEG_EOF) m->eof = 1; // the data ran out: libjpeg pads with an EOI
    else m->warnings++;
}

static void err_init(errmgr *m, struct jpeg_error_mgr **slot) {
    memset(m, 0, sizeof *m);
    *slot = jpeg_std_error(&m->pub);
    m->pub.error_exit = on_error;
    m->pub.emit_message = on_message;
}

static int lib_fail(tk_err *e, const errmgr *m) {
    if (m->eof) tk_err_set(e, TK_EDATA, "truncated JPEG data (it ends before the image data: %s)", m->msg);
    else tk_err_set(e, TK_EDATA, "bad JPEG data: %s", m->msg);
    return tk_err_lib(e, "libjpeg", m->pub.msg_code);
}

static int not_jpeg(const uint8_t *p, size_t n, tk_err *e) {
    tk_img_format f = tk_img_sniff(p, n);
    if (f == TK_IMG_JPEG) return 0;
    return tk_err_set(e, TK_EDATA, f == TK_IMG_PNG ? "a PNG file, not a JPEG" : "not a JPEG file");
}

// Shared start of info and decode: header read, info filled, size checked. Must be called from
// the function that did setjmp (the longjmp target stays valid).
static int header(struct jpeg_decompress_struct *ci, const uint8_t *p, size_t n, tk_jpeg_info *info, tk_err *e) {
    jpeg_mem_src(ci, p, (unsigned long)n);
    jpeg_read_header(ci, TRUE);
    info->width = (int)ci->image_width;
    info->height = (int)ci->image_height;
    info->components = ci->num_components;
    info->progressive = ci->progressive_mode;
    switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE: info->color = TK_JPEG_GRAY; break;
    case JCS_CMYK: case JCS_YCCK: info->color = TK_JPEG_CMYK; break;
    case JCS_YCbCr: case JCS_RGB: info->color = TK_JPEG_YCBCR; break;
    default:
        return tk_err_set(e, TK_EDATA, "unsupported JPEG color space (%d components)", ci->num_components);
    }
    return tk_img_check_size(info->width, info->height, e);
}

int tk_jpeg_info_read(const uint8_t *p, size_t n, tk_jpeg_info *info, tk_err *e) {
    TRY(not_jpeg(p, n, e));
    struct jpeg_decompress_struct ci;
    errmgr m;
    err_init(&m, &ci.err);
    jpeg_create_decompress(&ci);
    int rc;
    if (setjmp(m.jb)) rc = lib_fail(e, &m);
    else rc = header(&ci, p, n, info, e);
    jpeg_destroy_decompress(&ci);
    return rc;
}

// Columns and rows decoded around the requested region, so that the pixels handed back are the
// ones a full decode gives: fancy upsampling reads one chroma sample beyond each side, and libjpeg
// replicates the edge of a cropped or skipped region instead (checked by tests/unit/test_image.c).
#define CROP_MARGIN 16
#define ROWS 16

static void cmyk_to_rgb(const uint8_t *in, uint8_t *out, int w, int adobe) {
    for (int x = 0; x < w; x++, in += 4, out += 3) {
        int c = in[0], m = in[1], y = in[2], k = in[3];
        if (adobe) { // Adobe stores CMYK inverted: these are 255 - ink
            out[0] = (uint8_t)(k * c / 255);
            out[1] = (uint8_t)(k * m / 255);
            out[2] = (uint8_t)(k * y / 255);
        } else {
            out[0] = (uint8_t)((255 - k) * (255 - c) / 255);
            out[1] = (uint8_t)((255 - k) * (255 - m) / 255);
            out[2] = (uint8_t)((255 - k) * (255 - y) / 255);
        }
    }
}

int tk_jpeg_decode(const uint8_t *p, size_t n, int num, int x0, int y0, int w, int h, uint8_t *out,
                   size_t stride, tk_jpeg_stats *st, tk_err *e) {
    TRY(not_jpeg(p, n, e));
    if (num < 1 || num > 8 || w < 1 || h < 1 || x0 < 0 || y0 < 0)
        return tk_err_set(e, TK_EINTERNAL, "jpeg decode: bad region %d,%d %dx%d at scale %d/8", x0, y0, w, h, num);
    struct jpeg_decompress_struct ci;
    errmgr m;
    err_init(&m, &ci.err);
    jpeg_create_decompress(&ci);
    uint8_t *volatile rows = NULL;
    int rc = 0;
    if (setjmp(m.jb)) {
        rc = lib_fail(e, &m);
        goto out;
    }
    tk_jpeg_info info;
    if ((rc = header(&ci, p, n, &info, e))) goto out;
    int cmyk = info.color == TK_JPEG_CMYK;
    ci.scale_num = (unsigned)num;
    ci.scale_denom = 8;
    ci.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&ci);
    int ow = (int)ci.output_width, oh = (int)ci.output_height;
    if ((long long)x0 + w > ow || (long long)y0 + h > oh) {
        rc = tk_err_set(e, TK_EINTERNAL, "jpeg decode: region %d,%d %dx%d outside the %dx%d image", x0, y0, w, h, ow, oh);
        goto out;
    }
    JDIMENSION cx = (JDIMENSION)(x0 > CROP_MARGIN ? x0 - CROP_MARGIN : 0);
    JDIMENSION cend = (JDIMENSION)(x0 + w + CROP_MARGIN < ow ? x0 + w + CROP_MARGIN : ow), cw = cend - cx;
    if (cx > 0 || (int)cw < ow) jpeg_crop_scanline(&ci, &cx, &cw); // widens to iMCU boundaries
    int ys = y0 > CROP_MARGIN ? y0 - CROP_MARGIN : 0;
    if (ys > 0) ys = (int)jpeg_skip_scanlines(&ci, (JDIMENSION)ys);
    int comps = ci.output_components;
    size_t rowb = (size_t)ci.output_width * (size_t)comps;
    rows = malloc(rowb * ROWS);
    if (!rows) {
        rc = tk_err_set(e, TK_EIO, "out of memory for a %dx%d JPEG", ow, oh);
        goto out;
    }
    JSAMPROW ptr[ROWS];
    for (int k = 0; k < ROWS; k++) ptr[k] = rows + (size_t)k * rowb;
    int y = (int)ci.output_scanline, dx = x0 - (int)cx;
    while (y < y0 + h) {
        int want = y0 + h - y < ROWS ? y0 + h - y : ROWS;
        int got = (int)jpeg_read_scanlines(&ci, ptr, (JDIMENSION)want);
        if (m.eof || got < 1) {
            long long row = (long long)(y + (got > 0 ? got : 0)) * info.height / oh; // in full-size rows
            rc = tk_err_set(e, TK_EDATA, "truncated JPEG data (it ends at about row %lld of %d)", row, info.height);
            goto out;
        }
        for (int k = 0; k < got; k++, y++) {
            if (y < y0) continue;
            uint8_t *dst = out + (size_t)(y - y0) * stride;
            if (cmyk) cmyk_to_rgb(ptr[k] + (size_t)dx * 4, dst, w, ci.saw_Adobe_marker);
            else memcpy(dst, ptr[k] + (size_t)dx * 3, (size_t)w * 3);
        }
    }
    if (y0 + h == oh) jpeg_finish_decompress(&ci); // reads on to the EOI: later warnings count
    if (st) {
        st->warnings = m.warnings + (m.eof ? 1 : 0); // a missing EOI after all rows: a warning
        st->adobe = ci.saw_Adobe_marker;
    }
out:
    jpeg_destroy_decompress(&ci);
    free(rows);
    return rc;
}

static int encode(const uint8_t *px, int width, int height, int channels, J_COLOR_SPACE in, int quality,
                  int sub420, uint8_t **out, size_t *outn, tk_err *e) {
    struct jpeg_compress_struct ci;
    errmgr m;
    err_init(&m, &ci.err);
    jpeg_create_compress(&ci);
    unsigned long size = 0;
    if (setjmp(m.jb)) { // (the destination's buffer is libjpeg's then: left, not freed twice)
        tk_err_set(e, TK_EINTERNAL, "JPEG encoding failed: %s", m.msg);
        int rc = tk_err_lib(e, "libjpeg", m.pub.msg_code);
        jpeg_destroy_compress(&ci);
        return rc;
    }
    unsigned char *b = NULL;
    jpeg_mem_dest(&ci, &b, &size);
    ci.image_width = (JDIMENSION)width;
    ci.image_height = (JDIMENSION)height;
    ci.input_components = channels;
    ci.in_color_space = in;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    ci.dct_method = JDCT_ISLOW;
    if (!sub420 || in != JCS_RGB) // 4:4:4 (CMYK: libjpeg's default, no subsampling)
        for (int c = 0; c < ci.num_components; c++) ci.comp_info[c].h_samp_factor = ci.comp_info[c].v_samp_factor = 1;
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * (size_t)width * (size_t)channels);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    *out = b;
    *outn = size;
    return 0;
}

int tk_jpeg_encode(const uint8_t *px, int width, int height, int channels, int quality, int sub420,
                   uint8_t **out, size_t *outn, tk_err *e) {
    if (channels != 1 && channels != 3) return tk_err_set(e, TK_EINTERNAL, "jpeg encode: %d channels", channels);
    return encode(px, width, height, channels, channels == 1 ? JCS_GRAYSCALE : JCS_RGB, quality, sub420, out, outn, e);
}

int tk_jpeg_encode_cmyk(const uint8_t *px_rgb, int width, int height, int quality, uint8_t **out,
                        size_t *outn, tk_err *e) {
    size_t np = (size_t)width * (size_t)height;
    uint8_t *cmyk = malloc(np * 4 + 1);
    if (!cmyk) return tk_err_set(e, TK_EIO, "out of memory");
    for (size_t i = 0; i < np; i++) { // inverted (Adobe) CMYK: K' = max(R,G,B), C' = R * 255 / K'
        const uint8_t *s = px_rgb + 3 * i;
        int k = s[0] > s[1] ? s[0] : s[1];
        k = k > s[2] ? k : s[2];
        for (int c = 0; c < 3; c++) cmyk[4 * i + c] = (uint8_t)(k ? (s[c] * 255 + k / 2) / k : 0);
        cmyk[4 * i + 3] = (uint8_t)k;
    }
    int rc = encode(cmyk, width, height, 4, JCS_CMYK, quality, 0, out, outn, e);
    free(cmyk);
    return rc;
}

#endif
