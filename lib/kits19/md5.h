// MD5 (RFC 1321), for the reference's checksum.json: the md5 of each .npy file it writes. Not for
// security; a checksum of bytes we produce.
#ifndef TK_KITS19_MD5_H
#define TK_KITS19_MD5_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[4];
    uint64_t len;        // bytes so far
    uint8_t buf[64];
    size_t nbuf;
} kits19_md5;

void kits19_md5_init(kits19_md5 *m);
void kits19_md5_update(kits19_md5 *m, const void *data, size_t n);
// The digest as 32 lowercase hex digits and a NUL.
void kits19_md5_hex(kits19_md5 *m, char out[33]);

#endif
