// The one place that lists the image decoders (image.h). A new decoder adds its table here.
#include <stdio.h>
#include <string.h>

#include "image/image.h"

static const tk_img_decoder_ops *const decoders[] = {
    &tk_img_decoder_cpu,
    &tk_img_decoder_nvjpeg,
};

const tk_img_decoder_ops *tk_img_decoder_find(const char *name) {
    for (size_t i = 0; i < sizeof decoders / sizeof *decoders; i++)
        if (strcmp(decoders[i]->name, name) == 0) return decoders[i];
    return NULL;
}

const char *tk_img_decoder_names(void) { return "cpu, nvjpeg, auto"; }

const tk_img_decoder_ops *tk_img_decoder_pick(const char *name, char *note, size_t n) {
    if (n) note[0] = 0;
    const tk_img_decoder_ops *d = strcmp(name, "auto") == 0 ? &tk_img_decoder_nvjpeg : tk_img_decoder_find(name);
    if (!d) return NULL;
    char why[400] = "";
    if (!d->available || d->available(why, sizeof why)) return d;
    if (n) snprintf(note, n, "image decoder %s is not available here (%s): using the cpu decoder", d->name, why);
    return &tk_img_decoder_cpu;
}
