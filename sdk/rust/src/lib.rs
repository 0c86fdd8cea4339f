//! Write toolhost plugins in Rust.
//!
//! A tool is a plain function from a typed input to a result. The input type
//! derives `Deserialize` and `JsonSchema`; the SDK derives the JSON Schema the
//! host shows to agents and validates calls against, so no schema is written by
//! hand. One [`toolkit!`] invocation exports the functions as the plugin's tools.
//!
//! ```ignore
//! use toolhost_sdk::{Deserialize, JsonSchema, ToolError};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct GreetInput {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! fn greet(input: GreetInput) -> Result<String, ToolError> {
//!     Ok(format!("Hello, {}!", input.name))
//! }
//!
//! toolhost_sdk::toolkit! {
//!     greet: "Greet someone by name.",
//! }
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --release`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the component to drop into the plugins
//! directory, next to a `<name>.toml` manifest.

extern crate self as toolhost_sdk;

use serde::de::DeserializeOwned;

pub use schemars::{self, JsonSchema};
pub use serde::{self, Deserialize, Serialize};
pub use serde_json;

/// Bindings generated from the WIT package `toolhost:plugin@0.1.0` (`wit/` at the
/// repository root), world `plugin-host` (with `toolhost:input/ask@0.1.0`,
/// imported only by plugins that call [`input::ask`], and
/// `toolhost:workspace/changes@0.1.0`, only by those that call
/// [`host::workspace_token`]). Plugin code rarely needs them directly.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "plugin-host",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "__export_toolkit",
        default_bindings_module: "toolhost_sdk::bindings",
        runtime_path: "toolhost_sdk::__private::wit_bindgen::rt",
    });
}

pub use bindings::toolhost::plugin::types::{
    Binary, Content, LogLevel, Progress, ToolError, ToolInfo,
};

mod output;
pub use output::{IntoContents, Json};

pub mod host;
#[cfg(feature = "http")]
pub mod http;
pub mod input;

impl ToolError {
    /// The input was wrong (the agent's fault): it may retry with other input.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        ToolError::InvalidInput(message.into())
    }

    /// The tool failed while running on valid input.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed(message.into())
    }
}

impl From<std::io::Error> for ToolError {
    fn from(err: std::io::Error) -> Self {
        match err.kind() {
            std::io::ErrorKind::NotFound
            | std::io::ErrorKind::AlreadyExists
            | std::io::ErrorKind::InvalidInput
            | std::io::ErrorKind::PermissionDenied
            | std::io::ErrorKind::IsADirectory
            | std::io::ErrorKind::NotADirectory
            | std::io::ErrorKind::InvalidFilename => ToolError::InvalidInput(err.to_string()),
            _ => ToolError::Failed(err.to_string()),
        }
    }
}

/// A text content item.
pub fn text(text: impl Into<String>) -> Content {
    Content::Text(text.into())
}

/// A JSON content item holding `value`.
pub fn json<T: Serialize>(value: &T) -> Result<Content, ToolError> {
    serde_json::to_string(value)
        .map(Content::Json)
        .map_err(|e| ToolError::failed(format!("result is not serialisable as JSON: {e}")))
}

/// A binary content item, e.g. `binary("image/png", bytes)`.
pub fn binary(media_type: impl Into<String>, data: Vec<u8>) -> Content {
    Content::Binary(Binary {
        media_type: media_type.into(),
        data,
        name: None,
    })
}

/// Implementation details of [`toolkit!`]; not a stable API.
#[doc(hidden)]
pub mod __private {
    use super::*;

    pub use crate::bindings::exports::toolhost::plugin::toolkit::Guest;
    pub use wit_bindgen;

    /// The descriptor of one tool function, its schemas derived from its types.
    pub fn describe<I, O, F>(name: &str, description: &str, _tool: &F) -> ToolInfo
    where
        F: Fn(I) -> Result<O, ToolError>,
        I: DeserializeOwned + JsonSchema,
        O: IntoContents,
    {
        ToolInfo {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema: schema_text::<I>(),
            output_schema: O::output_schema(),
        }
    }

    /// Decode `input`, run the tool function, encode its result.
    pub fn invoke<I, O, F>(tool: &F, input: &str) -> Result<Vec<Content>, ToolError>
    where
        F: Fn(I) -> Result<O, ToolError>,
        I: DeserializeOwned + JsonSchema,
        O: IntoContents,
    {
        let input: I = serde_json::from_str(input)
            .map_err(|e| ToolError::invalid_input(format!("input does not match the tool: {e}")))?;
        tool(input)?.into_contents()
    }

    pub fn unknown_tool(name: &str) -> ToolError {
        ToolError::invalid_input(format!("this plugin has no tool named `{name}`"))
    }

    pub fn schema_text<T: JsonSchema>() -> String {
        let schema = schemars::schema_for!(T);
        serde_json::to_string(&schema).expect("a derived JSON Schema serialises")
    }
}

/// Export functions as the plugin's tools: `name: "description"`, one per tool.
///
/// Each function takes one argument, a type deriving `Deserialize` and
/// `JsonSchema` (its doc comments become the schema's descriptions), and returns
/// `Result<O, ToolError>` where `O` is text (`String`), `Json<T>`, a `Content` or
/// a `Vec<Content>` (see [`IntoContents`]). The tool's name is the function's
/// name; the host shows it to agents as `<plugin>_<name>`.
#[macro_export]
macro_rules! toolkit {
    ($($tool:ident : $description:expr),+ $(,)?) => {
        #[doc(hidden)]
        pub struct __ToolhostToolkit;

        impl $crate::__private::Guest for __ToolhostToolkit {
            fn list_tools() -> ::std::vec::Vec<$crate::ToolInfo> {
                ::std::vec![
                    $($crate::__private::describe(::core::stringify!($tool), $description, &$tool)),+
                ]
            }

            fn call(
                name: ::std::string::String,
                input: ::std::string::String,
            ) -> ::core::result::Result<::std::vec::Vec<$crate::Content>, $crate::ToolError> {
                match name.as_str() {
                    $(::core::stringify!($tool) => $crate::__private::invoke(&$tool, &input),)+
                    other => ::core::result::Result::Err($crate::__private::unknown_tool(other)),
                }
            }
        }

        // Only a wasm build exports the component's functions; a native build
        // (unit tests, clippy) links no export names it could not represent.
        #[cfg(target_arch = "wasm32")]
        $crate::bindings::__export_toolkit!(__ToolhostToolkit with_types_in $crate::bindings);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Input {
        /// The expression.
        expression: String,
        precision: Option<u32>,
    }

    #[derive(Serialize, JsonSchema)]
    struct Output {
        value: f64,
    }

    fn evaluate(input: Input) -> Result<Json<Output>, ToolError> {
        if input.expression.is_empty() {
            return Err(ToolError::invalid_input("empty"));
        }
        Ok(Json(Output { value: 1.5 }))
    }

    #[test]
    fn describe_derives_input_and_output_schemas() {
        let info = __private::describe("evaluate", "Evaluate.", &evaluate);
        let schema: serde_json::Value = serde_json::from_str(&info.input_schema).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], serde_json::json!(["expression"]));
        assert_eq!(
            schema["properties"]["expression"]["description"],
            "The expression."
        );
        let output: serde_json::Value =
            serde_json::from_str(info.output_schema.as_deref().unwrap()).unwrap();
        assert_eq!(output["properties"]["value"]["type"], "number");
    }

    #[test]
    fn invoke_decodes_runs_and_encodes() {
        let out = __private::invoke(&evaluate, r#"{"expression":"1+1"}"#).unwrap();
        assert!(matches!(&out[..], [Content::Json(j)] if j == r#"{"value":1.5}"#));
        let err = __private::invoke(&evaluate, r#"{"expression":""}"#).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m == "empty"));
        let err = __private::invoke(&evaluate, r#"{"nope":1}"#).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("expression")));
    }

    #[test]
    fn text_output_has_no_schema() {
        fn hello(_: Input) -> Result<String, ToolError> {
            Ok("hi".into())
        }
        let info = __private::describe("hello", "Say hi.", &hello);
        assert!(info.output_schema.is_none());
        let out = __private::invoke(&hello, r#"{"expression":"x"}"#).unwrap();
        assert!(matches!(&out[..], [Content::Text(t)] if t == "hi"));
    }
}
