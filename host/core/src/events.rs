//! Seed 004's messages (§5, `AgentMessage`): `tool_ready` and `tool_error`
//! when a tool request ends, `health_alert` when a tool turns degraded, each
//! `{"type", "payload"}` with the seed's payload fields. They go to every
//! subscriber of `GET /events` (admin, SSE) and, with `[events]
//! callback_url`, are POSTed there (a host `[tasks] callback_allow`
//! allows), in order, one at a time: a slow or dead receiver never holds a
//! build or a call up (at most [`QUEUED`] wait; beyond, the oldest are
//! dropped and counted).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};

use crate::tasks::build::Callbacks;

/// Messages waiting for the callback at most.
pub const QUEUED: usize = 1000;

/// `[events]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsConfig {
    /// Where every message is POSTed (its host in `[tasks]
    /// callback_allow`); unset: only `GET /events` has them.
    pub callback_url: Option<String>,
}

/// One message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Message {
    #[serde(rename = "type")]
    pub kind: String,
    pub payload: Value,
}

/// What became of the messages sent to the callback.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Delivery {
    pub delivered: u64,
    pub failed: u64,
    /// Dropped unsent: more than [`QUEUED`] were waiting.
    pub dropped: u64,
}

pub struct Events {
    live: broadcast::Sender<Message>,
    queue: Mutex<VecDeque<Message>>,
    queued: Notify,
    delivery: Mutex<Delivery>,
    /// Whether a callback takes the messages (else none are queued).
    calls_back: bool,
}

impl Events {
    /// The bus, and its callback's sender when `config` names one (refused
    /// at start when no `[tasks] callback_allow` entry allows it).
    pub fn new(config: &EventsConfig, callbacks: Arc<Callbacks>) -> Result<Arc<Events>, String> {
        let events = Arc::new(Events {
            live: broadcast::channel(256).0,
            queue: Mutex::default(),
            queued: Notify::new(),
            delivery: Mutex::default(),
            calls_back: config.callback_url.is_some(),
        });
        if let Some(url) = &config.callback_url {
            if let Some(why) = callbacks.refusal(url) {
                return Err(format!("[events] callback_url: {why}"));
            }
            let (me, url) = (Arc::downgrade(&events), url.clone());
            tokio::spawn(async move {
                loop {
                    let Some(events) = me.upgrade() else { return };
                    let next = events.lock_queue().pop_front();
                    let Some(message) = next else {
                        // Woken now and then to end with the bus.
                        let wait = events.queued.notified();
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), wait).await;
                        continue;
                    };
                    let sent = callbacks.client.post(&url).json(&message).send().await;
                    let ok = matches!(&sent, Ok(r) if r.status().is_success());
                    if !ok {
                        let why = match sent {
                            Ok(r) => format!("answered {}", r.status().as_u16()),
                            Err(e) => e.to_string(),
                        };
                        tracing::warn!(url, kind = %message.kind, "event callback failed: {why}");
                    }
                    let mut d = events.delivery.lock().unwrap_or_else(|e| e.into_inner());
                    if ok { d.delivered += 1 } else { d.failed += 1 }
                }
            });
        }
        Ok(events)
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Message>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every message from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Message> {
        self.live.subscribe()
    }

    /// What became of the callback's messages.
    pub fn delivery(&self) -> Delivery {
        *self.delivery.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Send `kind` with `payload` to the subscribers and the callback.
    pub fn send(&self, kind: &str, payload: Value) {
        let message = Message {
            kind: kind.to_owned(),
            payload,
        };
        tracing::info!(target: "toolhost::events", kind, payload = %message.payload, "event");
        let _ = self.live.send(message.clone());
        if !self.calls_back {
            return;
        }
        let mut queue = self.lock_queue();
        queue.push_back(message);
        if queue.len() > QUEUED {
            queue.pop_front();
            self.delivery
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .dropped += 1;
        }
        drop(queue);
        self.queued.notify_one();
    }

    /// §5.2 / §5.3: a tool request ended.
    pub fn task_ended(&self, task: &crate::tasks::Task) {
        use crate::tasks::TaskStatus;
        match (task.status, &task.result) {
            (TaskStatus::Completed, Some(result)) => self.send(
                "tool_ready",
                json!({
                    "tool_id": result.tool_id,
                    "result": format!("built and registered: {} serves", result.tool_ids.join(", ")),
                    "url": result.url,
                    "task_id": task.task_id,
                }),
            ),
            (TaskStatus::Failed, _) => self.send(
                "tool_error",
                json!({
                    "tool_id": task.spec.name,
                    "error": task.error.clone().unwrap_or_else(|| "failed".into()),
                    "task_id": task.task_id,
                }),
            ),
            _ => {}
        }
    }

    /// §5.4: a tool turned degraded.
    pub fn health_alert(
        &self,
        tool_id: &str,
        container_id: &str,
        error: &str,
        last_healthy: Option<&str>,
    ) {
        self.send(
            "health_alert",
            json!({
                "tool_id": tool_id,
                "container_id": container_id,
                "error": error,
                "last_healthy": last_healthy,
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callbacks(allow: &[&str]) -> Arc<Callbacks> {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        Arc::new(Callbacks::new(&allow, &[]).unwrap())
    }

    #[tokio::test]
    async fn a_callback_no_host_allows_is_refused_at_start_and_a_stuck_one_drops_the_oldest() {
        let config = EventsConfig {
            callback_url: Some("http://169.254.169.254/latest".into()),
        };
        let err = Events::new(&config, callbacks(&["127.0.0.1:9"]))
            .err()
            .unwrap();
        assert!(err.starts_with("[events] callback_url"), "{err}");

        // Nothing listens on the discard port: the queue holds QUEUED at
        // most, the oldest dropped and counted.
        let config = EventsConfig {
            callback_url: Some("http://127.0.0.1:9/events".into()),
        };
        let events = Events::new(&config, callbacks(&["127.0.0.1:9"])).unwrap();
        let mut live = events.subscribe();
        for i in 0..QUEUED + 5 {
            events.send("health_alert", json!({ "n": i }));
        }
        // A subscriber 256 behind is told how many it missed, then goes on.
        let missed = QUEUED + 5 - 256;
        match live.recv().await {
            Err(broadcast::error::RecvError::Lagged(n)) => assert_eq!(n as usize, missed),
            other => panic!("{other:?}"),
        }
        assert_eq!(live.recv().await.unwrap().payload["n"], missed);
        let d = events.delivery();
        assert!(d.dropped >= 4 && d.dropped <= 5, "{d:?}");
        assert!(events.lock_queue().len() <= QUEUED);

        // Without a callback nothing is queued.
        let quiet = Events::new(&EventsConfig::default(), callbacks(&[])).unwrap();
        quiet.send("tool_ready", json!({}));
        assert!(quiet.lock_queue().is_empty());
    }
}
