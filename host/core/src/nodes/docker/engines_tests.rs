//! Tests of [`super`] (`engines.rs`), beside it to keep that file short.

use super::*;

#[test]
fn bind_paths_are_mapped_by_the_deepest_listed_folder() {
    let config = crate::nodes::docker::config::DockerConfig {
        engines: vec![crate::nodes::docker::config::DockerEngine {
            name: "far".into(),
            url: "tcp://10.0.0.9:2376".into(),
            paths: [
                ("/srv/toolhost".into(), "/mnt/th".into()),
                ("/srv/toolhost/plugins".into(), "/opt/plugins".into()),
            ]
            .into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let engines = Engines::new(&config).unwrap();
    let far = engines.member(0);
    let map = |p: &str| far.host_path(Path::new(p));
    assert_eq!(
        map("/srv/toolhost/data/workspaces/s1"),
        Path::new("/mnt/th/data/workspaces/s1")
    );
    assert_eq!(
        map("/srv/toolhost/plugins/shell/driver.py"),
        Path::new("/opt/plugins/shell/driver.py")
    );
    assert_eq!(
        map("/srv/toolhostile/x"),
        Path::new("/srv/toolhostile/x"),
        "a prefix of a name is not a folder"
    );
    assert_eq!(map("/elsewhere"), Path::new("/elsewhere"));

    let mut bad = config.clone();
    bad.engines[0].paths = [("data".into(), "/mnt/th".into())].into();
    let e = Engines::new(&bad).err().unwrap();
    assert!(e.contains("absolute"), "{e}");
}

fn two_engines() -> Engines {
    let config = crate::nodes::docker::config::DockerConfig {
        engines: vec![
            crate::nodes::docker::config::DockerEngine {
                name: "a".into(),
                url: "unix:///nonexistent/a.sock".into(),
                ..Default::default()
            },
            crate::nodes::docker::config::DockerEngine {
                name: "b".into(),
                url: "unix:///nonexistent/b.sock".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let e = Engines::new(&config).unwrap();
    for m in &e.members {
        let mut s = lock(&m.state);
        (s.up, s.cores, s.memory_mb) = (Some(true), 2.0, 4000);
    }
    e
}

#[tokio::test]
async fn a_session_stays_on_its_engine_drained_or_not_and_moves_when_it_dies() {
    let e = two_engines();
    let s1 = e.engine_for("s1", None, 1.0, 512, false).await.unwrap();
    e.settle("c1", s1, 1.0, 512);
    let s2 = e.engine_for("s2", None, 1.0, 512, false).await.unwrap();
    e.settle("c2", s2, 1.0, 512);
    assert_ne!(s1, s2, "spread");
    // Its second toolkit's node: the same engine, though it is fuller.
    e.settle("c3", s1, 1.0, 512);
    assert_eq!(e.engine_for("s1", None, 1.0, 512, false).await.unwrap(), s1);

    // Drain s1's engine: s1 stays, new sessions go to the other one.
    let name = e.member(s1).name.clone();
    assert!(e.drain(&name, true).unwrap().drained);
    assert_eq!(e.engine_for("s1", None, 1.0, 512, false).await.unwrap(), s1);
    for n in 0..5 {
        let s = format!("new{n}");
        assert_eq!(e.engine_for(&s, None, 1.0, 512, false).await.unwrap(), s2);
    }
    let views = e.views();
    assert_eq!(views[s1].nodes, 2);
    assert_eq!(views[s2].sessions, 6);
    assert!(e.drain("nope", true).is_none());
    e.drain(&name, false);

    // s2's engine dies: s2 moves to the live one and stays there.
    lock(&e.member(s2).state).up = Some(false);
    assert_eq!(e.engine_for("s2", None, 1.0, 512, false).await.unwrap(), s1);
    lock(&e.member(s2).state).up = Some(true);
    assert_eq!(e.engine_for("s2", None, 1.0, 512, false).await.unwrap(), s1);

    // Both gone: the call says why (nothing answers at those sockets).
    for m in &e.members {
        lock(&m.state).up = Some(false);
    }
    let err = e.engine_for("s3", None, 1.0, 512, false).await.unwrap_err();
    assert!(
        matches!(&err, CallError::BackendUnavailable(m) if m.contains("no Docker engine") && m.contains("a.sock")),
        "{err:?}"
    );
    // Closed: no affinity left.
    e.release("s1");
    assert!(!lock(&e.affinity).contains_key("s1"));
}

#[test]
fn engine_settings_are_checked() {
    let of = |url: &str, tls: bool| {
        Target::of(&crate::nodes::docker::config::DockerEngine {
            name: "x".into(),
            url: url.into(),
            tls_cert: tls.then(|| "c.pem".into()),
            tls_key: tls.then(|| "k.pem".into()),
            tls_ca: tls.then(|| "ca.pem".into()),
            ..Default::default()
        })
    };
    assert_eq!(
        of("unix:///run/d.sock", false),
        Ok(Target::Unix("/run/d.sock".into()))
    );
    assert!(matches!(
        of("tcp://127.0.0.1:2376", true),
        Ok(Target::Tcp { tls: Some(_), .. })
    ));
    assert!(matches!(
        of("tcp://127.0.0.1:2375", false),
        Ok(Target::Tcp { tls: None, .. })
    ));
    assert!(matches!(of("ssh://me@host", false), Ok(Target::Ssh { .. })));
    assert!(of("unix:///run/d.sock", true).is_err());
    let port = of("ssh://me@host:2222", false).unwrap_err();
    assert!(port.contains("~/.ssh/config"), "{port}");
    // Remote: its containers' /proc is not ours (no service nodes there).
    let remote = |url: &str| of(url, false).unwrap().is_remote();
    assert!(!remote("tcp://127.0.0.1:2375") && !remote("unix:///run/d.sock"));
    assert!(remote("tcp://10.0.0.7:2375") && remote("ssh://me@host"));
    assert!(of("http://x", false).is_err());
    let half = Target::of(&crate::nodes::docker::config::DockerEngine {
        name: "x".into(),
        url: "tcp://127.0.0.1:1".into(),
        tls_cert: Some("c.pem".into()),
        ..Default::default()
    });
    assert!(half.unwrap_err().contains("all of tls_cert"));
    let dup = crate::nodes::docker::config::DockerConfig {
        engines: vec![
            crate::nodes::docker::config::DockerEngine {
                name: "a".into(),
                url: "unix:///a".into(),
                ..Default::default()
            };
            2
        ],
        ..Default::default()
    };
    assert!(Engines::new(&dup).is_err());
}

/// A fake engine on a Unix socket: answers `/version` and `/info` while
/// `answering`, holds every request without an answer otherwise.
async fn fake_engine(
    listener: tokio::net::UnixListener,
    answering: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let answering = answering.clone();
        tokio::spawn(async move {
            let mut stream = BufReader::new(stream);
            loop {
                let mut request = String::new();
                if stream.read_line(&mut request).await.unwrap_or(0) == 0 {
                    return;
                }
                loop {
                    let mut header = String::new();
                    if stream.read_line(&mut header).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if header.trim().is_empty() {
                        break;
                    }
                }
                if !answering.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    return;
                }
                let body = if request.contains("/version") {
                    r#"{"ApiVersion":"1.41","Version":"20.10.24"}"#
                } else {
                    r#"{"NCPU":2,"MemTotal":4294967296,"ServerVersion":"20.10.24"}"#
                };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if stream.get_mut().write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// An engine that was up and is slow to answer for a look or two keeps
/// its nodes; one that stays silent, or refuses, is down.
#[tokio::test]
async fn a_slow_engine_keeps_its_nodes_until_it_stays_silent() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("docker.sock");
    let answering = std::sync::Arc::new(AtomicBool::new(true));
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let fake = tokio::spawn(fake_engine(listener, answering.clone()));
    let config = crate::nodes::docker::config::DockerConfig {
        engines: vec![crate::nodes::docker::config::DockerEngine {
            name: "slow".into(),
            url: format!("unix://{}", socket.display()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let e = Engines::new(&config).unwrap();
    let first = e.check().await.0;
    assert_eq!(first, vec![0], "up: {:?}", lock(&e.members[0].state).error);
    answering.store(false, Ordering::SeqCst);
    for look in 1..SLOW_PINGS {
        assert_eq!(e.check().await.0, vec![0], "slow look {look}: still up");
        assert_eq!(lock(&e.members[0].state).up, Some(true));
    }
    assert!(
        e.check().await.0.is_empty(),
        "silent for {SLOW_PINGS} looks: down"
    );
    answering.store(true, Ordering::SeqCst);
    assert_eq!(e.check().await.1, vec![0], "back up");
    fake.abort();
    std::fs::remove_file(&socket).unwrap();
    assert!(e.check().await.0.is_empty(), "refused: down at once");
}
