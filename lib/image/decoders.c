// The one place that lists the image decoders (image.h). A new decoder adds its table here.
#include <string.h>

#include "image/image.h"

static const tk_img_decoder_ops *const decoders[] = {
    &tk_img_decoder_cpu,
};

const tk_img_decoder_ops *tk_img_decoder_find(const char *name) {
    for (size_t i = 0; i < sizeof decoders / sizeof *decoders; i++)
        if (strcmp(decoders[i]->name, name) == 0) return decoders[i];
    return NULL;
}

const char *tk_img_decoder_names(void) { return "cpu"; }
