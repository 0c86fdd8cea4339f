/* Native tests of the SDK's JSON and UTF-8 helpers (json.c). Run by run.sh. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../json.h"
#include "check.h"

/* get_string that returns the value (or NULL) for terse checks. */
static char *str(const char *json, const char *key) {
    char *out = NULL;
    return toolhost_json_get_string(json, key, &out) ? out : NULL;
}

#define CHECK_GET_STR(json, key, want)    \
    do {                                  \
        char *s_ = str(json, key);        \
        CHECK_STR(s_, want);              \
        free(s_);                         \
    } while (0)

static void test_strings(void) {
    CHECK_GET_STR("{\"a\":\"x\"}", "a", "x");
    CHECK_GET_STR(" { \"a\" : \"\" } ", "a", "");
    CHECK_GET_STR("{\"a\":\"q\\\"b\\\\s\\/n\\nr\\rt\\tb\\bf\\f\"}", "a", "q\"b\\s/n\nr\rt\tb\bf\f");
    CHECK_GET_STR("{\"a\":\"\\u00e9\\u20AC\"}", "a", "\xC3\xA9\xE2\x82\xAC");
    CHECK_GET_STR("{\"a\":\"\\ud83d\\ude00!\"}", "a", "\xF0\x9F\x98\x80!");       /* pair */
    CHECK_GET_STR("{\"a\":\"\\ud800\"}", "a", "\xEF\xBF\xBD");                  /* lone high */
    CHECK_GET_STR("{\"a\":\"\\udc00x\"}", "a", "\xEF\xBF\xBDx");                /* lone low */
    CHECK_GET_STR("{\"a\":\"\\ud800\\u0041\"}", "a", "\xEF\xBF\xBD" "A");       /* high + not low */
    CHECK_GET_STR("{\"a\":\"\\ud800\\\\\"}", "a", "\xEF\xBF\xBD\\");
    CHECK_GET_STR("{\"a\":\"caf\xC3\xA9\"}", "a", "caf\xC3\xA9");               /* raw UTF-8 */
    CHECK_GET_STR("{\"a\":1,\"a\":\"last\"}", "a", "last");                     /* duplicates */
    CHECK_GET_STR("{\"a\\u0062\":\"esc\"}", "ab", "esc");                       /* escaped key */
    CHECK_GET_STR("{\"o\":{\"k\":\"inner\"},\"k\":\"outer\"}", "k", "outer");   /* top level only */
    CHECK(str("{\"o\":{\"k\":\"inner\"}}", "k") == NULL);

    /* \u0000: refused by get_string, kept by get_string_n. */
    char *s = NULL;
    size_t len = 99;
    CHECK(!toolhost_json_get_string("{\"a\":\"x\\u0000y\"}", "a", &s) && s == NULL);
    CHECK(toolhost_json_get_string_n("{\"a\":\"x\\u0000y\"}", "a", &s, &len));
    CHECK(len == 3 && memcmp(s, "x\0y", 4) == 0);
    free(s);

    /* Missing, wrong type, NULL arguments: false, *out untouched. */
    s = (char *)"untouched";
    CHECK(!toolhost_json_get_string("{\"a\":1}", "a", &s));
    CHECK(!toolhost_json_get_string("{\"a\":\"x\"}", "b", &s));
    CHECK(!toolhost_json_get_string(NULL, "a", &s));
    CHECK(!toolhost_json_get_string("{\"a\":\"x\"}", NULL, &s));
    CHECK_STR(s, "untouched");
}

static void test_numbers(void) {
    double d = -1;
    CHECK(toolhost_json_get_number("{\"n\":1.5}", "n", &d) && d == 1.5);
    CHECK(toolhost_json_get_number("{\"n\":-0}", "n", &d) && d == 0 && signbit(d));
    CHECK(toolhost_json_get_number("{\"n\":1e3}", "n", &d) && d == 1000);
    CHECK(toolhost_json_get_number("{\"n\":1E-2 }", "n", &d) && d == 0.01);
    CHECK(toolhost_json_get_number("{\"n\":2,\"m\":3}", "n", &d) && d == 2);
    d = 7;
    CHECK(!toolhost_json_get_number("{\"n\":1e400}", "n", &d) && d == 7); /* infinite */
    CHECK(!toolhost_json_get_number("{\"n\":\"1\"}", "n", &d) && d == 7);
    CHECK(!toolhost_json_get_number("{\"n\":true}", "n", &d) && d == 7);

    int64_t i = 42;
    CHECK(toolhost_json_get_int("{\"n\":3}", "n", &i) && i == 3);
    CHECK(toolhost_json_get_int("{\"n\":-7}", "n", &i) && i == -7);
    CHECK(toolhost_json_get_int("{\"n\":3.0}", "n", &i) && i == 3);
    CHECK(toolhost_json_get_int("{\"n\":1e3}", "n", &i) && i == 1000);
    CHECK(toolhost_json_get_int("{\"n\":9223372036854775807}", "n", &i) && i == INT64_MAX);
    CHECK(toolhost_json_get_int("{\"n\":-9223372036854775808}", "n", &i) && i == INT64_MIN);
    i = 42;
    CHECK(!toolhost_json_get_int("{\"n\":9223372036854775808}", "n", &i) && i == 42);
    CHECK(!toolhost_json_get_int("{\"n\":-9223372036854775809}", "n", &i) && i == 42);
    CHECK(!toolhost_json_get_int("{\"n\":99999999999999999999}", "n", &i) && i == 42);
    CHECK(!toolhost_json_get_int("{\"n\":2.5}", "n", &i) && i == 42);
    CHECK(!toolhost_json_get_int("{\"n\":1e300}", "n", &i) && i == 42);
    CHECK(!toolhost_json_get_int("{\"n\":null}", "n", &i) && i == 42);
}

