/* toolhost C SDK: JSON and UTF-8 helpers (see json.h). Pure C11, no imports. */
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Memory ------------------------------------------------------------------ */

static void out_of_memory(void) {
    fputs("toolhost: out of memory\n", stderr);
    abort();
}

void *toolhost_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory();
    return p;
}

void *toolhost_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory();
    return q;
}

char *toolhost_xstrndup(const char *s, size_t n) {
    if (n == SIZE_MAX) out_of_memory();
    char *d = toolhost_xmalloc(n + 1);
    if (n) memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *toolhost_vformat(const char *fmt, va_list ap) {
    toolhost_buf b = TOOLHOST_BUF_INIT;
    toolhost_buf_vprintf(&b, fmt, ap);
    return toolhost_buf_take(&b, NULL);
}

char *toolhost_format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = toolhost_vformat(fmt, ap);
    va_end(ap);
    return s;
}

/* ---- UTF-8 ------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if it is not one. */
static size_t utf8_seq(const unsigned char *s, const unsigned char *end) {
    unsigned c = s[0], cp, min;
    size_t n;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if ((size_t)(end - s) < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

/* Encode cp (<= 0x10FFFF, not a surrogate) at out; returns the byte count. */
static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Word-at-a-time tests (4 bytes; wasm allows unaligned loads): each is
 * nonzero iff some byte of w is zero / below n (n <= 0x80) / has its top bit. */
#define ONES 0x01010101u
#define HIGHS 0x80808080u
#define HAS_ZERO(w) (((w) - ONES) & ~(w) & HIGHS)
#define HAS_LESS(w, n) (((w) - ONES * (n)) & ~(w) & HIGHS)

static uint32_t load4(const char *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* Skip ASCII 4 bytes at a time; stops at or before the first byte >= 0x80. */
static const char *skip_ascii(const char *p, const char *end) {
    while (end - p >= 4 && !(load4(p) & HIGHS)) p += 4;
    return p;
}

/* The same for bytes a JSON string holds as they are: ASCII from 0x20, except
 * '"' and '\\'. */
static const char *skip_plain(const char *p, const char *end) {
    while (end - p >= 4) {
        uint32_t w = load4(p);
        if ((w & HIGHS) | HAS_LESS(w, 0x20) | HAS_ZERO(w ^ (ONES * '"')) | HAS_ZERO(w ^ (ONES * '\\')))
            break;
        p += 4;
    }
    return p;
}

bool toolhost_utf8_valid(const char *s, size_t len, size_t *error_at) {
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        if (*p < 0x80) { /* the common case */
            p = (const unsigned char *)skip_ascii((const char *)p + 1, (const char *)end);
            continue;
        }
        size_t n = utf8_seq(p, end);
        if (!n) {
            if (error_at) *error_at = (size_t)(p - (const unsigned char *)s);
            return false;
        }
        p += n;
    }
    return true;
}

char *toolhost_utf8_sanitize(const char *s, size_t len, size_t *out_len) {
    toolhost_buf b = TOOLHOST_BUF_INIT;
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        size_t n = utf8_seq(p, end);
        if (n) {
            toolhost_buf_put(&b, p, n);
            p += n;
        } else {
            toolhost_buf_put(&b, "\xEF\xBF\xBD", 3); /* U+FFFD */
            p++;
        }
    }
    return toolhost_buf_take(&b, out_len);
}

/* ---- Scanning JSON ----------------------------------------------------------- */

/* The scanners take the text up to `end`, return the position after what they
 * scanned, or NULL with the position of the problem in s->fail. */
typedef struct {
    const char *end;
    const char *fail;
    size_t outer; /* containers around the scanned value (counted in the depth) */
} scanner;

static const char *fail_at(scanner *s, const char *at) {
    if (!s->fail) s->fail = at;
    return NULL;
}

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at p (already checked by scan_string). */
static unsigned hex4(const char *p) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) v = (v << 4) | (unsigned)hex_digit(p[i]);
    return v;
}

/* A string literal at p (which is '"'): escapes, control characters, UTF-8. */
static const char *scan_string(scanner *s, const char *p) {
    p++;
    while (p < s->end) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') { /* plain ASCII */
            p = skip_plain(p + 1, s->end);
            continue;
        }
        if (c == '"') return p + 1;
        if (c < 0x20) return fail_at(s, p);
        if (c == '\\') {
            if (s->end - p < 2) return fail_at(s, p);
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p += 2;
                break;
            case 'u':
                if (s->end - p < 6) return fail_at(s, p);
                for (int i = 2; i < 6; i++)
                    if (hex_digit(p[i]) < 0) return fail_at(s, p + i);
                p += 6;
                break;
            default:
                return fail_at(s, p);
            }
        } else {
            size_t n = utf8_seq((const unsigned char *)p, (const unsigned char *)s->end);
            if (!n) return fail_at(s, p);
            p += n;
        }
    }
    return fail_at(s, p);
}

