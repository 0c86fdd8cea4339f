/* checksum: digests of text or base64 data, in C with the toolhost C SDK.
 *
 *   hash    {text, encoding?, algorithm}           -> {"algorithm", "hex", "bytes"}
 *   verify  {text, encoding?, algorithm, expected} -> {"match", "algorithm", "hex", "bytes"}
 *
 * The algorithms (CRC-32, Adler-32, FNV-1a 64, SHA-256) and base64 are in
 * hashes.c, tested natively by tests/run.sh. Build with
 * `sdk/c/build.sh plugins/checksum <plugins dir>`.
 */
#include <ctype.h>
#include <string.h>

#include "hashes.h"
#include "toolhost.h"

/* ---- Schemas (JSON text) --------------------------------------------------- */

#define ALGORITHM_LIST "crc32, adler32, fnv1a64, sha256"

#define COMMON_PROPERTIES                                                                          \
    "\"text\": {\"type\": \"string\", \"description\": \"The data: text, hashed as its UTF-8 "     \
    "bytes, or base64 (see `encoding`).\"},"                                                       \
    "\"encoding\": {\"type\": \"string\", \"enum\": [\"utf8\", \"base64\"], \"default\": "        \
    "\"utf8\", \"description\": \"How `text` holds the bytes: `utf8` (the text itself) or "        \
    "`base64` (binary data; standard or URL-safe alphabet, padding optional, whitespace "          \
    "ignored).\"},"                                                                                \
    "\"algorithm\": {\"type\": \"string\", \"enum\": [\"crc32\", \"adler32\", \"fnv1a64\", "      \
    "\"sha256\"], \"description\": \"crc32 (IEEE, as zip/gzip/PNG) and adler32 (zlib) give 8 hex " \
    "digits, fnv1a64 16, sha256 64.\"}"

#define DIGEST_PROPERTIES                                                                          \
    "\"algorithm\": {\"type\": \"string\"},"                                                      \
    "\"hex\": {\"type\": \"string\", \"description\": \"The digest in lowercase hex.\"},"          \
    "\"bytes\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Length of the input "   \
    "data in bytes (after base64 decoding).\"}"

static const char HASH_INPUT[] =
    "{\"type\": \"object\", \"properties\": {" COMMON_PROPERTIES "},"
    "\"required\": [\"text\", \"algorithm\"], \"additionalProperties\": false}";
static const char HASH_OUTPUT[] =
    "{\"type\": \"object\", \"properties\": {" DIGEST_PROPERTIES "},"
    "\"required\": [\"algorithm\", \"hex\", \"bytes\"]}";
static const char VERIFY_INPUT[] =
    "{\"type\": \"object\", \"properties\": {" COMMON_PROPERTIES ","
    "\"expected\": {\"type\": \"string\", \"pattern\": \"^[0-9a-fA-F]+$\", \"description\": "
    "\"The expected digest in hex (any case).\"}},"
    "\"required\": [\"text\", \"algorithm\", \"expected\"], \"additionalProperties\": false}";
static const char VERIFY_OUTPUT[] =
    "{\"type\": \"object\", \"properties\": {\"match\": {\"type\": \"boolean\"}," DIGEST_PROPERTIES
    "}, \"required\": [\"match\", \"algorithm\", \"hex\", \"bytes\"]}";

/* ---- Tools -------------------------------------------------------------------- */

/* The digest asked for by `input`: its algorithm (*alg, malloc'd), hex and
 * the byte count. On an error, it is recorded in `res` and returned. */
