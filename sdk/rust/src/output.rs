//! What a tool function may return, and how it becomes content items.

use crate::{Content, JsonSchema, Serialize, ToolError};

/// A tool's successful result, turned into the content items the host receives.
pub trait IntoContents {
    /// The content items.
    fn into_contents(self) -> Result<Vec<Content>, ToolError>;

    /// JSON Schema of a `json` result, when the type has one.
    fn output_schema() -> Option<String> {
        None
    }
}

/// A JSON result whose schema is derived from `T` and published as the tool's
/// output schema.
pub struct Json<T>(pub T);

impl<T: Serialize + JsonSchema> IntoContents for Json<T> {
    fn into_contents(self) -> Result<Vec<Content>, ToolError> {
        Ok(vec![crate::json(&self.0)?])
    }

    fn output_schema() -> Option<String> {
        Some(crate::__private::schema_text::<T>())
    }
}

impl IntoContents for String {
    fn into_contents(self) -> Result<Vec<Content>, ToolError> {
        Ok(vec![Content::Text(self)])
    }
}

impl IntoContents for &str {
    fn into_contents(self) -> Result<Vec<Content>, ToolError> {
        Ok(vec![Content::Text(self.to_owned())])
    }
}

impl IntoContents for serde_json::Value {
    fn into_contents(self) -> Result<Vec<Content>, ToolError> {
        Ok(vec![crate::json(&self)?])
    }
}

impl IntoContents for Content {
    fn into_contents(self) -> Result<Vec<Content>, ToolError> {
        Ok(vec![self])
    }
}

impl IntoContents for Vec<Content> {
    fn into_contents(self) -> Result<Vec<Content>, ToolError> {
        Ok(self)
    }
}
