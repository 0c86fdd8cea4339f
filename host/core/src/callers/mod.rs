//! Who is calling: the identity every request carries, from the surfaces'
//! authentication down to the sessions it may name and the tools it may call.
//!
//! A server without caller tokens has one caller, [`Caller::anonymous`].
//! With tokens (or OAuth access tokens) each request is a named caller, and
//! the session ids it sends live in its own namespace ([`Caller::session_key`]):
//! two callers sending the same id name two sessions, with two workspaces.

pub mod oauth;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// Longest caller name.
pub const MAX_NAME_LEN: usize = 64;

/// True for a name a caller may be configured with: `^[a-z0-9][a-z0-9_-]{0,63}$`.
/// It names the caller's workspaces' namespace on disk, so nothing else.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// A caller: a name, the namespace of its session ids, and what it may do.
/// Cheap to clone.
#[derive(Clone)]
pub struct Caller(Arc<Inner>);

struct Inner {
    name: String,
    /// Calls running now ([`Policy::max_concurrent_calls`]).
    running: AtomicUsize,
    usage: Tally,
    /// Prefix of its sessions' keys; none for the anonymous caller, whose
    /// keys are the ids as sent.
    space: Option<String>,
    policy: Policy,
    /// Of an OAuth caller: the client its token was issued to, and the
    /// token's scopes.
    grant: Option<Grant>,
}

/// What an OAuth access token says beside its subject.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    /// `client_id` (RFC 9068, RFC 7662) or `azp`, if the token names one.
    pub client: Option<String>,
    pub scopes: Vec<String>,
}

/// A caller's calls since the server started.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
    refused: AtomicU64,
    busy_us: AtomicU64,
    /// The same by tool: tools are the catalog's (bounded), and past
    /// [`TOOLS_TALLIED`] of them the rest are counted in the totals only.
    by_tool: std::sync::RwLock<std::collections::HashMap<String, Arc<ToolTally>>>,
}

/// Tools a caller's usage is broken down by, at most.
pub const TOOLS_TALLIED: usize = 4096;

/// A caller's calls of one tool.
#[derive(Default)]
struct ToolTally {
    ok: AtomicU64,
    failed: AtomicU64,
}

/// A caller's calls of one tool since the server started
/// ([`Caller::usage_by_tool`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ToolUsage {
    pub ok: u64,
    pub failed: u64,
}

/// A caller's usage since the server started ([`Caller::usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Calls that answered a result.
    pub ok: u64,
    /// Calls that ended with an error (the tool's, a limit's, the host's).
    pub failed: u64,
    /// Calls its policy refused (a tool outside its patterns, too many
    /// running).
    pub refused: u64,
    /// Time its calls ran, summed, in milliseconds.
    pub busy_ms: u64,
    /// Calls running now.
    pub running: u64,
}

/// What a caller may do beyond calling tools: the limits and permissions
/// the surfaces and dispatch enforce.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Tools (`<plugin>_<tool>` ids, `*` wildcards) it may list and call;
    /// empty: every tool.
    pub tools: Vec<String>,
    /// Whether it may use the admin routes (plugin uploads, every session).
    pub admin: bool,
    /// Sessions it may have open at once (0: only the server's limit).
    pub max_sessions: usize,
    /// Calls it may have running at once (0: no limit of its own).
    pub max_concurrent_calls: usize,
}

impl Policy {
    /// Whether the policy lets its caller see and call tool `id`.
    pub fn allows_tool(&self, id: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|p| glob_match(p, id))
    }
}

/// `*` matches any run of characters (none included); everything else matches itself.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

static ANONYMOUS: LazyLock<Caller> = LazyLock::new(|| {
    Caller(Arc::new(Inner {
        name: "anonymous".into(),
        running: AtomicUsize::new(0),
        usage: Tally::default(),
        space: None,
        policy: Policy::default(),
        grant: None,
    }))
});

impl Caller {
    /// The one caller of a server that asks for no token.
    pub fn anonymous() -> Caller {
        ANONYMOUS.clone()
    }

    /// A configured caller: `name` must pass [`is_valid_name`]; it is also
    /// its sessions' namespace.
    pub fn named(name: &str, policy: Policy) -> Caller {
        Caller::with_space(name, name, policy)
    }

