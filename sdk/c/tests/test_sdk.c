/* Native tests of the SDK's export and import glue (toolhost.c) through the
 * generated bindings (gen/plugin.c), with the three wasm imports stubbed here.
 * The ABI-level entry points and post-return functions run too, so the
 * sanitizers check the ownership rules (nothing freed twice, nothing leaked).
 * Run by run.sh. */
#include <math.h>
#include <stdlib.h>

#include "../gen/plugin.h"
#include "../toolhost.h"
#include "check.h"

/* ---- Stubs of what the component model provides ------------------------------- */

/* Defined in gen/plugin.c, not declared in plugin.h. */
void *cabi_realloc(void *ptr, size_t old_size, size_t align, size_t new_size);
uint8_t *__wasm_export_exports_toolhost_plugin_toolkit_list_tools(void);
void __wasm_export_exports_toolhost_plugin_toolkit_list_tools_post_return(uint8_t *);
uint8_t *__wasm_export_exports_toolhost_plugin_toolkit_call(uint8_t *, size_t, uint8_t *, size_t);
void __wasm_export_exports_toolhost_plugin_toolkit_call_post_return(uint8_t *);

/* And the imports plugin.c calls. */
void __component_type_object_force_link_plugin(void);
void __wasm_import_toolhost_plugin_host_log(int32_t level, uint8_t *msg, size_t len);
void __wasm_import_toolhost_plugin_host_report_progress(uint8_t *msg, size_t len, int32_t has_done,
                                                        double done, int32_t has_total, double total);
void __wasm_import_toolhost_plugin_host_config(uint8_t *key, size_t len, uint8_t *ret);

void __component_type_object_force_link_plugin(void) {}

static char last_log[256];
static int last_level = -1;
void __wasm_import_toolhost_plugin_host_log(int32_t level, uint8_t *msg, size_t len) {
    last_level = level;
    snprintf(last_log, sizeof last_log, "%.*s", (int)len, (const char *)msg);
}

static char last_progress[256];
static int progress_has_done, progress_has_total;
static double progress_done, progress_total;
void __wasm_import_toolhost_plugin_host_report_progress(uint8_t *msg, size_t len, int32_t has_done,
                                                        double done, int32_t has_total, double total) {
    snprintf(last_progress, sizeof last_progress, "%.*s", (int)len, (const char *)msg);
    progress_has_done = has_done, progress_done = done;
    progress_has_total = has_total, progress_total = total;
}

/* config: "greeting" -> "Hi", "empty" -> "", anything else unset. The value
 * is allocated as the host would (through cabi_realloc) and owned by the SDK. */
void __wasm_import_toolhost_plugin_host_config(uint8_t *key, size_t len, uint8_t *ret) {
    const char *value = NULL;
    if (len == 8 && memcmp(key, "greeting", 8) == 0) value = "Hi";
    if (len == 5 && memcmp(key, "empty", 5) == 0) value = "";
    ret[0] = value != NULL;
    if (value) {
        size_t n = strlen(value);
        uint8_t *p = cabi_realloc(NULL, 0, 1, n);
        memcpy(p, value, n);
        *(uint8_t **)(ret + sizeof(void *)) = p;
        *(size_t *)(ret + 2 * sizeof(void *)) = n;
    }
}

/* ---- A plugin ------------------------------------------------------------------- */

