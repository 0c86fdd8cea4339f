//! Tests of [`super`] (`sessions/`).

use super::*;
use crate::callers::Policy;

fn anon() -> Caller {
    Caller::anonymous()
}

#[test]
fn ids_are_directory_safe() {
    assert!(is_valid_session_id("abc-DEF_123"));
    for bad in ["", ".", "..", "a/b", "a\\b", "a.b", &"x".repeat(65)] {
        assert!(!is_valid_session_id(bad), "{bad}");
    }
}

#[tokio::test]
async fn open_creates_lazily_and_reuses() {
    let dir = tempfile::tempdir().unwrap();
    let s = Sessions::new(dir.path(), Duration::from_secs(60)).unwrap();
    let (a, created) = s.open(&anon(), None).unwrap();
    assert!(created);
    // 128 random bits, in hex; never the same twice.
    assert_eq!(a.id().len(), 32);
    assert!(a.id().bytes().all(|b| b.is_ascii_hexdigit()));
    assert_ne!(s.open(&anon(), None).unwrap().0.id(), a.id());
    assert!(
        !a.workspace_path().exists(),
        "workspace is created on first use"
    );
    let ws = a.workspace().unwrap().to_owned();
    assert!(ws.is_dir());
    let (b, created) = s.open(&anon(), Some(a.id())).unwrap();
    assert!(!created);
    assert!(Arc::ptr_eq(&a, &b));
    assert!(matches!(
        s.open(&anon(), Some("../etc")),
        Err(SessionError::InvalidId)
    ));
    assert!(s.close(a.id()).await.unwrap());
    assert!(!ws.exists());
    assert!(!s.close(a.id()).await.unwrap(), "closed once");
}

#[tokio::test]
async fn closing_releases_backend_resources_and_new_sessions_are_bounded() {
    struct Held(Mutex<Vec<String>>);
    impl SessionResources for Held {
        fn release_session(&self, id: &str) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
            let id = id.to_owned();
            Box::pin(async move { self.0.lock().unwrap().push(id) })
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let s = Sessions::new(dir.path(), Duration::from_secs(60))
        .unwrap()
        .with_max(2);
    let held = Arc::new(Held(Mutex::new(Vec::new())));
    let weak: Weak<dyn SessionResources> = Arc::downgrade(&held) as Weak<dyn SessionResources>;
    s.add_resources(weak);
    s.open(&anon(), Some("a")).unwrap();
    s.open(&anon(), None).unwrap();
    assert!(matches!(
        s.open(&anon(), None),
        Err(SessionError::TooMany(2))
    ));
    assert!(
        s.open(&anon(), Some("a")).is_ok(),
        "an open session is not a new one"
    );
    s.release("a").await;
    assert!(s.get("a").is_some(), "released, not closed");
    assert!(s.close("a").await.unwrap());
    assert_eq!(*held.0.lock().unwrap(), ["a", "a"]);
    assert!(s.open(&anon(), None).is_ok(), "room again");
}

#[tokio::test]
async fn a_requests_own_session_ends_as_its_surface_says() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(Sessions::new(dir.path(), Duration::from_secs(60)).unwrap());
    // Named: opened (made if new), kept whatever the request did.
    let named = s.hold(&anon(), Some("mine"), Unnamed::Close).unwrap();
    assert!(!named.is_temporary());
    drop(named);
    assert!(
        s.get("mine").is_some(),
        "a named session outlives its request"
    );
    // KeepIfUsed: forgotten if the call made nothing, kept if it did.
    let a = s.hold(&anon(), None, Unnamed::KeepIfUsed).unwrap();
    assert!(a.is_temporary());
    let id = a.id().to_owned();
    drop(a);
    assert!(s.get(&id).is_none(), "held nothing: forgotten");
    let b = s.hold(&anon(), None, Unnamed::KeepIfUsed).unwrap();
    b.workspace().unwrap();
    let id = b.id().to_owned();
    drop(b);
    assert!(s.get(&id).is_some(), "a session with a workspace stays");
    // Close: gone with its workspace even when the call made one.
    let c = s.hold(&anon(), None, Unnamed::Close).unwrap();
    let ws = c.workspace().unwrap().to_owned();
    let id = c.id().to_owned();
    drop(c);
    for _ in 0..100 {
        if !ws.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        s.get(&id).is_none() && !ws.exists(),
        "closed: nobody can name it again"
    );
}

#[test]
fn resume_never_makes_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let s = Sessions::new(dir.path(), Duration::from_secs(60)).unwrap();
    assert!(matches!(s.resume(&anon(), "nope"), Err(SessionError::Unknown(id)) if id == "nope"));
    assert!(s.get("nope").is_none());
    assert!(matches!(
        s.resume(&anon(), "../x"),
        Err(SessionError::InvalidId)
    ));
    let (a, _) = s.open(&anon(), Some("here")).unwrap();
    assert!(Arc::ptr_eq(&a, &s.resume(&anon(), "here").unwrap()));
}

