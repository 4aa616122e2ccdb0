// NVIDIA's MLPerf BERT HDF5 files (hdf5.h).
#include <stdlib.h>
#include "bert/hdf5.h"
#ifndef TK_HAVE_HDF5
int bert_h5_available(void) { return 0; }
int bert_h5_open(bert_h5 **h, const char *path, tk_err *e) {
    *h = NULL;
    return tk_err_set(e, TK_EUSAGE, "%s: this trainkit was built without libhdf5", path);
}
int bert_h5_layout(const bert_h5 *h) { (void)h; return 0; }
uint64_t bert_h5_count(const bert_h5 *h) { (void)h; return 0; }
int bert_h5_read(bert_h5 *h, uint64_t first, size_t n, bert_records *b, int32_t vocab_size, tk_err *e) {
    (void)h; (void)first; (void)n; (void)b; (void)vocab_size;
    return tk_err_set(e, TK_EUSAGE, "this trainkit was built without libhdf5");
}
void bert_h5_close(bert_h5 *h) { (void)h; }
#endif
