use super::*;
use crate::backend::Toolkit;
use crate::catalog::ToolkitEntry;
use crate::tool::BoxFuture;
use crate::tool::{Limits, ToolDescriptor};
use serde_json::json;

/// A toolkit that sleeps for `input.ms` and echoes the input.
struct Sleepy;
impl Toolkit for Sleepy {
    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        Box::pin(async move {
            let v = call.input;
            tokio::time::sleep(Duration::from_millis(v["ms"].as_u64().unwrap_or(0))).await;
            Ok(vec![Content::Json(v)])
        })
    }
}

fn setup(limits: Limits) -> (Dispatcher, Arc<Session>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Arc::new(Catalog::new());
    let tool = ToolDescriptor {
        name: "wait".into(),
        description: "Wait.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"ms": {"type": "integer", "minimum": 0}, "pad": {"type": "string"}},
            "required": ["ms"],
            "additionalProperties": false
        }),
        output_schema: None,
        continue_with: None,
        hints: Default::default(),
    };
    catalog
        .register(
            ToolkitEntry::new(
                Arc::new(crate::backend::Detached("test")),
                "sleepy",
                "",
                "v1",
                limits,
                Arc::new(Sleepy),
            ),
            vec![tool],
        )
        .unwrap();
    let sessions = Arc::new(Sessions::new(dir.path(), Duration::from_secs(60)).unwrap());
    let (session, _) = sessions
        .open(&crate::callers::Caller::anonymous(), None)
        .unwrap();
    (Dispatcher::new(catalog, sessions), session, dir)
}