static toolhost_status digest(const char *input, toolhost_result *res, char **alg, char hex[65],
                              size_t *bytes) {
    char *text = NULL, *encoding = NULL;
    size_t text_len;
    uint8_t *data = NULL;
    toolhost_status st = TOOLHOST_OK;
    *alg = NULL;

    if (!toolhost_json_get_string_n(input, "text", &text, &text_len))
        return toolhost_invalid_input(res, "`text` must be a string");
    if (!toolhost_json_get_string(input, "algorithm", alg)) {
        st = toolhost_invalid_input(res, "`algorithm` must be one of " ALGORITHM_LIST);
        goto done;
    }
    toolhost_json_get_string(input, "encoding", &encoding); /* default utf8 */

    if (!encoding || strcmp(encoding, "utf8") == 0) {
        data = (uint8_t *)text, *bytes = text_len;
        text = NULL;
    } else if (strcmp(encoding, "base64") == 0) {
        size_t bad;
        if (!checksum_base64_decode(text, text_len, &data, bytes, &bad)) {
            unsigned char c = bad < text_len ? (unsigned char)text[bad] : 0;
            if (bad == text_len)
                st = toolhost_invalid_input(res, "`text` is not valid base64: it ends early "
                                                 "(an incomplete group or padding)");
            else if (c > 0x20 && c < 0x7f)
                st = toolhost_invalid_input(res, "`text` is not valid base64: unexpected '%c' at offset %zu",
                                            c, bad);
            else
                st = toolhost_invalid_input(res, "`text` is not valid base64: unexpected byte 0x%02x at offset %zu",
                                            c, bad);
            goto done;
        }
    } else {
        st = toolhost_invalid_input(res, "`encoding` must be utf8 or base64, not `%s`", encoding);
        goto done;
    }

    if (!checksum_hex(*alg, data, *bytes, hex))
        st = toolhost_invalid_input(res, "unknown algorithm `%s` (one of " ALGORITHM_LIST ")", *alg);
    else
        toolhost_log(TOOLHOST_LOG_DEBUG, "%s of %zu bytes", *alg, *bytes);
done:
    if (st != TOOLHOST_OK) {
        free(*alg);
        *alg = NULL;
    }
    free(text);
    free(encoding);
    free(data);
    return st;
}

/* {"algorithm": ..., "hex": ..., "bytes": ...} members into b. */
static void put_digest(toolhost_buf *b, const char *alg, const char *hex, size_t bytes) {
    toolhost_buf_puts(b, "\"algorithm\":");
    toolhost_buf_json_string(b, alg);
    toolhost_buf_printf(b, ",\"hex\":\"%s\",\"bytes\":%zu", hex, bytes);
}

static toolhost_status hash(const char *input, toolhost_result *res) {
    char *alg, hex[65];
    size_t bytes;
    toolhost_status st = digest(input, res, &alg, hex, &bytes);
    if (st != TOOLHOST_OK) return st;
    toolhost_buf b = TOOLHOST_BUF_INIT;
    toolhost_buf_putc(&b, '{');
    put_digest(&b, alg, hex, bytes);
    toolhost_buf_putc(&b, '}');
    free(alg);
    return toolhost_json_buf(res, &b);
}

static toolhost_status verify(const char *input, toolhost_result *res) {
    char *expected = NULL;
    if (!toolhost_json_get_string(input, "expected", &expected))
        return toolhost_invalid_input(res, "`expected` must be a hex string");
    char *alg, hex[65];
    size_t bytes;
    toolhost_status st = digest(input, res, &alg, hex, &bytes);
    if (st != TOOLHOST_OK) {
        free(expected);
        return st;
    }
    size_t n = strlen(hex);
    if (strlen(expected) != n) {
        st = toolhost_invalid_input(res, "`expected` has %zu hex digits; a %s digest has %zu",
                                    strlen(expected), alg, n);
    } else {
        bool match = true;
        for (size_t i = 0; i < n; i++)
            if (tolower((unsigned char)expected[i]) != hex[i]) match = false;
        toolhost_buf b = TOOLHOST_BUF_INIT;
        toolhost_buf_printf(&b, "{\"match\":%s,", match ? "true" : "false");
        put_digest(&b, alg, hex, bytes);
        toolhost_buf_putc(&b, '}');
        st = toolhost_json_buf(res, &b);
    }
    free(alg);
    free(expected);
    return st;
}

static const toolhost_tool TOOLS[] = {
    {"hash",
     "Checksum or hash of a text or of base64 data: CRC-32, Adler-32, FNV-1a (64-bit) or "
     "SHA-256, as lowercase hex.",
     HASH_INPUT, HASH_OUTPUT, hash},
    {"verify",
     "Check data against an expected CRC-32, Adler-32, FNV-1a (64-bit) or SHA-256 digest "
     "(hex, any case).",
     VERIFY_INPUT, VERIFY_OUTPUT, verify},
};

TOOLHOST_EXPORT_TOOLS(TOOLS)
