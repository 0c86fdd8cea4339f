/* toolhost C SDK: the `toolkit` export and the host imports over the
 * generated bindings (sdk/c/gen/plugin.h, wit-bindgen-c). See toolhost.h.
 *
 * Ownership, as wit-bindgen-c defines it: the arguments of an export belong to
 * the callee (freed here); what an export returns is malloc'd and freed by the
 * generated post-return functions after the host has copied it; the arguments
 * of an import stay the caller's; what an import returns is the caller's.
 */
#include "toolhost.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gen/plugin.h"

typedef exports_toolhost_plugin_toolkit_content_t content_t;

struct toolhost_result {
    content_t *items;
    size_t len, cap;
    toolhost_status error; /* TOOLHOST_OK while no error is recorded */
    plugin_string_t message;
};

/* A component-model string owning the malloc'd `s` (len bytes). */
static plugin_string_t owned(char *s, size_t len) {
    plugin_string_t r = {(uint8_t *)s, len};
    if (len == 0) { /* the post-return functions free only non-empty strings */
        free(s);
        r.ptr = NULL;
    }
    return r;
}

static plugin_string_t copy(const char *s, size_t len) {
    return owned(toolhost_xstrndup(s, len), len);
}

/* Stop with a message: a trap, which the host reports with the message. */
static void die(const char *fmt, ...) TOOLHOST_PRINTF(1, 2);
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("toolhost SDK: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* ---- Errors ------------------------------------------------------------------ */

static toolhost_status set_error(toolhost_result *res, toolhost_status kind, const char *fmt,
                                 va_list ap) {
    if (res->error != TOOLHOST_OK) return res->error; /* the first error wins */
    char *raw = toolhost_vformat(fmt, ap);
    size_t len;
    char *msg = toolhost_utf8_sanitize(raw, strlen(raw), &len);
    free(raw);
    res->error = kind;
    res->message = owned(msg, len);
    return kind;
}

toolhost_status toolhost_invalid_input(toolhost_result *res, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    toolhost_status st = set_error(res, TOOLHOST_INVALID_INPUT, fmt, ap);
    va_end(ap);
    return st;
}

toolhost_status toolhost_failed(toolhost_result *res, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    toolhost_status st = set_error(res, TOOLHOST_FAILED, fmt, ap);
    va_end(ap);
    return st;
}

/* ---- Content ----------------------------------------------------------------- */

static void push(toolhost_result *res, content_t item) {
    if (res->len == res->cap) {
        if (res->cap > SIZE_MAX / 2 / sizeof(content_t)) abort();
        res->cap = res->cap ? res->cap * 2 : 4;
        res->items = toolhost_xrealloc(res->items, res->cap * sizeof(content_t));
    }
    res->items[res->len++] = item;
}

static toolhost_status push_string(toolhost_result *res, uint8_t tag, plugin_string_t s) {
    content_t item;
    memset(&item, 0, sizeof item);
    item.tag = tag;
    if (tag == TOOLHOST_PLUGIN_TYPES_CONTENT_TEXT)
        item.val.text = s;
    else
        item.val.json = s;
    push(res, item);
    return TOOLHOST_OK;
}

toolhost_status toolhost_text_n(toolhost_result *res, const char *text, size_t len) {
    size_t bad;
    if (res->error != TOOLHOST_OK) return res->error;
    if (!text) return toolhost_failed(res, "text content is NULL");
    if (!toolhost_utf8_valid(text, len, &bad))
        return toolhost_failed(res, "text content is not valid UTF-8 (bad byte at offset %zu of %zu)",
                               bad, len);
    return push_string(res, TOOLHOST_PLUGIN_TYPES_CONTENT_TEXT, copy(text, len));
}

toolhost_status toolhost_text(toolhost_result *res, const char *text) {
    return toolhost_text_n(res, text, text ? strlen(text) : 0);
}

toolhost_status toolhost_textf(toolhost_result *res, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = toolhost_vformat(fmt, ap);
    va_end(ap);
    toolhost_status st = toolhost_text(res, s);
    free(s);
    return st;
}

/* Check `json` and append it, taking ownership of the malloc'd buffer. */
static toolhost_status push_json(toolhost_result *res, char *json, size_t len) {
    size_t at;
    if (res->error != TOOLHOST_OK) {
        free(json);
        return res->error;
    }
    if (!toolhost_json_valid(json, len, &at)) {
        free(json);
        return toolhost_failed(res, "JSON content is not valid JSON (error at byte %zu of %zu)", at,
                               len);
    }
    return push_string(res, TOOLHOST_PLUGIN_TYPES_CONTENT_JSON, owned(json, len));
}

toolhost_status toolhost_json(toolhost_result *res, const char *json) {
    if (!json) return toolhost_failed(res, "JSON content is NULL");
    size_t len = strlen(json);
    return push_json(res, toolhost_xstrndup(json, len), len);
}

toolhost_status toolhost_json_buf(toolhost_result *res, toolhost_buf *buf) {
    size_t len;
    char *json = toolhost_buf_take(buf, &len);
    return push_json(res, json, len);
}

toolhost_status toolhost_binary(toolhost_result *res, const char *media_type, const void *data,
                                size_t len, const char *name) {
    if (res->error != TOOLHOST_OK) return res->error;
    if (!media_type || !*media_type || !toolhost_utf8_valid(media_type, strlen(media_type), NULL))
        return toolhost_failed(res, "binary content needs a media type (UTF-8), e.g. image/png");
    if (name && !toolhost_utf8_valid(name, strlen(name), NULL))
        return toolhost_failed(res, "the name of binary content is not valid UTF-8");
    if (!data && len) return toolhost_failed(res, "binary content is NULL");
    content_t item;
    memset(&item, 0, sizeof item);
    item.tag = TOOLHOST_PLUGIN_TYPES_CONTENT_BINARY;
    item.val.binary.media_type = copy(media_type, strlen(media_type));
    if (len) {
        item.val.binary.data.ptr = toolhost_xmalloc(len);
        memcpy(item.val.binary.data.ptr, data, len);
        item.val.binary.data.len = len;
    }
    item.val.binary.name.is_some = name != NULL;
    if (name) item.val.binary.name.val = copy(name, strlen(name));
    push(res, item);
    return TOOLHOST_OK;
}

toolhost_status toolhost_content_unchecked(toolhost_result *res, toolhost_content_kind kind,
                                           const void *data, size_t len) {
    if (res->error != TOOLHOST_OK) return res->error;
    if (!data && len) return toolhost_failed(res, "content is NULL");
    uint8_t tag = kind == TOOLHOST_CONTENT_JSON ? TOOLHOST_PLUGIN_TYPES_CONTENT_JSON
                                                : TOOLHOST_PLUGIN_TYPES_CONTENT_TEXT;
    return push_string(res, tag, copy(data ? data : "", len));
}

/* ---- The toolkit export -------------------------------------------------------- */

static void check_string(size_t i, const char *tool, const char *what, const char *s) {
    if (!s) die("tool #%zu (%s) has no %s (NULL)", i, tool ? tool : "?", what);
    if (!toolhost_utf8_valid(s, strlen(s), NULL))
        die("the %s of tool #%zu (%s) is not valid UTF-8", what, i, tool ? tool : "?");
}

void exports_toolhost_plugin_toolkit_list_tools(exports_toolhost_plugin_toolkit_list_tool_info_t *ret) {
    size_t n = 0;
    const toolhost_tool *tools = toolhost_plugin_tools(&n);
    if (n && !tools) die("toolhost_plugin_tools returned NULL");
    exports_toolhost_plugin_toolkit_tool_info_t *list = NULL;
    if (n) {
        if (n > SIZE_MAX / sizeof *list) abort();
        list = toolhost_xmalloc(n * sizeof *list);
    }
    for (size_t i = 0; i < n; i++) {
        const toolhost_tool *t = &tools[i];
        check_string(i, t->name, "name", t->name);
        check_string(i, t->name, "description", t->description);
        check_string(i, t->name, "input_schema", t->input_schema);
        if (t->output_schema) check_string(i, t->name, "output_schema", t->output_schema);
        if (!t->handler) die("tool #%zu (%s) has no handler (NULL)", i, t->name);
        list[i].name = copy(t->name, strlen(t->name));
        list[i].description = copy(t->description, strlen(t->description));
        list[i].input_schema = copy(t->input_schema, strlen(t->input_schema));
        list[i].output_schema.is_some = t->output_schema != NULL;
        if (t->output_schema)
            list[i].output_schema.val = copy(t->output_schema, strlen(t->output_schema));
        else
            memset(&list[i].output_schema.val, 0, sizeof list[i].output_schema.val);
    }
    ret->ptr = list;
    ret->len = n;
}

bool exports_toolhost_plugin_toolkit_call(plugin_string_t *name, plugin_string_t *input,
                                          exports_toolhost_plugin_toolkit_list_content_t *ret,
                                          exports_toolhost_plugin_toolkit_tool_error_t *err) {
    size_t n = 0;
    const toolhost_tool *tools = toolhost_plugin_tools(&n), *tool = NULL;
    for (size_t i = 0; i < n && tools; i++) {
        if (tools[i].name && strlen(tools[i].name) == name->len &&
            memcmp(tools[i].name, name->ptr, name->len) == 0) {
            tool = &tools[i];
            break;
        }
    }

    struct toolhost_result res;
    memset(&res, 0, sizeof res);
    toolhost_status st;
    if (!tool || !tool->handler) {
        st = toolhost_invalid_input(&res, "unknown tool `%.*s`", (int)name->len, (const char *)name->ptr);
    } else {
        char *in = toolhost_xstrndup((const char *)input->ptr, input->len);
        st = tool->handler(in, &res);
        free(in);
        if (st != TOOLHOST_OK && res.error == TOOLHOST_OK) {
            if (st == TOOLHOST_INVALID_INPUT)
                toolhost_invalid_input(&res, "tool `%s` refused its input (no message given)", tool->name);
            else
                toolhost_failed(&res, "tool `%s` failed (status %d, no message given)", tool->name, (int)st);
        }
    }
    plugin_string_free(name);
    plugin_string_free(input);

    if (res.error != TOOLHOST_OK) {
        for (size_t i = 0; i < res.len; i++) exports_toolhost_plugin_toolkit_content_free(&res.items[i]);
        free(res.items);
        memset(err, 0, sizeof *err);
        if (res.error == TOOLHOST_INVALID_INPUT) {
            err->tag = TOOLHOST_PLUGIN_TYPES_TOOL_ERROR_INVALID_INPUT;
            err->val.invalid_input = res.message;
        } else {
            err->tag = TOOLHOST_PLUGIN_TYPES_TOOL_ERROR_FAILED;
            err->val.failed = res.message;
        }
        return false;
    }
    if (res.len == 0) {
        free(res.items);
        res.items = NULL;
    }
    ret->ptr = res.items;
    ret->len = res.len;
    return true;
}

/* ---- Host imports ------------------------------------------------------------ */

/* A UTF-8 (repaired) component-model copy of `s`; free with plugin_string_free. */
static plugin_string_t host_string(const char *s) {
    size_t len;
    char *clean = toolhost_utf8_sanitize(s ? s : "", s ? strlen(s) : 0, &len);
    return owned(clean, len);
}

void toolhost_log(toolhost_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *raw = toolhost_vformat(fmt, ap);
    va_end(ap);
    plugin_string_t msg = host_string(raw);
    free(raw);
    if ((unsigned)level > TOOLHOST_LOG_ERROR) level = TOOLHOST_LOG_ERROR;
    toolhost_plugin_host_log((toolhost_plugin_host_log_level_t)level, &msg);
    plugin_string_free(&msg);
}

void toolhost_progress(const char *message, double done, double total) {
    toolhost_plugin_host_progress_t p;
    memset(&p, 0, sizeof p);
    p.message = host_string(message);
    p.done.is_some = !isnan(done);
    p.done.val = p.done.is_some ? done : 0;
    p.total.is_some = !isnan(total);
    p.total.val = p.total.is_some ? total : 0;
    toolhost_plugin_host_report_progress(&p);
    plugin_string_free(&p.message);
}

char *toolhost_config(const char *key) {
    plugin_string_t k = host_string(key), value;
    bool set = toolhost_plugin_host_config(&k, &value);
    plugin_string_free(&k);
    if (!set) return NULL;
    char *v = toolhost_xstrndup((const char *)value.ptr, value.len);
    plugin_string_free(&value);
    return v;
}