#[tokio::test]
async fn a_workspace_another_instance_uses_is_not_reaped() {
    // Two instances over one data directory, as replicas over one volume.
    let dir = tempfile::tempdir().unwrap();
    let idle = Duration::from_millis(400);
    let a = Sessions::new(dir.path(), idle).unwrap();
    let (shared, _) = a.open(&anon(), Some("shared")).unwrap();
    shared.workspace().unwrap();
    drop(shared);
    let b = Sessions::new(dir.path(), idle).unwrap();
    assert!(b.get("shared").is_some(), "adopted at start");
    // `a` goes on using it; `b` reaps its idle view of it.
    let until = std::time::Instant::now() + Duration::from_millis(700);
    while std::time::Instant::now() < until {
        a.open(&anon(), Some("shared")).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(b.reap_idle().await, vec!["shared".to_owned()]);
    assert!(
        dir.path().join("workspaces/shared").exists(),
        "in use by `a`: kept"
    );
    // Once `a` is done with it too, it goes.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(a.reap_idle().await, vec!["shared".to_owned()]);
    assert!(!dir.path().join("workspaces/shared").exists());
}

#[tokio::test]
async fn idle_sessions_are_reaped_but_busy_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let s = Sessions::new(dir.path(), Duration::from_millis(0)).unwrap();
    let (busy, _) = s.open(&anon(), Some("busy")).unwrap();
    let (idle, _) = s.open(&anon(), Some("idle")).unwrap();
    idle.workspace().unwrap();
    let idle_ws = idle.workspace_path().to_owned();
    drop(idle);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(s.reap_idle().await, vec!["idle".to_owned()]);
    assert!(!idle_ws.exists());
    assert!(s.get("busy").is_some());
    drop(busy);
}

#[test]
fn workspaces_of_a_previous_run_are_adopted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("workspaces/old-one")).unwrap();
    std::fs::create_dir_all(dir.path().join("workspaces/alice.s1")).unwrap();
    for not_a_key in ["Not.valid", "a.b.c", ".hidden", "a..b"] {
        std::fs::create_dir_all(dir.path().join("workspaces").join(not_a_key)).unwrap();
    }
    let s = Sessions::new(dir.path(), Duration::from_secs(60)).unwrap();
    assert!(s.get("old-one").is_some());
    assert_eq!(s.get("alice.s1").unwrap().client_id(), "s1");
    assert_eq!(s.len(), 2);
}

#[tokio::test]
async fn sessions_belong_to_their_caller() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(Sessions::new(dir.path(), Duration::from_secs(60)).unwrap());
    let alice = Caller::named("alice", Policy::default());
    let bob = Caller::named("bob", Policy::default());
    let (a, created) = s.open(&alice, Some("s1")).unwrap();
    assert!(created);
    std::fs::write(a.workspace().unwrap().join("secret.txt"), "A's").unwrap();
    assert_eq!((a.id(), a.client_id()), ("alice.s1", "s1"));
    // Bob's `s1` is his own, empty; Alice's is unknown to him.
    let (b, created) = s.open(&bob, Some("s1")).unwrap();
    assert!(created && !Arc::ptr_eq(&a, &b));
    assert_ne!(a.workspace_path(), b.workspace_path());
    assert!(b.files(10).is_empty());
    assert!(matches!(
        s.resume(&bob, "only-alice"),
        Err(SessionError::Unknown(_))
    ));
    s.open(&alice, Some("only-alice")).unwrap();
    assert!(matches!(
        s.resume(&bob, "only-alice"),
        Err(SessionError::Unknown(_))
    ));
    assert!(s.resume(&alice, "only-alice").is_ok());
    // The anonymous caller's keys are the ids as sent.
    assert_eq!(s.open(&anon(), Some("s1")).unwrap().0.id(), "s1");
    // Listing per caller.
    let mine: Vec<String> = s
        .list(Some(&alice))
        .iter()
        .map(|(s, _)| s.client_id().to_owned())
        .collect();
    assert_eq!(mine.len(), 2);
    assert!(mine.contains(&"s1".to_owned()) && mine.contains(&"only-alice".to_owned()));
    assert_eq!(s.list(None).len(), 4);
    // A restart adopts each caller's workspace under its namespace.
    drop((a, b));
    let again = Sessions::new(dir.path(), Duration::from_secs(60)).unwrap();
    let (a, created) = again.open(&alice, Some("s1")).unwrap();
    assert!(!created, "adopted");
    assert_eq!(a.files(10).len(), 1);
    let (b, _) = again.open(&bob, Some("s1")).unwrap();
    assert!(b.files(10).is_empty());
}

#[test]
fn a_caller_s_own_session_limit() {
    let dir = tempfile::tempdir().unwrap();
    let s = Sessions::new(dir.path(), Duration::from_secs(60))
        .unwrap()
        .with_max(10);
    let policy = Policy {
        max_sessions: 2,
        ..Policy::default()
    };
    let greedy = Caller::named("greedy", policy);
    let other = Caller::named("other", Policy::default());
    s.open(&greedy, None).unwrap();
    s.open(&greedy, Some("two")).unwrap();
    assert!(matches!(
        s.open(&greedy, None),
        Err(SessionError::CallerTooMany(2))
    ));
    assert!(s.open(&greedy, Some("two")).is_ok(), "its own open session");
    assert!(
        s.open(&other, None).is_ok(),
        "another caller is not locked out"
    );
}
