//! Tests of [`super`] (what a call wrote).

use super::*;
use crate::callers::Caller;
use crate::sessions::Sessions;
use crate::sessions::watcher::watcher;
use std::time::{Duration, SystemTime};

#[test]
fn walked_files_written_are_the_new_and_changed_ones_outside_hidden_directories() {
    let file = |path: &str, size| WorkspaceFile {
        path: path.into(),
        size,
        modified: None,
    };
    let before = vec![file("a.txt", 1), file("b.txt", 2), file("c.txt", 3)];
    let after = vec![
        file(".index/doc/chunks", 9),
        file("a.txt", 1),
        file("b.txt", 5),
        file("d/e.csv", 4),
        file("d/.hidden", 1),
    ];
    let paths: Vec<String> = written_since(Some(before.clone()), Some(after.clone()))
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(paths, ["b.txt", "d/e.csv"]);
    // A workspace too large to walk whole, before or after: nothing said.
    assert!(written_since(None, Some(after)).is_empty());
    assert!(written_since(Some(before), None).is_empty());
}

fn paths(files: &[WorkspaceFile]) -> Vec<&str> {
    files.iter().map(|f| f.path.as_str()).collect()
}

/// A session whose workspace holds `a.txt`, `keep/b.txt` and `many/` with
/// `n` files.
fn session_with(dir: &Path, n: usize) -> (Sessions, Arc<Session>) {
    let sessions = Sessions::new(dir, Duration::from_secs(60)).unwrap();
    let (session, _) = sessions.open(&Caller::anonymous(), None).unwrap();
    let ws = session.workspace().unwrap().to_owned();
    std::fs::write(ws.join("a.txt"), "a").unwrap();
    std::fs::create_dir_all(ws.join("keep")).unwrap();
    std::fs::write(ws.join("keep/b.txt"), "b").unwrap();
    std::fs::create_dir_all(ws.join("many")).unwrap();
    for i in 0..n {
        std::fs::write(ws.join(format!("many/{i}.txt")), "x").unwrap();
    }
    (sessions, session)
}

#[tokio::test]
async fn the_kernel_tells_what_a_call_wrote_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (_sessions, session) = session_with(dir.path(), 3);
    let ws = session.workspace_path().to_owned();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(outside.path().join("moved/deep")).unwrap();
    std::fs::write(outside.path().join("moved/deep/m.txt"), "m").unwrap();

    // Written before the call: not the call's.
    std::fs::write(ws.join("early.txt"), "e").unwrap();
    let before = session.watch_writes(true).await;
    assert!(matches!(before, Before::Told { .. }), "inotify serves here");
    std::fs::write(ws.join("a.txt"), "changed").unwrap();
    std::fs::write(ws.join("keep/new.txt"), "n").unwrap();
    std::fs::create_dir_all(ws.join("sub/deeper")).unwrap();
    std::fs::write(ws.join("sub/deeper/c.txt"), "c").unwrap();
    std::fs::create_dir_all(ws.join(".index")).unwrap();
    std::fs::write(ws.join(".index/chunks"), "hidden").unwrap();
    std::fs::write(ws.join("gone.txt"), "g").unwrap();
    std::fs::remove_file(ws.join("gone.txt")).unwrap();
    std::fs::rename(outside.path().join("moved"), ws.join("moved")).unwrap();
    let written = session.writes_since(before).await;
    assert_eq!(
        paths(&written),
        [
            "a.txt",
            "keep/new.txt",
            "moved/deep/m.txt",
            "sub/deeper/c.txt"
        ]
    );
    assert_eq!(written[0].size, 7);

    // The next call sees only its own writes, also in directories the last
    // one made and in one renamed since.
    let before = session.watch_writes(true).await;
    std::fs::rename(ws.join("sub"), ws.join("renamed")).unwrap();
    std::fs::write(ws.join("renamed/deeper/d.txt"), "d").unwrap();
    std::fs::write(ws.join("moved/deep/m.txt"), "again").unwrap();
    let written = session.writes_since(before).await;
    assert_eq!(
        paths(&written),
        [
            "moved/deep/m.txt",
            "renamed/deeper/c.txt",
            "renamed/deeper/d.txt"
        ]
    );

    // Nothing written: nothing told.
    let before = session.watch_writes(true).await;
    assert!(session.writes_since(before).await.is_empty());
}