static bool is_digit(const char *p, const char *end) {
    return p < end && *p >= '0' && *p <= '9';
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static const char *scan_number(scanner *s, const char *p) {
    const char *end = s->end;
    if (p < end && *p == '-') p++;
    if (!is_digit(p, end)) return fail_at(s, p);
    if (*p == '0') {
        p++;
    } else {
        while (is_digit(p, end)) p++;
    }
    if (p < end && *p == '.') {
        p++;
        if (!is_digit(p, end)) return fail_at(s, p);
        while (is_digit(p, end)) p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (!is_digit(p, end)) return fail_at(s, p);
        while (is_digit(p, end)) p++;
    }
    return p;
}

static const char *scan_word(scanner *s, const char *p, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(s->end - p) < n || memcmp(p, word, n) != 0) return fail_at(s, p);
    return p + n;
}

/* One value at p (no leading whitespace). Iterative: `open` is the stack of
 * the arrays ('[') and objects ('{') we are inside. */
static const char *scan_value(scanner *s, const char *p) {
    char open[TOOLHOST_JSON_MAX_DEPTH];
    size_t depth = 0;
    const char *end = s->end;
    for (;;) {
        /* A value. */
        p = skip_ws(p, end);
        if (p >= end) return fail_at(s, p);
        switch (*p) {
        case '{':
        case '[':
            if (depth + s->outer >= TOOLHOST_JSON_MAX_DEPTH) return fail_at(s, p);
            open[depth++] = *p;
            p = skip_ws(p + 1, end);
            if (p < end && *p == (open[depth - 1] == '{' ? '}' : ']')) {
                depth--;
                p++;
                break; /* an empty container: a complete value */
            }
            if (open[depth - 1] == '[') continue; /* its first element */
            goto member_key;
        case '"': p = scan_string(s, p); break;
        case 't': p = scan_word(s, p, "true"); break;
        case 'f': p = scan_word(s, p, "false"); break;
        case 'n': p = scan_word(s, p, "null"); break;
        default: p = scan_number(s, p); break;
        }
        /* After a complete value: close containers or go on to the next item. */
        for (;;) {
            if (!p) return NULL;
            if (depth == 0) return p;
            p = skip_ws(p, end);
            if (p >= end) return fail_at(s, p);
            char close = open[depth - 1] == '{' ? '}' : ']';
            if (*p == close) {
                depth--;
                p++;
                continue;
            }
            if (*p != ',') return fail_at(s, p);
            p = skip_ws(p + 1, end);
            break;
        }
        if (open[depth - 1] == '[') continue;
    member_key:
        if (p >= end || *p != '"') return fail_at(s, p);
        if (!(p = scan_string(s, p))) return NULL;
        p = skip_ws(p, end);
        if (p >= end || *p != ':') return fail_at(s, p);
        p++;
    }
}

bool toolhost_json_valid(const char *text, size_t len, size_t *error_at) {
    scanner s = {text + len, NULL, 0};
    const char *p = scan_value(&s, skip_ws(text, s.end));
    if (p) {
        p = skip_ws(p, s.end);
        if (p != s.end) fail_at(&s, p);
    }
    if (s.fail && error_at) *error_at = (size_t)(s.fail - text);
    return !s.fail;
}

/* ---- Reading ----------------------------------------------------------------- */

/* Unescape the string literal [tok, tok_end) (quotes included, already
 * scanned) into a new NUL-terminated string. */
static char *unescape(const char *tok, const char *tok_end, size_t *len) {
    const char *p = tok + 1, *e = tok_end - 1;
    char *out = toolhost_xmalloc((size_t)(e - p) + 1); /* escapes only shrink */
    size_t n = 0;
    while (p < e) {
        if (*p != '\\') { /* copy up to the next escape */
            const char *bs = memchr(p, '\\', (size_t)(e - p));
            size_t run = (size_t)((bs ? bs : e) - p);
            memcpy(out + n, p, run);
            n += run, p += run;
            continue;
        }
        char c = p[1];
        p += 2;
        switch (c) {
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned cp = hex4(p);
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && e - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
                hex4(p + 2) >= 0xDC00 && hex4(p + 2) <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4(p + 2) - 0xDC00);
                p += 6;
            } else if (cp >= 0xD800 && cp <= 0xDFFF) {
                cp = 0xFFFD; /* a lone surrogate */
            }
            n += put_utf8(out + n, cp);
            break;
        }
        default: out[n++] = c; break; /* " \ / */
        }
    }
    out[n] = '\0';
    if (len) *len = n;
    return out;
}

