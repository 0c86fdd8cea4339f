//! Replicas in the harness: servers sharing their session workspaces, a
//! server's id among replicas, and the admin's status changes they share.

use std::path::Path;

use serde_json::{Value, json};

use crate::{PluginsDir, Server};

impl Server {
    /// Start with its session workspaces in `workspaces` (a directory
    /// replicas share: `<data>/workspaces` is a link to it).
    pub fn start_with_workspaces(
        plugins: PluginsDir,
        config: Option<&str>,
        workspaces: &Path,
    ) -> anyhow::Result<Server> {
        let data = tempfile::tempdir()?;
        std::fs::create_dir_all(data.path().join("data"))?;
        std::os::unix::fs::symlink(workspaces, data.path().join("data/workspaces"))?;
        let server = Self::spawn_in(plugins, data, config, &[])?;
        server.wait_loaded()?;
        Ok(server)
    }

    /// Its id among replicas sharing a registry (from its log).
    pub fn replica_id(&self) -> Option<String> {
        // Without the colours' escape sequences.
        let mut log = String::new();
        let mut escaped = false;
        for c in self.log().chars() {
            match (escaped, c) {
                (false, '\u{1b}') => escaped = true,
                (true, 'm') => escaped = false,
                (true, _) => {}
                (false, c) => log.push(c),
            }
        }
        let open = log.find("tool registry open")?;
        let at = open + log[open..].find("replica=")? + "replica=".len();
        let id = log[at..].trim_start_matches('"');
        Some(id.chars().take_while(|c| c.is_ascii_hexdigit()).collect())
    }

    /// `PUT /tools/{id}/status` as the admin of token `admin`: the status
    /// code and the body.
    pub fn set_status(&self, admin: &str, id: &str, status: &str) -> (u16, Value) {
        let r = self
            .client()
            .put(self.url(&format!("/tools/{id}/status")))
            .bearer_auth(admin)
            .json(&json!({ "status": status }))
            .send()
            .unwrap();
        (r.status().as_u16(), r.json().unwrap_or(Value::Null))
    }
}