#[tokio::test]
async fn writes_made_elsewhere_are_found_by_walking() {
    let dir = tempfile::tempdir().unwrap();
    let (_sessions, session) = session_with(dir.path(), 2);
    let ws = session.workspace_path().to_owned();
    let before = session.watch_writes(false).await;
    assert!(matches!(before, Before::Walked(Some(ref files)) if files.len() == 4));
    std::fs::write(ws.join("many/0.txt"), "changed").unwrap();
    std::fs::write(ws.join("z.txt"), "z").unwrap();
    let written = session.writes_since(before).await;
    assert_eq!(paths(&written), ["many/0.txt", "z.txt"]);
}

#[tokio::test]
async fn two_calls_of_a_session_each_see_the_writes_since_they_started() {
    let dir = tempfile::tempdir().unwrap();
    let (_sessions, session) = session_with(dir.path(), 0);
    let ws = session.workspace_path().to_owned();
    let first = session.watch_writes(true).await;
    std::fs::write(ws.join("one.txt"), "1").unwrap();
    let second = session.watch_writes(true).await;
    std::fs::write(ws.join("two.txt"), "2").unwrap();
    assert_eq!(paths(&session.writes_since(second).await), ["two.txt"]);
    std::fs::write(ws.join("three.txt"), "3").unwrap();
    assert_eq!(
        paths(&session.writes_since(first).await),
        ["one.txt", "three.txt", "two.txt"]
    );
}

#[tokio::test]
async fn a_session_made_again_under_its_id_is_watched_in_its_new_directory() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = Sessions::new(dir.path(), Duration::from_secs(60)).unwrap();
    let anon = Caller::anonymous();
    let (session, _) = sessions.open(&anon, Some("again")).unwrap();
    session.workspace().unwrap();
    let before = session.watch_writes(true).await;
    session.writes_since(before).await;
    sessions.close("again").await.unwrap();
    let (again, _) = sessions.open(&anon, Some("again")).unwrap();
    let ws = again.workspace().unwrap().to_owned();
    // The old object still alive while the new one is watched.
    let before = again.watch_writes(true).await;
    drop(session);
    std::fs::write(ws.join("new.txt"), "n").unwrap();
    assert_eq!(paths(&again.writes_since(before).await), ["new.txt"]);
}

#[tokio::test]
async fn a_workspace_replaced_while_a_call_runs_lists_what_changed_since_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let (_sessions, session) = session_with(dir.path(), 1);
    let ws = session.workspace_path().to_owned();
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    for old in ["a.txt", "keep/b.txt", "many/0.txt"] {
        let file = std::fs::File::options()
            .write(true)
            .open(ws.join(old))
            .unwrap();
        file.set_modified(hour_ago).unwrap();
    }
    session.watch_writes(true).await;
    let before = session.watch_writes(true).await;
    // A hot pool's folder takes the workspace's place (nodes/pool.rs): what
    // the session has moves into it, and it is renamed into place.
    let pool = dir.path().join("pool");
    std::fs::create_dir(&pool).unwrap();
    for entry in std::fs::read_dir(&ws).unwrap().flatten() {
        std::fs::rename(entry.path(), pool.join(entry.file_name())).unwrap();
    }
    std::fs::remove_dir(&ws).unwrap();
    std::fs::rename(&pool, &ws).unwrap();
    std::fs::write(ws.join("made.txt"), "m").unwrap();
    assert_eq!(paths(&session.writes_since(before).await), ["made.txt"]);

    // The next call watches the new directory.
    let before = session.watch_writes(true).await;
    assert!(matches!(before, Before::Told { .. }));
    std::fs::write(ws.join("keep/next.txt"), "n").unwrap();
    assert_eq!(
        paths(&session.writes_since(before).await),
        ["keep/next.txt"]
    );
}