    /// A caller whose name is not a valid namespace (an OAuth subject, say):
    /// its sessions live under `space`, which must pass [`is_valid_name`]
    /// and not be any configured caller's name.
    pub fn with_space(name: &str, space: &str, policy: Policy) -> Caller {
        Caller::granted(name, space, policy, None)
    }

    /// An OAuth caller: subject `name`, sessions under `space` (as
    /// [`Caller::with_space`]), and what its token says beside.
    pub fn granted(name: &str, space: &str, policy: Policy, grant: Option<Grant>) -> Caller {
        debug_assert!(is_valid_name(space), "caller space {space:?}");
        Caller(Arc::new(Inner {
            name: name.to_owned(),
            running: AtomicUsize::new(0),
            usage: Tally::default(),
            space: Some(space.to_owned()),
            policy,
            grant,
        }))
    }

    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// An OAuth caller's client and scopes.
    pub fn grant(&self) -> Option<&Grant> {
        self.0.grant.as_ref()
    }

    pub fn is_anonymous(&self) -> bool {
        self.0.space.is_none()
    }

    pub fn policy(&self) -> &Policy {
        &self.0.policy
    }

    /// The namespace of its sessions (none for the anonymous caller).
    pub fn space(&self) -> Option<&str> {
        self.0.space.as_deref()
    }

    /// The key of the session this caller names `id`: unique among all
    /// callers' sessions, and a directory name (`.` is in no session id, so
    /// `<space>.<id>` cannot be anybody else's).
    pub fn session_key(&self, id: &str) -> String {
        match &self.0.space {
            None => id.to_owned(),
            Some(space) => format!("{space}.{id}"),
        }
    }

    /// Count a call as running until the returned guard drops; `Err` with
    /// the calls running when the policy's `max_concurrent_calls` are.
    pub fn start_call(&self) -> Result<Running, usize> {
        let max = self.0.policy.max_concurrent_calls;
        if max == 0 {
            return Ok(Running(None));
        }
        let mut now = self.0.running.load(Ordering::Relaxed);
        loop {
            if now >= max {
                return Err(now);
            }
            match self.0.running.compare_exchange_weak(
                now,
                now + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(Running(Some(self.clone()))),
                Err(seen) => now = seen,
            }
        }
    }

    /// Count one call of `tool` that ran for `elapsed` and ended `ok` or not.
    pub fn note_call(&self, tool: &str, ok: bool, elapsed: Duration) {
        let tally = &self.0.usage;
        if ok { &tally.ok } else { &tally.failed }.fetch_add(1, Ordering::Relaxed);
        tally
            .busy_us
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
        let seen = {
            let by_tool = tally.by_tool.read().unwrap_or_else(|e| e.into_inner());
            by_tool.get(tool).cloned()
        };
        let of_tool = match seen {
            Some(t) => t,
            None => {
                let mut by_tool = tally.by_tool.write().unwrap_or_else(|e| e.into_inner());
                if by_tool.len() >= TOOLS_TALLIED && !by_tool.contains_key(tool) {
                    return;
                }
                by_tool.entry(tool.to_owned()).or_default().clone()
            }
        };
        if ok { &of_tool.ok } else { &of_tool.failed }.fetch_add(1, Ordering::Relaxed);
    }

    /// Its calls by tool since the server started.
    pub fn usage_by_tool(&self) -> std::collections::BTreeMap<String, ToolUsage> {
        let by_tool = self
            .0
            .usage
            .by_tool
            .read()
            .unwrap_or_else(|e| e.into_inner());
        by_tool
            .iter()
            .map(|(tool, t)| {
                let usage = ToolUsage {
                    ok: t.ok.load(Ordering::Relaxed),
                    failed: t.failed.load(Ordering::Relaxed),
                };
                (tool.clone(), usage)
            })
            .collect()
    }

