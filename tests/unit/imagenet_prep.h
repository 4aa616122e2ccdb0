// A folder of images (imagenet_scan's layouts) to a .tks of prep imagenet's schema, as `prep
// imagenet` writes it: for the tests that need JPEG shards (test_imagenet.c, the GPU reader test).
#ifndef TK_TESTS_IMAGENET_PREP_H
#define TK_TESTS_IMAGENET_PREP_H

#include <string.h>

#include "imagenet/imagenet.h"

static int imagenet_test_prep(const char *dir, const imagenet_scan_opts *so, const char *out, int threads,
                              const tks_writer_opts *wo, imagenet_prep_stats *ps, tk_err *e) {
    imagenet_items it;
    imagenet_synsets syn;
    imagenet_scan_stats sc;
    TRY(imagenet_scan(dir, so, &it, &syn, &sc, e));
    tks_schema s;
    imagenet_schema(&s, "test", &syn, 0);
    tks_writer *w;
    int rc = tks_writer_open(&w, out, &s, wo, e);
    imagenet_prep_opts po = {.threads = threads, .check_decode = 1, .quality = 100, .skip_bad = so->skip_bad};
    memset(ps, 0, sizeof *ps);
    if (!rc) rc = imagenet_prep_files(&it, &syn, w, &po, ps, e);
    if (!rc) rc = tks_writer_close(w, e);
    else tks_writer_abort(w);
    imagenet_items_free(&it);
    imagenet_synsets_free(&syn);
    return rc;
}

#endif
