// For the fuzz targets whose reader takes a file name: the input written to a temporary file.
#ifndef TK_FUZZ_FILE_H
#define TK_FUZZ_FILE_H

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

// Writes size bytes of data to a new file made from tmpl ("/tmp/fuzz_NAME.XXXXXX", completed in
// place). 0: written whole, the caller unlinks tmpl; -1: nothing is left behind.
static inline int fuzz_write_file(char *tmpl, const uint8_t *data, size_t size) {
    int fd = mkstemp(tmpl);
    if (fd < 0) return -1;
    int ok = write(fd, data, size) == (ssize_t)size;
    close(fd);
    if (!ok) unlink(tmpl);
    return ok ? 0 : -1;
}

#endif