static toolhost_status t_text(const char *input, toolhost_result *res) {
    char *who = NULL;
    if (!toolhost_json_get_string(input, "who", &who)) return toolhost_invalid_input(res, "no `who`");
    toolhost_status st = toolhost_textf(res, "hello %s", who);
    free(who);
    return st;
}
static toolhost_status t_many(const char *input, toolhost_result *res) {
    (void)input;
    toolhost_text(res, "");
    toolhost_json(res, " {\"a\": [1, 2]} ");
    toolhost_buf b = TOOLHOST_BUF_INIT;
    toolhost_buf_json_string(&b, "built");
    toolhost_json_buf(res, &b);
    toolhost_binary(res, "image/png", "\x89PNG", 4, "a.png");
    toolhost_binary(res, "application/octet-stream", NULL, 0, NULL);
    return TOOLHOST_OK;
}
static toolhost_status t_nothing(const char *input, toolhost_result *res) {
    (void)input, (void)res;
    return TOOLHOST_OK;
}
static toolhost_status t_bad_json(const char *input, toolhost_result *res) {
    (void)input;
    toolhost_text(res, "dropped");
    return toolhost_json(res, "{\"a\":}");
}
static toolhost_status t_bad_utf8(const char *input, toolhost_result *res) {
    (void)input;
    return toolhost_text(res, "ok \xFF");
}
static toolhost_status t_invalid(const char *input, toolhost_result *res) {
    (void)input;
    toolhost_text(res, "dropped");
    toolhost_invalid_input(res, "bad %s: \xFF", "unit");
    return toolhost_failed(res, "ignored: the first error wins");
}
static toolhost_status t_silent_fail(const char *input, toolhost_result *res) {
    (void)input, (void)res;
    return TOOLHOST_FAILED;
}
static toolhost_status t_silent_invalid(const char *input, toolhost_result *res) {
    (void)input, (void)res;
    return TOOLHOST_INVALID_INPUT;
}
static toolhost_status t_unchecked(const char *input, toolhost_result *res) {
    (void)input;
    toolhost_content_unchecked(res, TOOLHOST_CONTENT_JSON, "{nope", 5);
    return toolhost_content_unchecked(res, TOOLHOST_CONTENT_TEXT, "\xFF", 1);
}
static toolhost_status t_host(const char *input, toolhost_result *res) {
    (void)input;
    toolhost_log(TOOLHOST_LOG_WARN, "n=%d \xFF", 3);
    toolhost_progress("half", 1, 2);
    char *g = toolhost_config("greeting"), *e = toolhost_config("empty"), *u = toolhost_config("nope");
    toolhost_status st = toolhost_textf(res, "%s|%s|%s", g, e, u ? u : "(unset)");
    toolhost_progress(NULL, TOOLHOST_UNKNOWN, TOOLHOST_UNKNOWN);
    free(g), free(e), free(u);
    return st;
}

#define OBJ "{\"type\":\"object\"}"
static const toolhost_tool TOOLS[] = {
    {"text", "Text.", "{\"type\":\"object\",\"properties\":{\"who\":{\"type\":\"string\"}}}", NULL, t_text},
    {"many", "Many.", OBJ, "{\"type\":\"object\"}", t_many},
    {"nothing", "Nothing.", OBJ, NULL, t_nothing},
    {"bad_json", "Bad JSON.", OBJ, NULL, t_bad_json},
    {"bad_utf8", "Bad UTF-8.", OBJ, NULL, t_bad_utf8},
    {"invalid", "Invalid.", OBJ, NULL, t_invalid},
    {"silent_fail", "Fails silently.", OBJ, NULL, t_silent_fail},
    {"silent_invalid", "Refuses silently.", OBJ, NULL, t_silent_invalid},
    {"unchecked", "Unchecked.", OBJ, NULL, t_unchecked},
    {"host", "Host imports.", OBJ, NULL, t_host},
};
TOOLHOST_EXPORT_TOOLS(TOOLS)

/* ---- Driving the export as the host would ------------------------------------- */

typedef exports_toolhost_plugin_toolkit_list_content_t content_list;
typedef exports_toolhost_plugin_toolkit_tool_error_t tool_error;

/* Call `tool` with `input`; the arguments are heap copies, as the host passes
 * them (the callee frees them). */
static bool call(const char *tool, const char *input, content_list *ok, tool_error *err) {
    plugin_string_t name, in;
    plugin_string_dup(&name, tool);
    plugin_string_dup(&in, input);
    memset(ok, 0, sizeof *ok);
    memset(err, 0, sizeof *err);
    return exports_toolhost_plugin_toolkit_call(&name, &in, ok, err);
}