    /// Count one call its policy refused.
    pub fn note_refused(&self) {
        self.0.usage.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Its usage since the server started.
    pub fn usage(&self) -> Usage {
        let tally = &self.0.usage;
        Usage {
            ok: tally.ok.load(Ordering::Relaxed),
            failed: tally.failed.load(Ordering::Relaxed),
            refused: tally.refused.load(Ordering::Relaxed),
            busy_ms: tally.busy_us.load(Ordering::Relaxed) / 1000,
            running: self.0.running.load(Ordering::Relaxed) as u64,
        }
    }

    /// Whether two callers are the same (same namespace).
    pub fn same(&self, other: &Caller) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.space == other.0.space
    }
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.name)
    }
}

/// A call counted as running for its caller ([`Caller::start_call`]).
pub struct Running(Option<Caller>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(caller) = &self.0 {
            caller.0.running.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The caller and session id of a session key ([`Caller::session_key`]):
/// `(space, id)`, the space none for the anonymous caller's.
pub fn split_key(key: &str) -> (Option<&str>, &str) {
    match key.split_once('.') {
        Some((space, id)) => (Some(space), id),
        None => (None, key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["alice", "a", "team-1", "x_y", "0bot"] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "Alice", "-a", "_a", "a.b", "a/b", "é", &"a".repeat(65)] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn keys_keep_callers_apart() {
        let a = Caller::named("alice", Policy::default());
        let b = Caller::named("bob", Policy::default());
        assert_eq!(Caller::anonymous().session_key("s1"), "s1");
        assert_eq!(a.session_key("s1"), "alice.s1");
        assert_ne!(a.session_key("s1"), b.session_key("s1"));
        assert_eq!(split_key("alice.s1"), (Some("alice"), "s1"));
        assert_eq!(split_key("s1"), (None, "s1"));
        assert!(a.same(&Caller::named("alice", Policy::default())));
        assert!(!a.same(&b) && !a.same(&Caller::anonymous()));
    }

    #[test]
    fn tool_patterns() {
        assert!(glob_match("calc_*", "calc_evaluate"));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("files_read", "files_read"));
        assert!(!glob_match("files_read", "files_readx"));
        assert!(glob_match("*_read*", "files_read_text"));
        assert!(!glob_match("calc_*", "xcalc_evaluate"));
        assert!(glob_match("a*b*c", "abc") && glob_match("a*b*c", "a-b-b-c"));
        assert!(!glob_match("a*b*c", "acb"));
        let p = Policy {
            tools: vec!["calc_*".into(), "files_list".into()],
            ..Policy::default()
        };
        assert!(p.allows_tool("calc_evaluate") && p.allows_tool("files_list"));
        assert!(!p.allows_tool("shell_run"));
        assert!(Policy::default().allows_tool("shell_run"));
    }

    #[test]
    fn concurrent_calls_are_counted() {
        let c = Caller::named(
            "c",
            Policy {
                max_concurrent_calls: 2,
                ..Policy::default()
            },
        );
        let one = c.start_call().unwrap();
        let two = c.start_call().unwrap();
        assert_eq!(c.start_call().err(), Some(2));
        drop(one);
        let _three = c.start_call().unwrap();
        drop(two);
        assert!(Caller::anonymous().start_call().is_ok());
        c.note_call("calc_evaluate", true, Duration::from_millis(3));
        c.note_call("calc_evaluate", false, Duration::from_millis(2));
        c.note_refused();
        let usage = c.usage();
        assert_eq!(
            (usage.ok, usage.failed, usage.refused, usage.busy_ms),
            (1, 1, 1, 5)
        );
        assert_eq!(usage.running, 1, "`_three` runs");
        c.note_call("files_read", true, Duration::ZERO);
        let by_tool = c.usage_by_tool();
        assert_eq!(by_tool["calc_evaluate"], ToolUsage { ok: 1, failed: 1 });
        assert_eq!(by_tool["files_read"], ToolUsage { ok: 1, failed: 0 });
    }

    #[test]
    fn usage_by_tool_is_bounded() {
        let c = Caller::named("a", Policy::default());
        for i in 0..TOOLS_TALLIED + 10 {
            c.note_call(&format!("t{i}"), true, Duration::ZERO);
        }
        assert_eq!(c.usage_by_tool().len(), TOOLS_TALLIED);
        assert_eq!(
            c.usage().ok,
            (TOOLS_TALLIED + 10) as u64,
            "the totals count all"
        );
    }
}
