//! `my-plugin`: a template toolhost plugin with one tool, `greet`.
//!
//! A tool is a plain function from one input type to `Result<O, ToolError>`.
//! The input derives `Deserialize` and `JsonSchema`; its doc comments become
//! the descriptions in the JSON Schema that agents see, and the host validates
//! every call against that schema before your function runs. `O` is a
//! `String` (text), `Json<T>` (typed JSON), a `Content` or a `Vec<Content>`.
//!
//! Agents see the tool as `<plugin>_<function>`: here `my-plugin_greet`.

use toolhost_sdk::{Deserialize, JsonSchema, ToolError};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GreetInput {
    /// Who to greet.
    name: String,
    /// Greet loudly (default false).
    shout: Option<bool>,
}

/// Greet someone by name.
fn greet(input: GreetInput) -> Result<String, ToolError> {
    let name = input.name.trim();
    if name.is_empty() {
        // The agent's fault: it may retry with other input. Use
        // `ToolError::failed` when the tool itself fails on valid input.
        return Err(ToolError::invalid_input("name is empty"));
    }
    let greeting = format!("Hello, {name}!");
    Ok(if input.shout.unwrap_or(false) {
        greeting.to_uppercase()
    } else {
        greeting
    })
}

// Export the tools: `function: "description for a language model"`, one per tool.
toolhost_sdk::toolkit! {
    greet: "Greet someone by name.",
}