static char *str_of(plugin_string_t s) {
    char *c = malloc(s.len + 1);
    if (s.len) memcpy(c, s.ptr, s.len);
    c[s.len] = '\0';
    return c;
}

#define CHECK_PSTR(pstr, want)        \
    do {                              \
        char *c_ = str_of(pstr);      \
        CHECK_STR(c_, want);          \
        free(c_);                     \
    } while (0)

static void test_list_tools(void) {
    exports_toolhost_plugin_toolkit_list_tool_info_t list;
    exports_toolhost_plugin_toolkit_list_tools(&list);
    CHECK(list.len == sizeof TOOLS / sizeof TOOLS[0]);
    CHECK_PSTR(list.ptr[0].name, "text");
    CHECK_PSTR(list.ptr[0].description, "Text.");
    CHECK(!list.ptr[0].output_schema.is_some);
    CHECK(list.ptr[1].output_schema.is_some);
    CHECK_PSTR(list.ptr[1].output_schema.val, "{\"type\":\"object\"}");
    exports_toolhost_plugin_toolkit_list_tool_info_free(&list);

    /* The ABI entry point and its post-return (frees what list-tools made). */
    uint8_t *area = __wasm_export_exports_toolhost_plugin_toolkit_list_tools();
    CHECK(*(size_t *)(area + sizeof(void *)) == sizeof TOOLS / sizeof TOOLS[0]);
    __wasm_export_exports_toolhost_plugin_toolkit_list_tools_post_return(area);
}

static void test_calls(void) {
    content_list ok;
    tool_error err;

    CHECK(call("text", "{\"who\":\"ada\"}", &ok, &err));
    CHECK(ok.len == 1 && ok.ptr[0].tag == TOOLHOST_PLUGIN_TYPES_CONTENT_TEXT);
    CHECK_PSTR(ok.ptr[0].val.text, "hello ada");
    exports_toolhost_plugin_toolkit_list_content_free(&ok);

    CHECK(!call("text", "{}", &ok, &err));
    CHECK(err.tag == TOOLHOST_PLUGIN_TYPES_TOOL_ERROR_INVALID_INPUT);
    CHECK_PSTR(err.val.invalid_input, "no `who`");
    exports_toolhost_plugin_toolkit_tool_error_free(&err);

    CHECK(call("many", "{}", &ok, &err));
    CHECK(ok.len == 5);
    CHECK(ok.ptr[0].tag == TOOLHOST_PLUGIN_TYPES_CONTENT_TEXT && ok.ptr[0].val.text.len == 0);
    CHECK(ok.ptr[1].tag == TOOLHOST_PLUGIN_TYPES_CONTENT_JSON);
    CHECK_PSTR(ok.ptr[1].val.json, " {\"a\": [1, 2]} ");
    CHECK_PSTR(ok.ptr[2].val.json, "\"built\"");
    CHECK(ok.ptr[3].tag == TOOLHOST_PLUGIN_TYPES_CONTENT_BINARY);
    CHECK_PSTR(ok.ptr[3].val.binary.media_type, "image/png");
    CHECK(ok.ptr[3].val.binary.data.len == 4 && memcmp(ok.ptr[3].val.binary.data.ptr, "\x89PNG", 4) == 0);
    CHECK(ok.ptr[3].val.binary.name.is_some);
    CHECK_PSTR(ok.ptr[3].val.binary.name.val, "a.png");
    CHECK(ok.ptr[4].val.binary.data.len == 0 && !ok.ptr[4].val.binary.name.is_some);
    exports_toolhost_plugin_toolkit_list_content_free(&ok);

    CHECK(call("nothing", "{}", &ok, &err) && ok.len == 0);

    CHECK(!call("bad_json", "{}", &ok, &err) && err.tag == TOOLHOST_PLUGIN_TYPES_TOOL_ERROR_FAILED);
    CHECK_PSTR(err.val.failed, "JSON content is not valid JSON (error at byte 5 of 6)");
    exports_toolhost_plugin_toolkit_tool_error_free(&err);

    CHECK(!call("bad_utf8", "{}", &ok, &err) && err.tag == TOOLHOST_PLUGIN_TYPES_TOOL_ERROR_FAILED);
    CHECK_PSTR(err.val.failed, "text content is not valid UTF-8 (bad byte at offset 3 of 4)");
    exports_toolhost_plugin_toolkit_tool_error_free(&err);

    CHECK(!call("invalid", "{}", &ok, &err) && err.tag == TOOLHOST_PLUGIN_TYPES_TOOL_ERROR_INVALID_INPUT);
    CHECK_PSTR(err.val.invalid_input, "bad unit: \xEF\xBF\xBD");
    exports_toolhost_plugin_toolkit_tool_error_free(&err);

    CHECK(!call("silent_fail", "{}", &ok, &err) && err.tag == TOOLHOST_PLUGIN_TYPES_TOOL_ERROR_FAILED);
    CHECK_PSTR(err.val.failed, "tool `silent_fail` failed (status 2, no message given)");
    exports_toolhost_plugin_toolkit_tool_error_free(&err);

    CHECK(!call("silent_invalid", "{}", &ok, &err) && err.tag == TOOLHOST_PLUGIN_TYPES_TOOL_ERROR_INVALID_INPUT);
    exports_toolhost_plugin_toolkit_tool_error_free(&err);

    CHECK(!call("nope", "{}", &ok, &err) && err.tag == TOOLHOST_PLUGIN_TYPES_TOOL_ERROR_INVALID_INPUT);
    CHECK_PSTR(err.val.invalid_input, "unknown tool `nope`");
    exports_toolhost_plugin_toolkit_tool_error_free(&err);

    CHECK(call("unchecked", "{}", &ok, &err) && ok.len == 2);
    CHECK_PSTR(ok.ptr[0].val.json, "{nope");
    exports_toolhost_plugin_toolkit_list_content_free(&ok);

    CHECK(call("host", "{}", &ok, &err) && ok.len == 1);
    CHECK_PSTR(ok.ptr[0].val.text, "Hi||(unset)");
    CHECK(last_level == TOOLHOST_LOG_WARN);
    CHECK_STR(last_log, "n=3 \xEF\xBF\xBD");
    CHECK_STR(last_progress, "");
    CHECK(!progress_has_done && !progress_has_total);
    exports_toolhost_plugin_toolkit_list_content_free(&ok);
    toolhost_progress("p", 1, 2);
    CHECK_STR(last_progress, "p");
    CHECK(progress_has_done && progress_done == 1 && progress_has_total && progress_total == 2);
}

