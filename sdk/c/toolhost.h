/* toolhost C SDK: write toolhost plugins (WebAssembly components of the WIT
 * world `plugin`, toolhost:plugin@0.1.0) in C. See sdk/c/README.md.
 *
 *     #include "toolhost.h"
 *
 *     static toolhost_status greet(const char *input, toolhost_result *res) {
 *         char *name = NULL;
 *         if (!toolhost_json_get_string(input, "name", &name))
 *             return toolhost_invalid_input(res, "`name` must be a string");
 *         toolhost_status st = toolhost_textf(res, "Hello, %s!", name);
 *         free(name);
 *         return st;
 *     }
 *
 *     static const toolhost_tool TOOLS[] = {
 *         {"greet", "Greet someone by name.",
 *          "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
 *          "\"required\":[\"name\"]}",
 *          NULL, greet},
 *     };
 *     TOOLHOST_EXPORT_TOOLS(TOOLS)
 *
 * The SDK implements the world's `toolkit` export (sdk/c/gen holds the
 * generated bindings; a plugin never needs them). Each call runs in a fresh
 * instance, so global state does not survive between calls.
 *
 * Strings handed to the host must be UTF-8. The content builders check (a
 * failed result otherwise); log, progress and error messages are repaired
 * (invalid bytes become U+FFFD).
 */
#ifndef TOOLHOST_H
#define TOOLHOST_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "json.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a handler returns. The builders below return these too, so a handler
 * can end with `return toolhost_text(res, "...");`. */
typedef enum toolhost_status {
    TOOLHOST_OK = 0,
    TOOLHOST_INVALID_INPUT = 1, /* the agent's fault: HTTP 422, kind invalid_input */
    TOOLHOST_FAILED = 2,        /* the tool's fault: HTTP 500, kind tool_error */
} toolhost_status;

/* The result of the call being built: a list of content items, or an error.
 * Opaque; only valid during the handler call it is passed to. */
typedef struct toolhost_result toolhost_result;

/* A tool's implementation. `input` is the call's input object as JSON text
 * (NUL-terminated, validated by the host against `input_schema`); read it with
 * the toolhost_json_get_* functions. It belongs to the SDK. */
typedef toolhost_status (*toolhost_handler)(const char *input, toolhost_result *res);

/* A tool, as agents see it. All strings are UTF-8 and live as long as the
 * plugin (string literals). */
typedef struct toolhost_tool {
    const char *name;          /* [A-Za-z0-9_-]+, unique; agents see <plugin>_<name> */
    const char *description;   /* for a model choosing a tool */
    const char *input_schema;  /* JSON Schema of the input: {"type":"object",...} */
    const char *output_schema; /* JSON Schema of a JSON result, or NULL */
    toolhost_handler handler;
} toolhost_tool;

/* Export the plugin's tools: put `TOOLHOST_EXPORT_TOOLS(table)` once, at file
 * scope, after a `toolhost_tool table[]` array. (Without it the link fails
 * with "undefined symbol: toolhost_plugin_tools".) */
#define TOOLHOST_EXPORT_TOOLS(table)                                                   \
    const toolhost_tool *toolhost_plugin_tools(size_t *count) {                        \
        *count = sizeof(table) / sizeof((table)[0]);                                   \
        return (table);                                                                \
    }
/* What the macro defines; the SDK calls it. */
const toolhost_tool *toolhost_plugin_tools(size_t *count);

/* ---- Content -------------------------------------------------------------------
 * Each call appends one item to the result (copying what it is given). On
 * invalid content (not UTF-8, not JSON) nothing is appended, the call's result
 * becomes a `failed` error naming the problem, and TOOLHOST_FAILED is returned. */

/* Text (plain or markdown), UTF-8. */
toolhost_status toolhost_text(toolhost_result *res, const char *text);
toolhost_status toolhost_text_n(toolhost_result *res, const char *text, size_t len);
toolhost_status toolhost_textf(toolhost_result *res, const char *fmt, ...) TOOLHOST_PRINTF(2, 3);
/* A JSON value, as JSON text (checked to be exactly one value). Build it with
 * a toolhost_buf (json.h); toolhost_json_buf() takes the buffer's contents
 * without a copy and frees the buffer. */
toolhost_status toolhost_json(toolhost_result *res, const char *json);
toolhost_status toolhost_json_buf(toolhost_result *res, toolhost_buf *buf);
/* Bytes with an IANA media type ("image/png"); `name` is an optional file name
 * (NULL: none). */
toolhost_status toolhost_binary(toolhost_result *res, const char *media_type, const void *data,
                                size_t len, const char *name);

/* Append text or JSON WITHOUT the SDK's checks: for large output you produced
 * yourself and trust, or to test what the host does with bad content (it
 * refuses it: see sdk/c/README.md). `kind` is TOOLHOST_CONTENT_TEXT or
 * TOOLHOST_CONTENT_JSON. */
typedef enum toolhost_content_kind {
    TOOLHOST_CONTENT_TEXT = 0,
    TOOLHOST_CONTENT_JSON = 1,
} toolhost_content_kind;
toolhost_status toolhost_content_unchecked(toolhost_result *res, toolhost_content_kind kind,
                                           const void *data, size_t len);

/* ---- Errors ---------------------------------------------------------------------
 * Record the call's error (printf-style message) and return its status:
 *     return toolhost_invalid_input(res, "no such unit: %s", unit);
 * An error replaces any content appended; the first error recorded wins. A
 * handler returning TOOLHOST_INVALID_INPUT / TOOLHOST_FAILED without recording
 * one gets a generic message. */
toolhost_status toolhost_invalid_input(toolhost_result *res, const char *fmt, ...)
    TOOLHOST_PRINTF(2, 3);
toolhost_status toolhost_failed(toolhost_result *res, const char *fmt, ...) TOOLHOST_PRINTF(2, 3);

/* ---- Host imports ------------------------------------------------------------ */

typedef enum toolhost_log_level {
    TOOLHOST_LOG_TRACE = 0,
    TOOLHOST_LOG_DEBUG = 1,
    TOOLHOST_LOG_INFO = 2,
    TOOLHOST_LOG_WARN = 3,
    TOOLHOST_LOG_ERROR = 4,
} toolhost_log_level;

/* A record in the host's log, tagged with the plugin, tool and session (the
 * host drops records beyond a per-call budget). printf-style. */
void toolhost_log(toolhost_log_level level, const char *fmt, ...) TOOLHOST_PRINTF(2, 3);

/* Report progress to streaming clients (SSE, MCP notifications). `done` and
 * `total` are in any unit; pass TOOLHOST_UNKNOWN (NaN) for "not known". */
#define TOOLHOST_UNKNOWN ((double)NAN)
void toolhost_progress(const char *message, double done, double total);

/* A value of the manifest's [config] table: a new string (free() it), or NULL
 * when the key is not set. */
char *toolhost_config(const char *key);

#ifdef __cplusplus
}
#endif
#endif /* TOOLHOST_H */
