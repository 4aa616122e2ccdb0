// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF:
// the checksum of iSCSI, ext4 metadata and the "crc32c" of Python's google-crc32c / crc32c
// packages). Checkpoints carry one per tensor (man/man5/trainkit-checkpoint.5). Uses the SSE4.2
// instruction when the CPU has it (about 20 GB/s here), else an 8-way table (about 2 GB/s).
#ifndef TK_CRC32C_H
#define TK_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Extends crc (0 for a new checksum) over n bytes: crc32c(a || b) == tk_crc32c(tk_crc32c(0, a), b).
uint32_t tk_crc32c(uint32_t crc, const void *p, size_t n);

#ifdef __cplusplus
}
#endif

#endif
