/* checksum: the algorithms, pure C (no SDK, no imports), so that
 * tests/run.sh can test them natively. */
#ifndef CHECKSUM_HASHES_H
#define CHECKSUM_HASHES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CRC-32 (IEEE 802.3, reflected, as zlib / PNG / gzip): "123456789" -> cbf43926. */
uint32_t checksum_crc32(const uint8_t *data, size_t len);
/* Adler-32 (zlib): "Wikipedia" -> 11e60398. */
uint32_t checksum_adler32(const uint8_t *data, size_t len);
/* FNV-1a, 64 bits: "" -> cbf29ce484222325. */
uint64_t checksum_fnv1a64(const uint8_t *data, size_t len);
/* SHA-256 (FIPS 180-4). */
void checksum_sha256(const uint8_t *data, size_t len, uint8_t digest[32]);

/* The digest of `algorithm` ("crc32", "adler32", "fnv1a64", "sha256") as
 * lowercase hex (NUL-terminated, at most 64 digits) into hex[65]. False for
 * an unknown algorithm. */
bool checksum_hex(const char *algorithm, const uint8_t *data, size_t len, char hex[65]);

/* Decode base64 (standard or URL-safe alphabet; padding optional; ASCII
 * whitespace ignored). On success *out is malloc'd (free it; *out_len bytes);
 * on failure *bad_at is the offset of the offending character (or `len` when
 * the input ends too early) and nothing is allocated. */
bool checksum_base64_decode(const char *text, size_t len, uint8_t **out, size_t *out_len,
                            size_t *bad_at);

#endif