static void test_other_members(void) {
    bool b = false;
    CHECK(toolhost_json_get_bool("{\"b\":true}", "b", &b) && b);
    CHECK(toolhost_json_get_bool("{\"b\":false}", "b", &b) && !b);
    b = true;
    CHECK(!toolhost_json_get_bool("{\"b\":null}", "b", &b) && b);
    CHECK(!toolhost_json_get_bool("{\"b\":1}", "b", &b) && b);

    CHECK(toolhost_json_has("{\"a\":null}", "a"));
    CHECK(!toolhost_json_has("{\"a\":null}", "b"));
    CHECK(toolhost_json_is_null("{\"a\":null}", "a"));
    CHECK(!toolhost_json_is_null("{\"a\":0}", "a"));
    CHECK(!toolhost_json_has("{}", "a"));

    char *raw = NULL;
    CHECK(toolhost_json_get_raw("{\"o\": {\"k\": [1, \"}\"]} , \"z\":1}", "o", &raw));
    CHECK_STR(raw, "{\"k\": [1, \"}\"]}");
    char *k = NULL;
    CHECK(toolhost_json_get_raw(raw, "k", &k));
    CHECK_STR(k, "[1, \"}\"]");
    CHECK(toolhost_json_array_len(k) == 2);
    char *item = NULL;
    CHECK(toolhost_json_array_get(k, 1, &item));
    CHECK_STR(item, "\"}\"");
    free(item);
    item = NULL;
    CHECK(!toolhost_json_array_get(k, 2, &item) && item == NULL);
    free(k);
    free(raw);

    CHECK(toolhost_json_array_len("[]") == 0);
    CHECK(toolhost_json_array_len(" [ [] , {} ] ") == 2);
    CHECK(toolhost_json_array_len("[1,]") == -1);
    CHECK(toolhost_json_array_len("{}") == -1);
    CHECK(toolhost_json_array_len(NULL) == -1);
}

static void test_malformed(void) {
    static const char *bad[] = {
        "", " ", "{", "}", "[1]", "\"a\"", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\" 1}",
        "{\"a\":1} x", "{\"a\":01}", "{\"a\":1.}", "{\"a\":-}", "{\"a\":.5}", "{\"a\":1e}",
        "{\"a\":tru}", "{\"a\":nul}", "{\"a\":\"x}", "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}",
        "{\"a\":\"\xC0\x80\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\u12g4\"}",
        "{\"a\":[1 2]}", "{\"a\":{\"b\" 1}}", "{\"a\":[}", "{\"a\":{]}", "{a:1}", "{'a':1}",
        "{\"a\":1}}", "{\"a\":NaN}", "{\"a\":+1}", "{\"a\":\"x\"\n,}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *s = NULL;
        double d;
        CHECK(!toolhost_json_get_string(bad[i], "a", &s) && s == NULL);
        CHECK(!toolhost_json_get_number(bad[i], "a", &d));
        CHECK(!toolhost_json_has(bad[i], "a"));
        CHECK(!toolhost_json_valid(bad[i], strlen(bad[i]), NULL) || bad[i][0] == '[' ||
              bad[i][0] == '"');
    }
}