#[tokio::test]
async fn a_subscriber_is_told_of_each_write_as_it_happens_without_being_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = Sessions::new(dir.path(), Duration::from_secs(60)).unwrap();
    let (session, _) = sessions.open(&Caller::anonymous(), None).unwrap();
    assert!(session.watch_changes().await.is_none(), "no workspace yet");
    let ws = session.workspace().unwrap().to_owned();
    std::fs::create_dir_all(ws.join("d")).unwrap();
    let mut changes = session.watch_changes().await.expect("watched");
    let told = |changes: &mut tokio::sync::watch::Receiver<u64>| {
        let mut changes = changes.clone();
        async move { tokio::time::timeout(Duration::from_secs(5), changes.changed()).await }
    };
    let quiet = tokio::time::timeout(Duration::from_millis(100), changes.changed()).await;
    assert!(quiet.is_err(), "nothing written: nothing told");

    std::fs::write(ws.join("d/x.txt"), "x").unwrap();
    assert!(
        told(&mut changes).await.is_ok(),
        "a write in a subdirectory"
    );
    changes.borrow_and_update();
    // A directory made since: watched too.
    std::fs::create_dir_all(ws.join("new")).unwrap();
    told(&mut changes).await.unwrap().unwrap();
    changes.borrow_and_update();
    tokio::time::sleep(Duration::from_millis(50)).await;
    changes.borrow_and_update();
    std::fs::write(ws.join("new/y.txt"), "y").unwrap();
    told(&mut changes).await.unwrap().unwrap();

    // Watching is not a running call: what is written meanwhile is kept
    // for no call, and a call still sees only its own writes.
    let watcher = watcher().unwrap();
    assert_eq!(watcher.counts(session.id()), (0, 0));
    let before = session.watch_writes(true).await;
    std::fs::write(ws.join("call.txt"), "c").unwrap();
    assert_eq!(paths(&session.writes_since(before).await), ["call.txt"]);
    assert_eq!(watcher.counts(session.id()).0, 0);
}

/// A change made to a workspace.
type Change = fn(&Path);

#[tokio::test]
async fn the_workspace_token_changes_with_each_visible_write_and_only_then() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = Sessions::new(dir.path(), Duration::from_secs(60)).unwrap();
    let (session, _) = sessions.open(&Caller::anonymous(), None).unwrap();
    assert_eq!(session.workspace_token().await, None, "no workspace yet");
    let ws = session.workspace().unwrap().to_owned();
    std::fs::write(ws.join("a.txt"), "a").unwrap();
    let first = session.workspace_token().await.expect("watched");
    assert_eq!(session.workspace_token().await, Some(first.clone()));

    // A tool's index and other hidden files: the same token.
    std::fs::create_dir_all(ws.join(".index/doc")).unwrap();
    std::fs::write(ws.join(".index/doc/state.json"), "{}").unwrap();
    std::fs::write(ws.join(".notes"), "n").unwrap();
    assert_eq!(session.workspace_token().await, Some(first.clone()));

    // Each visible change, asked at once: another token each time.
    let changes: [(&str, Change); 8] = [
        ("a file made", |ws| {
            std::fs::write(ws.join("b.pdf"), "b").unwrap()
        }),
        ("written again", |ws| {
            std::fs::write(ws.join("b.pdf"), "bb").unwrap()
        }),
        ("its time set", |ws| {
            let f = std::fs::File::options().write(true).open(ws.join("b.pdf"));
            f.unwrap().set_modified(SystemTime::UNIX_EPOCH).unwrap();
        }),
        ("renamed", |ws| {
            std::fs::rename(ws.join("b.pdf"), ws.join("c.pdf")).unwrap()
        }),
        ("a folder made", |ws| {
            std::fs::create_dir(ws.join("d")).unwrap()
        }),
        ("a file in it", |ws| {
            std::fs::write(ws.join("d/e.md"), "e").unwrap()
        }),
        ("a hidden file shown", |ws| {
            std::fs::rename(ws.join(".notes"), ws.join("notes.txt")).unwrap()
        }),
        ("removed", |ws| {
            std::fs::remove_file(ws.join("c.pdf")).unwrap()
        }),
    ];
    let mut seen = vec![first];
    for (what, change) in changes {
        change(&ws);
        let token = session.workspace_token().await.expect("watched");
        assert!(!seen.contains(&token), "{what}: {token} seen before");
        seen.push(token);
    }

    // A call that writes out of the kernel's sight: no token from then on.
    session.writes_elsewhere();
    assert_eq!(session.workspace_token().await, None);
    // Nor for sessions other replicas serve too.
    let shared = Sessions::new(&dir.path().join("r"), Duration::from_secs(60))
        .unwrap()
        .with_replicas(true);
    let (other, _) = shared.open(&Caller::anonymous(), None).unwrap();
    other.workspace().unwrap();
    assert_eq!(other.workspace_token().await, None);
}