#[tokio::test]
async fn validates_before_running_and_records_stats() {
    let (d, s, _dir) = setup(Limits::default());
    let out = d
        .dispatch(&s, "sleepy_wait", json!({"ms": 0}), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(out.content, vec![Content::Json(json!({"ms": 0}))]);

    let err = d
        .dispatch(
            &s,
            "sleepy_wait",
            json!({"ms": "x"}),
            CallOptions::default(),
        )
        .await
        .unwrap_err();
    let CallError::InvalidInput { message, details } = err else {
        panic!("{err:?}")
    };
    assert!(message.contains("/ms"), "{message}");
    assert_eq!(details.len(), 1);

    let err = d
        .dispatch(&s, "sleepy_nope", json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err, CallError::NotFound("sleepy_nope".into()));

    let stats = d.catalog().get("sleepy_wait").unwrap().record.stats.view();
    assert_eq!((stats.call_count, stats.error_count), (2, 1));
}

#[tokio::test]
async fn output_over_the_limit_is_refused() {
    let limits = Limits {
        max_output_kb: 1,
        ..Limits::default()
    };
    let (d, s, _dir) = setup(limits);
    let input = json!({"ms": 0, "pad": "x".repeat(2000)});
    let err = d
        .dispatch(&s, "sleepy_wait", input, CallOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, CallError::OutputTooLarge { limit: 1024, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_full_queue_refuses_and_a_slot_frees_up() {
    let limits = Limits {
        max_concurrency: 1,
        max_queue: 1,
        ..Limits::default()
    };
    let (d, s, _dir) = setup(limits);
    let d = Arc::new(d);
    let slow = {
        let (d, s) = (d.clone(), s.clone());
        tokio::spawn(async move {
            d.dispatch(
                &s,
                "sleepy_wait",
                json!({"ms": 300}),
                CallOptions::default(),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let queued = {
        let (d, s) = (d.clone(), s.clone());
        tokio::spawn(async move {
            d.dispatch(&s, "sleepy_wait", json!({"ms": 0}), CallOptions::default())
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let refused = d
        .dispatch(&s, "sleepy_wait", json!({"ms": 0}), CallOptions::default())
        .await;
    assert!(
        matches!(refused, Err(CallError::Overloaded(_))),
        "{refused:?}"
    );
    assert!(slow.await.unwrap().is_ok());
    assert!(
        queued.await.unwrap().is_ok(),
        "the queued call runs once the slot frees"
    );
}

/// A toolkit whose tool answers with its own name, or fails as `input.fail`
/// says (`unavailable`, `bad`).
struct Named(&'static str);
impl Toolkit for Named {
    fn invoke(self: Arc<Self>, call: Invocation) -> BoxFuture<Result<Vec<Content>, CallError>> {
        let name = self.0;
        Box::pin(async move {
            match call.input.get("fail").and_then(Value::as_str) {
                Some("unavailable") if name == "main" => {
                    Err(CallError::BackendUnavailable("down".into()))
                }
                Some("bad") => Err(CallError::invalid_input("bad input")),
                _ => Ok(vec![Content::Json(
                    json!({"by": name, "input": call.input}),
                )]),
            }
        })
    }
}

#[tokio::test]
async fn fallbacks_serve_when_the_tool_cannot_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Arc::new(Catalog::new());
    let schema = |extra: Value| {
        let mut s = json!({"type": "object", "properties": {"text": {"type": "string"}, "fail": {"type": "string"}}});
        s["properties"]
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        s
    };
    for (name, extra, fallback) in [
        (
            "main",
            json!({"level": {"type": "integer"}}),
            vec!["spare_run".to_owned()],
        ),
        ("spare", json!({}), vec![]),
    ] {
        let mut entry = ToolkitEntry::new(
            Arc::new(crate::backend::Detached("test")),
            name,
            "",
            "v1",
            Limits::default(),
            Arc::new(Named(name)),
        );
        entry.fallback.insert("run".into(), fallback);
        let tool = ToolDescriptor {
            name: "run".into(),
            description: "Run.".into(),
            input_schema: schema(extra),
            output_schema: None,
            continue_with: None,
            hints: Default::default(),
        };
        catalog.register(entry, vec![tool]).unwrap();
    }
    let sessions = Arc::new(Sessions::new(dir.path(), Duration::from_secs(60)).unwrap());
    let (session, _) = sessions
        .open(&crate::callers::Caller::anonymous(), None)
        .unwrap();
    let d = Dispatcher::new(catalog.clone(), sessions);
    let call = |input: Value| d.dispatch(&session, "main_run", input, CallOptions::default());
    let by = |out: &CallOutput| match &out.content[0] {
        Content::Json(v) => v.clone(),
        other => panic!("{other:?}"),
    };

    // Well: itself.
    let out = call(json!({"text": "a"})).await.unwrap();
    assert_eq!(
        (by(&out)["by"].as_str(), out.served_by.as_deref()),
        (Some("main"), None)
    );
    // Its backend unavailable: the fallback, the input as it takes it.
    let out = call(json!({"text": "b", "level": 3, "fail": "unavailable"}))
        .await
        .unwrap();
    assert_eq!(out.served_by.as_deref(), Some("spare_run"));
    assert_eq!(
        by(&out)["input"],
        json!({"text": "b", "fail": "unavailable"})
    );
    // The caller's mistake is not passed on.
    let e = call(json!({"fail": "bad"})).await.unwrap_err();
    assert_eq!(e.kind(), crate::tool::ErrorKind::InvalidInput);
    // Degraded: the fallback first, though the tool would answer.
    catalog.get("main_run").unwrap().record.set_degraded(true);
    let out = call(json!({"text": "c"})).await.unwrap();
    assert_eq!(out.served_by.as_deref(), Some("spare_run"));
    // ... and the tool itself when its fallbacks cannot serve either.
    catalog.get("spare_run").unwrap().record.set_degraded(true);
    let out = call(json!({"text": "d"})).await.unwrap();
    assert_eq!(
        (by(&out)["by"].as_str(), out.served_by.as_deref()),
        (Some("main"), None)
    );
    // Set through the registry, over the manifest's: none.
    catalog.get("main_run").unwrap().record.set_degraded(false);
    catalog
        .get("main_run")
        .unwrap()
        .record
        .set_fallback(Some(Vec::new()));
    let e = call(json!({"fail": "unavailable"})).await.unwrap_err();
    assert_eq!(e.kind(), crate::tool::ErrorKind::BackendUnavailable);
    assert!(
        d.check_fallbacks("main_run", &["main_run".into()])
            .unwrap_err()
            .contains("itself")
    );
    assert!(
        d.check_fallbacks("main_run", &["nope_x".into()])
            .unwrap_err()
            .contains("unknown fallback")
    );
    assert_eq!(d.check_fallbacks("main_run", &["spare_run".into()]), Ok(()));
    catalog.get("main_run").unwrap().record.set_fallback(None);
    // A probe (no_fallback) calls the tool itself.
    catalog.get("spare_run").unwrap().record.set_degraded(false);
    let options = CallOptions {
        no_fallback: true,
        ..Default::default()
    };
    let out = d
        .dispatch(&session, "main_run", json!({}), options)
        .await
        .unwrap();
    assert_eq!(out.served_by, None);
}
