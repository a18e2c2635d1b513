/* CRC-32C computed while copying: see _crc32c_copy.c. */

#ifndef LOGBROKER_CRC32C_COPY_H
#define LOGBROKER_CRC32C_COPY_H

#include <stddef.h>
#include <stdint.h>

/* `len` bytes from `src` go to `dst` (src == dst: already in place, only read). */
typedef struct {
    const char *src;
    char *dst;
    size_t len;
} CopyPiece;

/* 1 if this CPU has the CRC-32C instruction this file uses (checked once). */
int crc32c_copy_available(void);

/* Copy the pieces, in order, to their destinations and return the CRC state
   (not inverted) of their bytes in order, starting from `state`. `total` is the
   sum of their lengths. Only when crc32c_copy_available(). */
uint32_t crc32c_copy(uint32_t state, const CopyPiece *pieces, size_t count, size_t total);

/* The CRC state after `data`, starting from `state` (software, for short data). */
uint32_t crc32c_update(uint32_t state, const unsigned char *data, size_t len);

#endif
