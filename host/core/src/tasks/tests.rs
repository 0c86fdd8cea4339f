//! Tests of [`super`] (`mod.rs`), beside it to keep that file short.

use super::*;

#[tokio::test]
async fn only_the_newest_ended_tasks_are_kept_and_running_ones_never_go() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, _) = Registry::open(dir.path()).unwrap();
    let (tasks, _queue) = Tasks::new(Some(registry.clone()), Vec::new(), Default::default());
    let spec = |n: usize| TaskSpec {
        name: format!("t{n}"),
        description: "d".into(),
        ..Default::default()
    };
    let running = tasks.submit(spec(0)).unwrap().task_id;
    let mut ended = Vec::new();
    for n in 1..=5 {
        let id = tasks.submit(spec(n)).unwrap().task_id;
        tasks.cancel(&id).unwrap();
        ended.push(id);
    }
    tasks.forget_oldest_ended(3);
    let kept: Vec<String> = tasks.list().into_iter().map(|t| t.task_id).collect();
    assert_eq!(
        kept,
        [
            running.clone(),
            ended[2].clone(),
            ended[3].clone(),
            ended[4].clone()
        ]
    );
    registry.sync().await.unwrap();
    drop(tasks);
    registry.close();
    drop(registry);
    let (_registry, saved) = Registry::open(dir.path()).unwrap();
    assert_eq!(saved.tasks.len(), 4, "forgotten in the registry too");
}

/// A build's `building` is on disk before the build runs: a server killed
/// during it (here: a copy of the registry's files taken while the first
/// is still open, nothing closed, opened as a restart would) fails the
/// task at its restart; a task still pending there is queued again.
#[tokio::test]
async fn a_build_is_building_on_disk_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, _) = Registry::open(dir.path()).unwrap();
    let (tasks, _queue) = Tasks::new(Some(registry.clone()), Vec::new(), Default::default());
    let spec = |name: &str| TaskSpec {
        name: name.into(),
        description: "d".into(),
        language: Some("python".into()),
        source: Some("x = 1".into()),
        ..Default::default()
    };
    let building = tasks.submit(spec("midway")).unwrap().task_id;
    let waiting = tasks.submit(spec("later")).unwrap().task_id;
    tasks.building_on_disk(&building).await;
    assert_eq!(
        tasks.get(&building).unwrap().status,
        TaskStatus::Pending,
        "not shown yet"
    );

    let killed = tempfile::tempdir().unwrap();
    for file in std::fs::read_dir(dir.path()).unwrap() {
        let file = file.unwrap().path();
        std::fs::copy(&file, killed.path().join(file.file_name().unwrap())).unwrap();
    }
    let (_again, saved) = Registry::open(killed.path()).unwrap();
    let (restarted, mut queue) = Tasks::new(None, saved.tasks, Default::default());
    let failed = restarted.get(&building).unwrap();
    assert_eq!(failed.status, TaskStatus::Failed, "{failed:?}");
    assert!(
        failed
            .error
            .as_deref()
            .is_some_and(|e| e.contains("the server stopped while this task was building")),
        "{failed:?}"
    );
    assert_eq!(restarted.get(&waiting).unwrap().status, TaskStatus::Pending);
    assert_eq!(queue.try_recv().ok(), Some(waiting));
}