/* Whether the string literal [tok, tok_end) spells `key`. */
static bool key_equals(const char *tok, const char *tok_end, const char *key) {
    size_t klen = strlen(key), tlen = (size_t)(tok_end - tok) - 2;
    if (!memchr(tok + 1, '\\', tlen)) return tlen == klen && memcmp(tok + 1, key, klen) == 0;
    size_t n;
    char *s = unescape(tok, tok_end, &n);
    bool eq = n == klen && memcmp(s, key, klen) == 0;
    free(s);
    return eq;
}

/* The value of member `key` of the object `json`: [*vs, *ve). The whole text
 * must be one valid object; the last of duplicate keys wins. */
static bool find_member(const char *json, const char *key, const char **vs, const char **ve) {
    if (!json || !key) return false;
    scanner s = {json + strlen(json), NULL, 1};
    const char *p = skip_ws(json, s.end);
    bool found = false;
    if (p >= s.end || *p != '{') return false;
    p = skip_ws(p + 1, s.end);
    if (p < s.end && *p == '}') {
        p++;
    } else {
        for (;;) {
            if (p >= s.end || *p != '"') return false;
            const char *k = p;
            if (!(p = scan_string(&s, p))) return false;
            bool match = key_equals(k, p, key);
            p = skip_ws(p, s.end);
            if (p >= s.end || *p != ':') return false;
            const char *v = skip_ws(p + 1, s.end);
            if (!(p = scan_value(&s, v))) return false;
            if (match) found = true, *vs = v, *ve = p;
            p = skip_ws(p, s.end);
            if (p < s.end && *p == ',') {
                p = skip_ws(p + 1, s.end);
                continue;
            }
            if (p < s.end && *p == '}') {
                p++;
                break;
            }
            return false;
        }
    }
    return found && skip_ws(p, s.end) == s.end;
}

bool toolhost_json_get_string_n(const char *json, const char *key, char **out, size_t *len) {
    const char *vs, *ve;
    if (!find_member(json, key, &vs, &ve) || *vs != '"') return false;
    *out = unescape(vs, ve, len);
    return true;
}

bool toolhost_json_get_string(const char *json, const char *key, char **out) {
    size_t len;
    char *s;
    if (!toolhost_json_get_string_n(json, key, &s, &len)) return false;
    if (strlen(s) != len) { /* \u0000 inside */
        free(s);
        return false;
    }
    *out = s;
    return true;
}

bool toolhost_json_get_number(const char *json, const char *key, double *out) {
    const char *vs, *ve;
    if (!find_member(json, key, &vs, &ve) || !(*vs == '-' || (*vs >= '0' && *vs <= '9')))
        return false;
    /* The token is a valid JSON number followed by a delimiter (or the end),
     * which strtod parses exactly. */
    double v = strtod(vs, NULL);
    if (!isfinite(v)) return false;
    *out = v;
    return true;
}

bool toolhost_json_get_int(const char *json, const char *key, int64_t *out) {
    const char *vs, *ve;
    if (!find_member(json, key, &vs, &ve) || !(*vs == '-' || (*vs >= '0' && *vs <= '9')))
        return false;
    bool plain = true;
    for (const char *p = vs; p < ve; p++)
        if (*p == '.' || *p == 'e' || *p == 'E') plain = false;
    if (plain) { /* exact, with overflow checks */
        bool neg = *vs == '-';
        uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        for (const char *p = vs + neg; p < ve; p++) {
            unsigned d = (unsigned)(*p - '0');
            if (v > (limit - d) / 10) return false;
            v = v * 10 + d;
        }
        *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
        return true;
    }
    double d = strtod(vs, NULL);
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != floor(d)) return false;
    *out = (int64_t)d;
    return true;
}

bool toolhost_json_get_bool(const char *json, const char *key, bool *out) {
    const char *vs, *ve;
    if (!find_member(json, key, &vs, &ve) || (*vs != 't' && *vs != 'f')) return false;
    *out = *vs == 't';
    return true;
}

bool toolhost_json_has(const char *json, const char *key) {
    const char *vs, *ve;
    return find_member(json, key, &vs, &ve);
}

bool toolhost_json_is_null(const char *json, const char *key) {
    const char *vs, *ve;
    return find_member(json, key, &vs, &ve) && *vs == 'n';
}

bool toolhost_json_get_raw(const char *json, const char *key, char **out) {
    const char *vs, *ve;
    if (!find_member(json, key, &vs, &ve)) return false;
    *out = toolhost_xstrndup(vs, (size_t)(ve - vs));
    return true;
}

