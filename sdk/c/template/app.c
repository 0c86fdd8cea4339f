/* my-plugin: a toolhost plugin template in C (see README.md).
 *
 * A plugin is a table of tools: name, description for agents, JSON Schema of
 * the input, optional JSON Schema of a JSON result, and the handler. A handler
 * gets the input object as JSON text (already validated by the host against
 * the schema), appends content to `res` (toolhost_text, toolhost_json,
 * toolhost_binary) or records an error (toolhost_invalid_input,
 * toolhost_failed), and returns the status. Every call runs in a fresh
 * instance: nothing survives between calls.
 */
#include <string.h>

#include "toolhost.h"

static toolhost_status greet(const char *input, toolhost_result *res) {
    char *name = NULL;
    bool excited = false;
    if (!toolhost_json_get_string(input, "name", &name))
        return toolhost_invalid_input(res, "`name` must be a string");
    toolhost_json_get_bool(input, "excited", &excited); /* optional: keeps false */

    /* Trim spaces; an empty name is the agent's mistake. */
    char *start = name, *end = name + strlen(name);
    while (*start == ' ') start++;
    while (end > start && end[-1] == ' ') end--;
    *end = '\0';
    if (!*start) {
        free(name);
        return toolhost_invalid_input(res, "`name` is empty");
    }

    char *greeting = toolhost_config("greeting"); /* NULL when not set */
    toolhost_log(TOOLHOST_LOG_DEBUG, "greeting %s", start);
    toolhost_status st = toolhost_textf(res, "%s, %s%s", greeting ? greeting : "Hello", start,
                                        excited ? "!" : ".");
    free(greeting);
    free(name);
    return st;
}

static const toolhost_tool TOOLS[] = {
    {
        .name = "greet",
        .description = "Greet someone by name.",
        .input_schema = "{"
                        "\"type\": \"object\","
                        "\"properties\": {"
                        "  \"name\": {\"type\": \"string\", \"description\": \"Who to greet.\"},"
                        "  \"excited\": {\"type\": \"boolean\", \"default\": false,"
                        "    \"description\": \"End with an exclamation mark instead of a full stop.\"}"
                        "},"
                        "\"required\": [\"name\"],"
                        "\"additionalProperties\": false"
                        "}",
        .output_schema = NULL, /* a text result */
        .handler = greet,
    },
};

TOOLHOST_EXPORT_TOOLS(TOOLS)
