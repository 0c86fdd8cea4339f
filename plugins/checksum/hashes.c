/* checksum: CRC-32, Adler-32, FNV-1a 64 and SHA-256, and base64 decoding. */
#include "hashes.h"

#include <stdlib.h>
#include <string.h>

uint32_t checksum_crc32(const uint8_t *data, size_t len) {
    /* Half a byte at a time with a 16-entry table of the reflected polynomial
     * 0xEDB88320: no table to build (each call runs in a fresh instance). */
    static const uint32_t nibble[16] = {
        0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4,
        0x4db26158, 0x5005713c, 0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c,
        0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c,
    };
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++) {
        crc = nibble[(crc ^ data[i]) & 0x0F] ^ (crc >> 4);
        crc = nibble[(crc ^ (data[i] >> 4)) & 0x0F] ^ (crc >> 4);
    }
    return crc ^ 0xFFFFFFFFu;
}

uint32_t checksum_adler32(const uint8_t *data, size_t len) {
    const uint32_t mod = 65521;
    uint32_t a = 1, b = 0;
    while (len > 0) {
        /* 5552 bytes is the most that cannot overflow b before the modulo. */
        size_t n = len < 5552 ? len : 5552;
        len -= n;
        while (n--) {
            a += *data++;
            b += a;
        }
        a %= mod;
        b %= mod;
    }
    return (b << 16) | a;
}

uint64_t checksum_fnv1a64(const uint8_t *data, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= data[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- SHA-256 ---------------------------------------------------------------- */

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) {
    return (x >> n) | (x << (32 - n));
}

/* One 64-byte block into the state h. */
static void sha256_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

void checksum_sha256(const uint8_t *data, size_t len, uint8_t digest[32]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t full = len / 64 * 64;
    for (size_t i = 0; i < full; i += 64) sha256_block(h, data + i);
    /* The tail, 0x80, zeros and the bit length (big-endian): one or two blocks. */
    uint8_t last[128] = {0};
    size_t rest = len - full;
    if (rest) memcpy(last, data + full, rest);
    last[rest] = 0x80;
    size_t blocks = rest < 56 ? 1 : 2;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++) last[blocks * 64 - 1 - i] = (uint8_t)(bits >> (8 * i));
    for (size_t i = 0; i < blocks; i++) sha256_block(h, last + 64 * i);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(h[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(h[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(h[i] >> 8);
        digest[4 * i + 3] = (uint8_t)h[i];
    }
}

/* `n` bytes of `v` (big-endian) as lowercase hex at out. */
static char *put_hex(char *out, uint64_t v, int n) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 2 * n - 1; i >= 0; i--, v >>= 4) out[i] = digits[v & 15];
    return out + 2 * n;
}

bool checksum_hex(const char *algorithm, const uint8_t *data, size_t len, char hex[65]) {
    char *end;
    if (strcmp(algorithm, "crc32") == 0) {
        end = put_hex(hex, checksum_crc32(data, len), 4);
    } else if (strcmp(algorithm, "adler32") == 0) {
        end = put_hex(hex, checksum_adler32(data, len), 4);
    } else if (strcmp(algorithm, "fnv1a64") == 0) {
        end = put_hex(hex, checksum_fnv1a64(data, len), 8);
    } else if (strcmp(algorithm, "sha256") == 0) {
        uint8_t d[32];
        checksum_sha256(data, len, d);
        end = hex;
        for (int i = 0; i < 32; i++) end = put_hex(end, d[i], 1);
    } else {
        return false;
    }
    *end = '\0';
    return true;
}

/* ---- base64 ----------------------------------------------------------------- */

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* Give up on a decoding at `at`. */
static bool b64_fail(uint8_t *buf, size_t *bad_at, size_t at) {
    free(buf);
    *bad_at = at;
    return false;
}

bool checksum_base64_decode(const char *text, size_t len, uint8_t **out, size_t *out_len,
                            size_t *bad_at) {
    uint8_t *buf = malloc(len / 4 * 3 + 3);
    if (!buf) abort();
    size_t n = 0, digits = 0, pads = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
        if (c == '=') {
            /* Padding: only after 2 or 3 digits of a quantum, up to its end. */
            if (digits % 4 < 2 || digits % 4 + pads >= 4) return b64_fail(buf, bad_at, i);
            pads++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pads) return b64_fail(buf, bad_at, i); /* no digit after padding */
        acc = acc << 6 | (uint32_t)v;
        if (++digits % 4 == 0) {
            buf[n++] = (uint8_t)(acc >> 16);
            buf[n++] = (uint8_t)(acc >> 8);
            buf[n++] = (uint8_t)acc;
            acc = 0;
        }
    }
    /* A last quantum of 2 or 3 digits (padded to 4 or not); 1 digit is short. */
    size_t tail = digits % 4;
    if (tail == 1 || (pads && tail + pads != 4)) return b64_fail(buf, bad_at, len);
    if (tail == 2) {
        buf[n++] = (uint8_t)(acc >> 4);
    } else if (tail == 3) {
        buf[n++] = (uint8_t)(acc >> 10);
        buf[n++] = (uint8_t)(acc >> 2);
    }
    *out = buf;
    *out_len = n;
    return true;
}
