/* toolhost C SDK: JSON and UTF-8 helpers (no WebAssembly imports).
 *
 * This half of the SDK is pure C: it compiles natively (sdk/c/tests/run.sh
 * tests it with gcc and the sanitizers) and is included by toolhost.h, so a
 * plugin needs only `#include "toolhost.h"`.
 *
 * Reading: a tool's input is a JSON object (as text) that the host has already
 * validated against the tool's input schema. The toolhost_json_get_* functions
 * read one member of such an object. They never trust the text: on malformed
 * JSON, a missing key or a value of another type they return false and leave
 * *out untouched, so a default can be set first:
 *
 *     int64_t top = 5;
 *     toolhost_json_get_int(input, "top", &top);    // keeps 5 when absent
 *
 * The whole object is scanned (nesting up to TOOLHOST_JSON_MAX_DEPTH); a key
 * present twice yields its last value, as JavaScript and serde_json do.
 *
 * Writing: toolhost_buf is a growable string; toolhost_buf_json_string() and
 * toolhost_json_quote() produce JSON string literals (quotes included) that are
 * always valid JSON, whatever bytes they are given: invalid UTF-8 becomes
 * U+FFFD.
 *
 * Memory: every `char *` these functions return is malloc'd and owned by the
 * caller (free() it). Running out of memory aborts (a trap: the host reports
 * out_of_memory), so no function here returns NULL for lack of memory.
 */
#ifndef TOOLHOST_JSON_H
#define TOOLHOST_JSON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TOOLHOST_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TOOLHOST_PRINTF(fmt, args)
#endif

/* Deepest nesting of arrays and objects the reader accepts. */
#define TOOLHOST_JSON_MAX_DEPTH 512

/* ---- Reading members of a JSON object -------------------------------------- */

/* A string member, unescaped to UTF-8 (\uXXXX surrogate pairs joined; a lone
 * surrogate becomes U+FFFD) and NUL-terminated. A string that contains
 * \u0000 is refused (false): use toolhost_json_get_string_n for those. */
bool toolhost_json_get_string(const char *json, const char *key, char **out);
/* The same with the length, NULs allowed; *out is still NUL-terminated. */
bool toolhost_json_get_string_n(const char *json, const char *key, char **out, size_t *len);
/* A number member (any JSON number). */
bool toolhost_json_get_number(const char *json, const char *key, double *out);
/* An integral number member that fits an int64_t (3, -7, 3.0 and 1e3 do;
 * 2.5 and 1e300 do not). */
bool toolhost_json_get_int(const char *json, const char *key, int64_t *out);
/* A true/false member. */
bool toolhost_json_get_bool(const char *json, const char *key, bool *out);
/* Whether the member is present, whatever its value (null included). */
bool toolhost_json_has(const char *json, const char *key);
/* Whether the member is present and null. */
bool toolhost_json_is_null(const char *json, const char *key);
/* Any member as its JSON text (an object or array to read further with these
 * functions), NUL-terminated, surrounding whitespace trimmed. */
bool toolhost_json_get_raw(const char *json, const char *key, char **out);
/* Element `index` (from 0) of a JSON array, as JSON text. Returns false past
 * the end; toolhost_json_array_len() counts them (-1: not an array). */
bool toolhost_json_array_get(const char *array_json, size_t index, char **out);
long toolhost_json_array_len(const char *array_json);

/* Whether `text` is exactly one valid JSON value (surrounding whitespace
 * allowed). On failure *error_at (if not NULL) is the byte offset of the
 * first problem. */
bool toolhost_json_valid(const char *text, size_t len, size_t *error_at);

/* ---- UTF-8 ----------------------------------------------------------------- */

/* Whether `s[0..len)` is valid UTF-8 (no overlong forms, surrogates or code
 * points above U+10FFFF). On failure *error_at (if not NULL) is the offset of
 * the first bad byte. */
bool toolhost_utf8_valid(const char *s, size_t len, size_t *error_at);
/* A NUL-terminated copy of `s[0..len)` with every invalid UTF-8 sequence
 * replaced by U+FFFD (and NUL bytes kept). */
char *toolhost_utf8_sanitize(const char *s, size_t len, size_t *out_len);

/* ---- Writing ----------------------------------------------------------------- */

/* A growable string. Start with `toolhost_buf b = TOOLHOST_BUF_INIT;` and end
 * with toolhost_buf_free(&b) or by handing it to toolhost_json_buf() /
 * toolhost_buf_take(). `data` is NUL-terminated once anything was written. */
typedef struct toolhost_buf {
    char *data;
    size_t len;
    size_t cap;
} toolhost_buf;

#define TOOLHOST_BUF_INIT {NULL, 0, 0}

void toolhost_buf_put(toolhost_buf *b, const void *data, size_t len);
void toolhost_buf_puts(toolhost_buf *b, const char *s);
void toolhost_buf_putc(toolhost_buf *b, char c);
void toolhost_buf_printf(toolhost_buf *b, const char *fmt, ...) TOOLHOST_PRINTF(2, 3);
void toolhost_buf_vprintf(toolhost_buf *b, const char *fmt, va_list ap);
/* A JSON string literal, quotes included (s == NULL writes null). */
void toolhost_buf_json_string(toolhost_buf *b, const char *s);
void toolhost_buf_json_string_n(toolhost_buf *b, const char *s, size_t len);
/* A JSON number that reads back as the same double; NaN and infinities (which
 * JSON cannot hold) are written as null. */
void toolhost_buf_json_number(toolhost_buf *b, double v);
void toolhost_buf_json_int(toolhost_buf *b, int64_t v);
void toolhost_buf_json_bool(toolhost_buf *b, bool v);
/* The NUL-terminated contents ("" when empty; never NULL); the buffer keeps
 * ownership. */
const char *toolhost_buf_str(toolhost_buf *b);
/* Take the contents (caller frees; never NULL) and reset the buffer. */
char *toolhost_buf_take(toolhost_buf *b, size_t *len);
void toolhost_buf_free(toolhost_buf *b);

/* `s` as a JSON string literal, quotes included: "a\"b" for a"b. */
char *toolhost_json_quote(const char *s);

/* malloc/realloc that abort instead of returning NULL (a trap in wasm). */
void *toolhost_xmalloc(size_t n);
void *toolhost_xrealloc(void *p, size_t n);
char *toolhost_xstrndup(const char *s, size_t n);
/* printf into a new string (caller frees). */
char *toolhost_vformat(const char *fmt, va_list ap);
char *toolhost_format(const char *fmt, ...) TOOLHOST_PRINTF(1, 2);

#ifdef __cplusplus
}
#endif
#endif /* TOOLHOST_JSON_H */
