// NIfTI-1 volumes (.nii and .nii.gz, single file "n+1"): the reader KiTS19's imaging and
// segmentation files need, and a writer for the synthetic ones (prep synth kits19).
//
// The reader takes either byte order (told by sizeof_hdr, 348, read as it is or swapped), keeps the
// header fields a caller uses (dims, spacing, scaling, both orientation forms) and returns the
// voxels in host byte order in the file's own datatype, dim[1] varying fastest. Each refusal is a
// TK_EDATA naming the file and the byte offset of the field (or of the data) that is wrong; in a
// .nii.gz offsets count bytes of the decompressed stream. Decisions (the readers' man pages, prep
// kits19's in prep(1), state them as their exit-3 cases):
//   - The data must fill vox_offset + nvox * bytes per voxel exactly: a file that ends early is
//     truncated, and bytes after the data are refused too, because then the header's dims disagree
//     with the file (nibabel ignores them; nothing KiTS19 or nibabel writes has any). A .gz is
//     never inflated past that end + 1 byte, so a small hostile .gz cannot expand without bound.
//   - Limits: at most TK_NIFTI_MAX_VOXELS voxels and TK_NIFTI_MAX_BYTES bytes of data, checked
//     before anything is allocated; a .gz's buffer grows with what it really inflates.
//   - vox_offset must be an integer >= 352 and <= TK_NIFTI_MAX_OFFSET; extensions between byte 348
//     and vox_offset are skipped.
//   - Supported datatypes: uint8, int8, int16, uint16, int32, uint32, int64, float32, float64.
//     Others (binary, complex, RGB, uint64, float128) are refused by name; bitpix must match.
//   - scl_slope 0 or not finite means no scaling (the standard, and nibabel); a valid slope with
//     a non-finite scl_inter is refused (nibabel refuses it too).
#ifndef TK_NIFTI_H
#define TK_NIFTI_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_NIFTI_MAX_VOXELS ((int64_t)1 << 31)
#define TK_NIFTI_MAX_BYTES ((int64_t)1 << 33)
#define TK_NIFTI_MAX_OFFSET ((int64_t)1 << 24)

// NIfTI-1 datatype codes (nifti1.h's DT_*) that trainkit reads and writes.
enum {
    TK_NIFTI_UINT8 = 2,
    TK_NIFTI_INT16 = 4,
    TK_NIFTI_INT32 = 8,
    TK_NIFTI_FLOAT32 = 16,
    TK_NIFTI_FLOAT64 = 64,
    TK_NIFTI_INT8 = 256,
    TK_NIFTI_UINT16 = 512,
    TK_NIFTI_UINT32 = 768,
    TK_NIFTI_INT64 = 1024,
};

typedef struct tk_nifti {
    int ndim;              // dim[0], 1..7
    int64_t dim[8];        // dim[1..ndim] >= 1; dim[0] = ndim; entries past ndim are 1
    double pixdim[8];      // pixdim[0] is qfac (-1 or 1); pixdim[1..3] the spacing (xyzt_units)
    int datatype;          // TK_NIFTI_*
    int xyzt_units;        // the units byte as stored (NIFTI_UNITS_MM = 2, ...)
    double scl_slope, scl_inter; // as stored; tk_nifti_to_f32 applies them
    int qform_code, sform_code;
    double quatern[3];     // quatern_b, c, d
    double qoffset[3];     // qoffset_x, y, z
    double srow[3][4];     // srow_x, srow_y, srow_z: the sform affine's first three rows
    size_t nvox;           // product of dim[1..ndim]
    void *data;            // nvox voxels, host byte order, the file's datatype, dim[1] fastest
} tk_nifti;

// Bytes per voxel of a supported datatype (0: not supported) and a datatype's name ("int16";
// also names the unsupported NIfTI types, "unknown" for codes NIfTI-1 does not define).
int tk_nifti_dtype_size(int datatype);
const char *tk_nifti_dtype_name(int datatype);

// Reads a .nii or .nii.gz (told by its first bytes, not its name). TK_EDATA for a bad file (where
// = "PATH: offset N"), TK_EIO when it cannot be read or memory runs out.
int tk_nifti_read(const char *path, tk_nifti **out, tk_err *e);
// A new volume with the given dims (dim[0] = ndim), spacing 1, no scaling, no orientation, data
// zeroed. TK_EDATA for dims outside the limits above.
int tk_nifti_new(tk_nifti **out, int ndim, const int64_t *dims, int datatype, tk_err *e);
void tk_nifti_free(tk_nifti *n);

// The scaled values (slope and inter applied in double precision, then rounded once to float):
// what nibabel's get_fdata() then astype(float32) gives. out holds n->nvox floats.
int tk_nifti_to_f32(const tk_nifti *n, float *out, tk_err *e);

// Writes n as a little-endian NIfTI-1 single file (vox_offset 352, no extensions), atomically
// (a temporary file renamed over path). gz 0: a plain .nii; 1..9: gzip at that zlib level (the
// gzip header has no name and no time, so the bytes depend only on n).
int tk_nifti_write(const char *path, const tk_nifti *n, int gz, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
