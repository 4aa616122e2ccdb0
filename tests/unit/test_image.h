// Shared by the image and ImageNet unit tests.
#ifndef TK_TEST_IMAGE_H
#define TK_TEST_IMAGE_H

#include <stdio.h>
#include <stdlib.h>

#include "image/codec.h"

// A whole file in memory (NULL and a message when it cannot be opened).
static inline uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("# cannot open %s\n", path);
        *n = 0;
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

// Built without libjpeg-turbo/libpng (make HAVE_JPEG= HAVE_PNG=), the image calls must say so
// (TK_EUSAGE, "built without ..."); that is what these tests check then, instead of the images.
#define NEED_JPEG()                                                                                \
    do {                                                                                           \
        if (!tk_img_have_jpeg() || !tk_img_have_png()) {                                           \
            tk_jpeg_info ni_;                                                                      \
            tk_err ne_;                                                                            \
            CHECK_EQ_INT(tk_jpeg_info_read((const uint8_t *)"\xff\xd8\xff", 3, &ni_, &ne_),     \
                         tk_img_have_jpeg() ? TK_EDATA : TK_EUSAGE);                               \
            printf("#   built without libjpeg-turbo or libpng: only the error path is checked\n"); \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#endif
