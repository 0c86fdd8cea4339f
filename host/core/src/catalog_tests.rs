//! Tests of [`super`] (`catalog.rs`), beside it to keep that file short.

use super::*;
use crate::backend::Invocation;
use crate::tool::{BoxFuture, CallError, Content};
use serde_json::json;

struct Echo;
impl Toolkit for Echo {
    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        Box::pin(async move { Ok(vec![Content::Json(call.input)]) })
    }
}

fn kit(name: &str) -> ToolkitEntry {
    ToolkitEntry::new(
        Arc::new(crate::backend::Detached("test")),
        name,
        "",
        "v1",
        Limits::default(),
        Arc::new(Echo),
    )
}

fn tool(name: &str) -> ToolDescriptor {
    ToolDescriptor {
        name: name.into(),
        description: format!("{name} tool"),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        continue_with: None,
        hints: Default::default(),
    }
}

#[test]
fn register_replace_remove() {
    let c = Catalog::new();
    let rx = c.subscribe();
    c.register(kit("a"), vec![tool("x"), tool("y")]).unwrap();
    assert_eq!(
        c.tools().iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["a_x", "a_y"]
    );
    c.register(kit("a"), vec![tool("z")]).unwrap();
    assert!(c.get("a_x").is_none());
    assert!(c.get("a_z").is_some());
    assert!(c.remove("a"));
    assert!(!c.remove("a"));
    assert!(c.tools().is_empty());
    assert_eq!(*rx.borrow(), 3);
}

#[test]
fn refuses_bad_names_duplicates_and_bad_schemas() {
    let c = Catalog::new();
    assert!(matches!(
        c.register(kit("Bad"), vec![tool("x")]),
        Err(CatalogError::InvalidPluginName(_))
    ));
    assert!(matches!(
        c.register(kit("a"), vec![tool("x.y")]),
        Err(CatalogError::InvalidToolId(_))
    ));
    assert!(matches!(
        c.register(kit("a"), vec![tool(&"x".repeat(70))]),
        Err(CatalogError::InvalidToolId(_))
    ));
    assert!(matches!(
        c.register(kit("a"), vec![tool("x"), tool("x")]),
        Err(CatalogError::DuplicateTool { .. })
    ));
    assert!(matches!(
        c.register(kit("a"), vec![]),
        Err(CatalogError::NoTools(_))
    ));
    c.register(kit("s"), vec![tool("t_u")]).unwrap();
    let mut bad = tool("t_u");
    bad.input_schema = json!({"type": 12});
    assert!(matches!(
        c.register(kit("s"), vec![bad]),
        Err(CatalogError::BadSchema { .. })
    ));
    assert!(
        c.get("s_t_u").is_some(),
        "a failed registration changes nothing"
    );
}

#[test]
fn a_name_held_by_another_backend_is_refused() {
    struct Other;
    impl Toolkit for Other {
        fn invoke(self: Arc<Self>, _: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
            Box::pin(async { Ok(vec![]) })
        }
    }
    let c = Catalog::new();
    c.register(kit("shell"), vec![tool("run")]).unwrap();
    let other = ToolkitEntry::new(
        Arc::new(crate::backend::Detached("other")),
        "shell",
        "",
        "v1",
        Limits::default(),
        Arc::new(Other),
    );
    assert!(matches!(
        c.register(other, vec![tool("run")]),
        Err(CatalogError::NameTaken { .. })
    ));
    assert!(
        !c.remove_backend("shell", "other"),
        "only its own backend's"
    );
    assert!(c.get("shell_run").is_some());
    assert!(c.remove_backend("shell", "test"));
}

#[tokio::test]
async fn a_call_waits_for_a_pending_toolkit() {
    let c = Arc::new(Catalog::new());
    assert_eq!(
        c.get_or_wait("a_x", Duration::from_secs(5)).await.err(),
        Some(false),
        "not pending: not found at once"
    );
    c.set_pending("a", true);
    assert_eq!(
        c.get_or_wait("a_x", Duration::from_millis(50)).await.err(),
        Some(true),
        "still pending after the limit"
    );
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { c.get_or_wait("a_x", Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    c.register(kit("a"), vec![tool("x")]).unwrap();
    c.set_pending("a", false);
    assert!(waiter.await.unwrap().is_ok(), "woken by the registration");

    // A toolkit that fails to load wakes its waiters with not found.
    c.set_pending("b", true);
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { c.get_or_wait("b_x", Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    c.set_pending("b", false);
    assert_eq!(waiter.await.unwrap().err(), Some(false));
}

#[test]
fn published_schemas_are_normalised() {
    let c = Catalog::new();
    let mut t = tool("x");
    t.output_schema = Some(json!({"type": "object", "properties": {
        "n": {"type": "integer", "format": "uint64"}
    }}));
    c.register(kit("a"), vec![t]).unwrap();
    let d = &c.get("a_x").unwrap().descriptor;
    assert_eq!(d.input_schema, json!({"type": "object", "properties": {}}));
    assert_eq!(
        d.output_schema.as_ref().unwrap()["properties"]["n"],
        json!({"type": "integer", "minimum": 0})
    );
}

#[test]
fn stats_survive_replacement() {
    let c = Catalog::new();
    c.register(kit("a"), vec![tool("x")]).unwrap();
    c.get("a_x")
        .unwrap()
        .record
        .stats
        .record(Duration::from_millis(4), false);
    c.register(kit("a"), vec![tool("x")]).unwrap();
    let v = c.get("a_x").unwrap().record.stats.view();
    assert_eq!(v.call_count, 1);
    assert_eq!(v.error_rate, 1.0);
    assert_eq!(v.avg_latency_ms, 4.0);
    assert!(v.last_used_time.is_some());
}