static void test_depth(void) {
    /* Nesting up to TOOLHOST_JSON_MAX_DEPTH is fine; beyond it is refused. */
    size_t n = TOOLHOST_JSON_MAX_DEPTH;
    char *doc = malloc(2 * n + 64);
    for (int extra = 0; extra <= 1; extra++) {
        size_t depth = n - 1 + (size_t)extra, p = 0; /* + the top-level object */
        p += (size_t)sprintf(doc, "{\"a\":");
        for (size_t i = 0; i < depth; i++) doc[p++] = '[';
        for (size_t i = 0; i < depth; i++) doc[p++] = ']';
        strcpy(doc + p, ",\"b\":true}");
        bool b = false;
        CHECK(toolhost_json_get_bool(doc, "b", &b) == !extra);
        CHECK(toolhost_json_valid(doc, strlen(doc), NULL) == !extra);
    }
    free(doc);
}

static void test_valid(void) {
    static const char *good[] = {"1", " \"s\" ", "null", "true", "[[]]", "{}", "-0.5e+3",
                                 "{\"a\":[1,{\"b\":null}],\"c\":\"\\u00e9\"}", "\n[ 1 , 2 ]\t"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(toolhost_json_valid(good[i], strlen(good[i]), NULL));
    size_t at = 99;
    CHECK(!toolhost_json_valid("{\"a\":1,}", 8, &at) && at == 7);
    CHECK(!toolhost_json_valid("[1] 2", 5, &at) && at == 4);
    CHECK(!toolhost_json_valid("", 0, &at) && at == 0);
    CHECK(!toolhost_json_valid("1\0", 2, &at) && at == 1); /* NUL is not whitespace */
    CHECK(!toolhost_json_valid("not json", 8, NULL));
}

static void test_utf8(void) {
    size_t at = 99;
    CHECK(toolhost_utf8_valid("plain", 5, NULL));
    CHECK(toolhost_utf8_valid("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9, NULL));
    CHECK(toolhost_utf8_valid("", 0, NULL));
    CHECK(!toolhost_utf8_valid("a\xC0\x80", 3, &at) && at == 1);        /* overlong */
    CHECK(!toolhost_utf8_valid("\xED\xA0\x80", 3, &at) && at == 0);     /* surrogate */
    CHECK(!toolhost_utf8_valid("\xF4\x90\x80\x80", 4, NULL));           /* > U+10FFFF */
    CHECK(!toolhost_utf8_valid("ab\xE2\x82", 4, &at) && at == 2);       /* truncated */
    CHECK(!toolhost_utf8_valid("\xF5\x80\x80\x80", 4, NULL));
    CHECK(!toolhost_utf8_valid("\x80", 1, NULL));

    size_t len;
    char *s = toolhost_utf8_sanitize("a\xFF" "b\xE2\x82", 5, &len);
    CHECK_STR(s, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
    CHECK(len == strlen(s));
    free(s);
}

static void test_writer(void) {
    toolhost_buf b = TOOLHOST_BUF_INIT;
    CHECK_STR(toolhost_buf_str(&b), "");
    toolhost_buf_puts(&b, "{\"s\":");
    toolhost_buf_json_string(&b, "q\"\\\n\r\t\b\f\x01\x1f\x7f \xC3\xA9 \xFF");
    toolhost_buf_puts(&b, ",\"n\":[");
    toolhost_buf_json_number(&b, 0.1);
    toolhost_buf_putc(&b, ',');
    toolhost_buf_json_number(&b, NAN);
    toolhost_buf_putc(&b, ',');
    toolhost_buf_json_number(&b, -INFINITY);
    toolhost_buf_putc(&b, ',');
    toolhost_buf_json_int(&b, INT64_MIN);
    toolhost_buf_putc(&b, ',');
    toolhost_buf_json_bool(&b, true);
    toolhost_buf_printf(&b, ",%d],\"z\":", 7);
    toolhost_buf_json_string(&b, NULL);
    toolhost_buf_putc(&b, '}');
    CHECK_STR(toolhost_buf_str(&b),
              "{\"s\":\"q\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f\x7f \xC3\xA9 \xEF\xBF\xBD\","
              "\"n\":[0.1,null,null,-9223372036854775808,true,7],\"z\":null}");
    CHECK(toolhost_json_valid(b.data, b.len, NULL));
    CHECK(toolhost_json_is_null(b.data, "z"));
    size_t len;
    char *taken = toolhost_buf_take(&b, &len);
    CHECK(b.data == NULL && b.len == 0 && len == strlen(taken));
    free(taken);
    taken = toolhost_buf_take(&b, &len); /* empty: "" */
    CHECK_STR(taken, "");
    free(taken);

    /* Numbers read back exactly. */
    double vals[] = {0, -0.0, 1, 0.1, 1.0 / 3, 1e300, 5e-324, 123456789012345678.0, -2.5e-7};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        toolhost_buf_puts(&b, "{\"v\":");
        toolhost_buf_json_number(&b, vals[i]);
        toolhost_buf_putc(&b, '}');
        double d = NAN;
        CHECK(toolhost_json_get_number(b.data, "v", &d) && d == vals[i]);
        toolhost_buf_free(&b);
    }

    /* Quoting round-trips every valid string, big or small. */
    char big[3000];
    for (size_t i = 0; i < sizeof big - 1; i++) big[i] = (char)(1 + i % 127);
    big[sizeof big - 1] = '\0';
    const char *texts[] = {"", "plain", "\xF0\x9F\x98\x80 \\u0041 \"", big};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char *q = toolhost_json_quote(texts[i]);
        char *doc = malloc(strlen(q) + 8);
        sprintf(doc, "{\"k\":%s}", q);
        CHECK_GET_STR(doc, "k", texts[i]);
        free(doc);
        free(q);
    }
    char *f = toolhost_format("%s-%05.1f", "x", 2.25);
    CHECK_STR(f, "x-002.2");
    free(f);
}

/* Every prefix and thousands of byte mutations of a document: no crash, no
 * out-of-bounds read (the sanitizers watch), and prefixes are never valid. */
static void test_robustness(void) {
    const char *doc = "{\"text\":\"h\\u00e9llo \\ud83d\\ude00\\n\",\"n\":-12.5e1,\"b\":true,"
                      "\"o\":{\"a\":[1,2,{\"x\":null}]},\"e\":\"\"}";
    size_t n = strlen(doc);
    char *buf = malloc(n + 1);
    for (size_t cut = 0; cut < n; cut++) {
        memcpy(buf, doc, cut);
        buf[cut] = '\0';
        char *s = NULL;
        double d;
        CHECK(!toolhost_json_get_string(buf, "text", &s));
        CHECK(!toolhost_json_get_number(buf, "n", &d));
        CHECK(!toolhost_json_valid(buf, cut, NULL));
    }
    uint32_t seed = 12345;
    static const char pool[] = "{}[]\",:\\u0123456789abcdefnrtlsE+-. \x80\xC3\xED\xF0\xFF";
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(buf, doc, n + 1);
        for (int m = 0; m < 3; m++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % n;
            seed = seed * 1103515245u + 12345u;
            buf[at] = pool[(seed >> 8) % (sizeof pool - 1)];
        }
        char *s = NULL, *raw = NULL;
        double d;
        int64_t i;
        bool b;
        if (toolhost_json_get_string(buf, "text", &s)) {
            CHECK(toolhost_utf8_valid(s, strlen(s), NULL));
            free(s);
        }
        toolhost_json_get_number(buf, "n", &d);
        toolhost_json_get_int(buf, "n", &i);
        toolhost_json_get_bool(buf, "b", &b);
        if (toolhost_json_get_raw(buf, "o", &raw)) {
            char *arr = NULL;
            if (toolhost_json_get_raw(raw, "a", &arr)) {
                char *item = NULL;
                if (toolhost_json_array_get(arr, 2, &item)) free(item);
                free(arr);
            }
            free(raw);
        }
        toolhost_json_valid(buf, n, NULL);
    }
    free(buf);
}

/* The word-at-a-time fast paths: a special byte at every offset of plain
 * strings of many lengths is still seen. */
static void test_fast_paths(void) {
    char text[64], doc[128];
    for (size_t len = 1; len < 40; len++) {
        for (size_t k = 0; k < len; k++) {
            static const char *specials[] = {"\x01", "\x1f", "\xff", "\"", "\\n", "\xc3\xa9"};
            for (size_t sp = 0; sp < sizeof specials / sizeof specials[0]; sp++) {
                const char *special = specials[sp];
                size_t slen = strlen(special);
                memset(text, 'a', sizeof text); /* all of text[0, tlen) is set */
                memcpy(text + k, special, slen);
                size_t tlen = len + slen;
                text[tlen] = 'b';
                text[tlen + 1] = '\0';
                snprintf(doc, sizeof doc, "{\"k\":\"%s\"}", text);
                char *got = NULL;
                bool ok = toolhost_json_get_string(doc, "k", &got);
                bool want_ok = sp >= 4; /* an escape and a valid UTF-8 sequence */
                CHECK(ok == want_ok);
                if (ok) {
                    CHECK(strlen(got) == (sp == 4 ? tlen - 1 : tlen) + 1);
                    CHECK(got[k] == (sp == 4 ? '\n' : '\xc3'));
                    free(got);
                }
                bool utf8 = toolhost_utf8_valid(text, tlen + 1, NULL);
                CHECK(utf8 == (sp != 2));
            }
        }
    }
}

int main(void) {
    test_fast_paths();
    test_strings();
    test_numbers();
    test_other_members();
    test_malformed();
    test_depth();
    test_valid();
    test_utf8();
    test_writer();
    test_robustness();
    CHECK_DONE();
}
