// Fuzz the NIfTI-1 reader (tk_nifti_read, lib/nifti/nifti.c; prep kits19's imaging and
// segmentation files): the input is a whole .nii or .nii.gz. A volume read must have 1..7 dims
// of at least 1, nvox their product within the limits, a supported datatype, and values
// tk_nifti_to_f32 converts; written back (plain and gzip) and read again it must give the same
// header fields and bytes. Anything else must be a TK_EDATA error naming the file and an offset
// (TK_EIO only for memory), never a crash, a hang or an allocation the input does not pay for.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "nifti/nifti.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_volume(const tk_nifti *n) {
    if (n->ndim < 1 || n->ndim > 7 || n->dim[0] != n->ndim || !n->data) abort();
    int64_t nvox = 1;
    for (int i = 1; i < 8; i++) {
        if (n->dim[i] < 1 || (i > n->ndim && n->dim[i] != 1)) abort();
        nvox *= n->dim[i];
    }
    int size = tk_nifti_dtype_size(n->datatype);
    if ((size_t)nvox != n->nvox || nvox > TK_NIFTI_MAX_VOXELS || !size || nvox * size > TK_NIFTI_MAX_BYTES) abort();
}

// Same header fields (those the writer keeps, as float32) and the same voxels.
static void check_same(const tk_nifti *a, const tk_nifti *b) {
    if (a->ndim != b->ndim || a->datatype != b->datatype || a->nvox != b->nvox) abort();
    if (memcmp(a->dim, b->dim, sizeof a->dim)) abort();
    if (a->qform_code != b->qform_code || a->sform_code != b->sform_code || a->xyzt_units != b->xyzt_units) abort();
    if (memcmp(&a->scl_slope, &b->scl_slope, sizeof(double)) || memcmp(&a->srow, &b->srow, sizeof a->srow)) abort();
    if (memcmp(a->data, b->data, a->nvox * (size_t)tk_nifti_dtype_size(a->datatype))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_nifti.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    tk_nifti *n = NULL;
    tk_err e = {0};
    int rc = tk_nifti_read(path, &n, &e);
    if (rc) {
        if (n) abort();
        if (rc == TK_EDATA ? strncmp(e.where, path, strlen(path)) || !strstr(e.where, ": offset ") : rc != TK_EIO) abort();
    } else {
        check_volume(n);
        float *f = malloc(n->nvox * sizeof(float) + 1);
        if (!f) abort();
        rc = tk_nifti_to_f32(n, f, &e);
        free(f);
        // only a valid slope with a non-finite intercept fails, and the reader refuses those
        if (rc) abort();
        char out[] = "/tmp/fuzz_nifti_out.XXXXXX";
        int fd = mkstemp(out);
        if (fd >= 0) {
            close(fd);
            for (int gz = 0; gz <= 1; gz++) {
                tk_nifti *r = NULL;
                if (tk_nifti_write(out, n, gz, &e) || tk_nifti_read(out, &r, &e)) abort();
                check_same(n, r);
                tk_nifti_free(r);
            }
            unlink(out);
        }
        tk_nifti_free(n);
    }
    unlink(path);
    return 0;
}