/* Walk the array `json`: returns its length (-1 if it is not a valid array)
 * and element `index` in [*vs, *ve) when there is one. */
static long walk_array(const char *json, size_t index, const char **vs, const char **ve) {
    if (!json) return -1;
    scanner s = {json + strlen(json), NULL, 1};
    const char *p = skip_ws(json, s.end);
    long n = 0;
    if (p >= s.end || *p != '[') return -1;
    p = skip_ws(p + 1, s.end);
    if (p < s.end && *p == ']') {
        p++;
    } else {
        for (;;) {
            const char *v = p;
            if (!(p = scan_value(&s, v))) return -1;
            if ((size_t)n == index) *vs = v, *ve = p;
            n++;
            p = skip_ws(p, s.end);
            if (p < s.end && *p == ',') {
                p = skip_ws(p + 1, s.end);
                continue;
            }
            if (p < s.end && *p == ']') {
                p++;
                break;
            }
            return -1;
        }
    }
    return skip_ws(p, s.end) == s.end ? n : -1;
}

long toolhost_json_array_len(const char *array_json) {
    const char *vs, *ve;
    return walk_array(array_json, SIZE_MAX, &vs, &ve);
}

bool toolhost_json_array_get(const char *array_json, size_t index, char **out) {
    const char *vs = NULL, *ve = NULL;
    long n = walk_array(array_json, index, &vs, &ve);
    if (n < 0 || index >= (size_t)n) return false;
    *out = toolhost_xstrndup(vs, (size_t)(ve - vs));
    return true;
}

/* ---- Writing ----------------------------------------------------------------- */

static void reserve(toolhost_buf *b, size_t extra) {
    if (extra > SIZE_MAX - b->len - 1) out_of_memory();
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return;
    size_t cap = b->cap < 32 ? 32 : b->cap;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    b->data = toolhost_xrealloc(b->data, cap);
    b->cap = cap;
}

void toolhost_buf_put(toolhost_buf *b, const void *data, size_t len) {
    reserve(b, len);
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void toolhost_buf_puts(toolhost_buf *b, const char *s) {
    toolhost_buf_put(b, s, strlen(s));
}

void toolhost_buf_putc(toolhost_buf *b, char c) {
    toolhost_buf_put(b, &c, 1);
}

void toolhost_buf_vprintf(toolhost_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return; /* an encoding error: write nothing */
    reserve(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void toolhost_buf_printf(toolhost_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    toolhost_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void toolhost_buf_json_string_n(toolhost_buf *b, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    reserve(b, len + 2);
    toolhost_buf_putc(b, '"');
    while (p < end) {
        unsigned char c = *p;
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: break;
        }
        if (esc) {
            toolhost_buf_puts(b, esc);
            p++;
        } else if (c < 0x20) {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            toolhost_buf_put(b, u, 6);
            p++;
        } else {
            size_t n = utf8_seq(p, end);
            if (n) {
                toolhost_buf_put(b, p, n);
                p += n;
            } else {
                toolhost_buf_put(b, "\xEF\xBF\xBD", 3); /* invalid UTF-8: U+FFFD */
                p++;
            }
        }
    }
    toolhost_buf_putc(b, '"');
}

void toolhost_buf_json_string(toolhost_buf *b, const char *s) {
    if (s)
        toolhost_buf_json_string_n(b, s, strlen(s));
    else
        toolhost_buf_puts(b, "null");
}

void toolhost_buf_json_number(toolhost_buf *b, double v) {
    if (!isfinite(v)) {
        toolhost_buf_puts(b, "null");
        return;
    }
    char tmp[40];
    snprintf(tmp, sizeof tmp, "%.15g", v);
    if (strtod(tmp, NULL) != v) snprintf(tmp, sizeof tmp, "%.17g", v);
    toolhost_buf_puts(b, tmp);
}

void toolhost_buf_json_int(toolhost_buf *b, int64_t v) {
    toolhost_buf_printf(b, "%lld", (long long)v);
}

void toolhost_buf_json_bool(toolhost_buf *b, bool v) {
    toolhost_buf_puts(b, v ? "true" : "false");
}

const char *toolhost_buf_str(toolhost_buf *b) {
    return b->data ? b->data : "";
}

char *toolhost_buf_take(toolhost_buf *b, size_t *len) {
    char *s = b->data ? b->data : toolhost_xstrndup("", 0);
    if (len) *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

void toolhost_buf_free(toolhost_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *toolhost_json_quote(const char *s) {
    toolhost_buf b = TOOLHOST_BUF_INIT;
    toolhost_buf_json_string(&b, s);
    return toolhost_buf_take(&b, NULL);
}
