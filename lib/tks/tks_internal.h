// Byte layout shared by the .tks writer and reader (man/man5/tks.5 is the specification).
#ifndef TK_TKS_INTERNAL_H
#define TK_TKS_INTERNAL_H

#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "tks/tks.h"

#define TKS_MAGIC "\x89TKS\r\n\x1a\n"
#define TKS_VERSION 1             // files without ragged fields
#define TKS_VERSION_RAGGED 2      // files with a ragged field
#define TKS_HEADER_BYTES 24
#define TKS_BLOCK_BYTES 16
#define TKS_ENTRY_BYTES 32
#define TKS_TRAILER_BYTES 32
#define TKS_MAX_SCHEMA (1u << 20)
#define TKS_MAX_RECORD_BYTES ((size_t)64 << 20)
#define TKS_MAX_FRAME_BYTES ((uint64_t)2 << 30)
#define TKS_MAX_COUNT 0x7fffffffu
// Writers keep a frame at most this big before compression unless one record is larger.
#define TKS_TARGET_FRAME_BYTES ((size_t)256 << 20)
// ... and, for schemas with ragged fields, this big unless tks_writer_opts.frame_bytes says.
#define TKS_TARGET_RAGGED_FRAME_BYTES ((size_t)64 << 20)
#define TKS_LENGTH_BYTES 4        // a ragged field's per-record row count in a frame

static inline void tks_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void tks_put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t tks_get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t tks_get64(const uint8_t *p) {
    return (uint64_t)tks_get32(p) | (uint64_t)tks_get32(p + 4) << 32;
}
static inline uint32_t tks_crc(uint32_t crc, const void *p, size_t n) {
    return (uint32_t)crc32_z(crc, (const Bytef *)p, n);
}

// Block header: kind, count, size, CRC-32 of the first 12 bytes.
static inline void tks_put_block(uint8_t b[TKS_BLOCK_BYTES], const char *kind, uint32_t count,
                                 uint32_t size) {
    memcpy(b, kind, 4);
    tks_put32(b + 4, count);
    tks_put32(b + 8, size);
    tks_put32(b + 12, tks_crc(0, b, 12));
}

// Schema <-> SCHEMA-JSON. to_json: malloc'd text in *out. from_json: TK_EDATA with e->what
// "bad schema: why" (no where; the caller adds the offset).
int tks_schema_to_json(const tks_schema *s, size_t frame_records, char **out, size_t *len,
                       tk_err *e);
int tks_schema_from_json(tks_schema *s, size_t *frame_records, const char *buf, size_t len,
                         tk_err *e);
// The bytes a frame of n records takes before compression, ragged values not counted.
static inline uint64_t tks_frame_fixed_bytes(const tks_schema *s, uint64_t n) {
    return n * (s->record_bytes + (uint64_t)s->nragged * TKS_LENGTH_BYTES);
}

#endif
