/* Native tests of checksum's algorithms against published vectors. Run by run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../hashes.h"

static int failures, count;

static void check_hex(const char *alg, const char *data, size_t len, const char *want) {
    char hex[65];
    count++;
    if (!checksum_hex(alg, (const uint8_t *)data, len, hex) || strcmp(hex, want) != 0) {
        failures++;
        fprintf(stderr, "%s of %zu bytes (\"%.20s\"): got %s, want %s\n", alg, len, data, hex, want);
    }
}
#define HEX(alg, s, want) check_hex(alg, s, sizeof(s) - 1, want)

static void check_b64(const char *text, const char *want, size_t want_len, long want_bad) {
    uint8_t *out = NULL;
    size_t len = 0, bad = 0;
    bool ok = checksum_base64_decode(text, strlen(text), &out, &len, &bad);
    count++;
    if (want_bad >= 0 ? (ok || bad != (size_t)want_bad)
                      : (!ok || len != want_len || memcmp(out, want, len) != 0)) {
        failures++;
        fprintf(stderr, "base64 \"%s\": ok=%d len=%zu bad=%zu\n", text, ok, len, bad);
    }
    if (ok) free(out);
}

int main(void) {
    HEX("sha256", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    HEX("sha256", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    HEX("sha256", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    HEX("sha256",
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    char *million = malloc(1000000);
    memset(million, 'a', 1000000);
    check_hex("sha256", million, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* Lengths around the padding boundary (55, 56, 63, 64 bytes of 'a'). */
    check_hex("sha256", million, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    check_hex("sha256", million, 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    check_hex("sha256", million, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
    free(million);

    HEX("crc32", "", "00000000");
    HEX("crc32", "123456789", "cbf43926");
    HEX("crc32", "The quick brown fox jumps over the lazy dog", "414fa339");
    HEX("adler32", "", "00000001");
    HEX("adler32", "Wikipedia", "11e60398");
    HEX("adler32", "abc", "024d0127");
    HEX("fnv1a64", "", "cbf29ce484222325");
    HEX("fnv1a64", "a", "af63dc4c8601ec8c");
    HEX("fnv1a64", "foobar", "85944171f73967e8");
    char hex[65];
    count++;
    if (checksum_hex("md5", (const uint8_t *)"", 0, hex)) failures++;

    /* Adler-32 over more than 5552 bytes (the modulo chunking): 0xff x 100000
     * (vector from Python's zlib.adler32). */
    uint8_t *ff = malloc(100000);
    memset(ff, 0xff, 100000);
    check_hex("adler32", (const char *)ff, 100000, "149a302c");
    free(ff);

    check_b64("", "", 0, -1);
    check_b64("YWJj", "abc", 3, -1);
    check_b64("YQ==", "a", 1, -1);
    check_b64("YQ", "a", 1, -1);
    check_b64("YWI=", "ab", 2, -1);
    check_b64("YWI", "ab", 2, -1);
    check_b64(" YW\nJj\r\n", "abc", 3, -1);
    check_b64("_-8=", "\xff\xef", 2, -1);
    check_b64("/+8=", "\xff\xef", 2, -1);
    check_b64("YW*j", NULL, 0, 2);
    check_b64("Y", NULL, 0, 1);         /* one digit: ends early */
    check_b64("YQ=", NULL, 0, 3);       /* half padded */
    check_b64("=YQ", NULL, 0, 0);
    check_b64("YQ===", NULL, 0, 4);
    check_b64("YQ==YQ==", NULL, 0, 4);  /* digits after padding */
    check_b64("YWJ\xc3\xa9", NULL, 0, 3);

    printf("%s: %d checks, %d failed\n", __FILE__, count, failures);
    return failures ? 1 : 0;
}
