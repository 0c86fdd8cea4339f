//! Tool retrieval for `/retrieving_tools`: BM25 (the `bm25` crate) over each
//! tool's id, toolkit, description and parameter names and descriptions. The
//! index is rebuilt when the catalog changes (hot loading).

use std::sync::Mutex;

use bm25::{Document, Language, SearchEngine, SearchEngineBuilder};
use serde_json::Value;

use toolhost_core::catalog::{Catalog, ToolEntry};

/// An index of one catalog generation.
struct Index {
    generation: u64,
    engine: SearchEngine<u32>,
    /// Tool ids by document number.
    ids: Vec<String>,
}

#[derive(Default)]
pub struct Retriever {
    index: Mutex<Option<Index>>,
}

/// The text a tool is found by.
fn document(t: &ToolEntry) -> String {
    let mut text = format!(
        "{} {} {} {}",
        t.id.replace(['_', '-'], " "),
        t.toolkit.name,
        t.toolkit.description,
        t.descriptor.description
    );
    if let Some(Value::Object(props)) = t.descriptor.input_schema.get("properties") {
        for (name, schema) in props {
            text.push(' ');
            text.push_str(&name.replace('_', " "));
            if let Some(d) = schema.get("description").and_then(Value::as_str) {
                text.push(' ');
                text.push_str(d);
            }
        }
    }
    text
}

impl Retriever {
    /// Ids of the `top_k` tools that best match `question`, best first.
    pub fn search(&self, catalog: &Catalog, question: &str, top_k: usize) -> Vec<String> {
        let generation = *catalog.subscribe().borrow();
        let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        if index.as_ref().is_none_or(|i| i.generation != generation) {
            let tools = catalog.tools();
            let ids: Vec<String> = tools.iter().map(|t| t.id.clone()).collect();
            let docs: Vec<Document<u32>> = tools
                .iter()
                .enumerate()
                .map(|(i, t)| Document::new(i as u32, document(t)))
                .collect();
            let engine =
                SearchEngineBuilder::<u32>::with_documents(Language::English, docs).build();
            *index = Some(Index {
                generation,
                engine,
                ids,
            });
        }
        let Index { engine, ids, .. } = index.as_ref().expect("index built");
        engine
            .search(question, top_k)
            .into_iter()
            .filter_map(|r| ids.get(r.document.id as usize).cloned())
            .collect()
    }
}
