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