/* The ABI entry point, as the host calls it, then its post-return. */
static void test_abi(void) {
    const char *name = "many", *input = "{}";
    uint8_t *n = malloc(4), *in = malloc(2);
    memcpy(n, name, 4);
    memcpy(in, input, 2);
    uint8_t *area = __wasm_export_exports_toolhost_plugin_toolkit_call(n, 4, in, 2);
    CHECK(area[0] == 0);                                      /* ok */
    CHECK(*(size_t *)(area + 2 * sizeof(void *)) == 5);       /* 5 items */
    __wasm_export_exports_toolhost_plugin_toolkit_call_post_return(area);

    n = malloc(8);
    memcpy(n, "bad_json", 8);
    area = __wasm_export_exports_toolhost_plugin_toolkit_call(n, 8, NULL, 0);
    CHECK(area[0] == 1 && area[sizeof(void *)] == 1);         /* err(failed) */
    __wasm_export_exports_toolhost_plugin_toolkit_call_post_return(area);

    n = malloc(7);
    memcpy(n, "nothing", 7);
    area = __wasm_export_exports_toolhost_plugin_toolkit_call(n, 7, NULL, 0);
    CHECK(area[0] == 0 && *(size_t *)(area + 2 * sizeof(void *)) == 0);
    __wasm_export_exports_toolhost_plugin_toolkit_call_post_return(area);
}

int main(void) {
    test_list_tools();
    test_calls();
    test_abi();
    CHECK_DONE();
}
