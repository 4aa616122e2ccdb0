// Fuzz the TFRecord reader and the tf.train.Example parser: the input is a whole TFRecord file
// (every record is parsed as an Example), and is also parsed as one Example on its own. Any input
// must give records or a TK_EDATA error, never a crash or a read past the bytes.
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "imagenet/imagenet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    imagenet_example x;
    tk_err e;
    if (imagenet_example_parse(data, size, &x, &e) == 0 &&
        (x.encoded < data || x.encoded + x.encoded_len > data + size))
        abort();
    char path[] = "/tmp/fuzz_tfrecord.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    imagenet_tfrecord *t;
    if (imagenet_tfrecord_open(&t, path, &e) == 0) {
        const uint8_t *rec;
        size_t n;
        uint64_t off;
        while (imagenet_tfrecord_next(t, &rec, &n, &off, &e) == 0 && rec) imagenet_example_parse(rec, n, &x, &e);
        imagenet_tfrecord_close(t);
    }
    unlink(path);
    return 0;
}
