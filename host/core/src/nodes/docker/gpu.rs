//! GPUs for nodes (seed 004's `use_gpu` / `gpu_count`, `resource_limits.gpu`):
//! a toolkit whose `[docker]` asks for a GPU gets the engine's device
//! request (as `docker run --gpus` sends it: no driver named, the `gpu`
//! capability, a count or -1 for all), on an engine with a GPU runtime
//! (`docker info` lists the `nvidia` runtime) and GPUs free under the
//! allocation rule (each engine offers `[docker] gpus`, or one when it has
//! the runtime; a node holds its count, -1 all of them). Where no engine
//! has one, the toolkit is unavailable with that reason and no container
//! of it is ever started.

use std::collections::HashMap;

use bollard::models::DeviceRequest;

/// The runtime whose presence says an engine can give GPUs.
pub const GPU_RUNTIME: &str = "nvidia";

/// Why a GPU toolkit cannot start here.
pub fn no_gpu(toolkit: &str) -> String {
    format!(
        "the {toolkit} toolkit asks for a GPU (gpu = true), but no Docker engine here has a GPU runtime \
         (`docker info` lists no `{GPU_RUNTIME}` runtime); it is never started without one"
    )
}

/// The device request of a node asking for `count` GPUs (-1: all).
pub fn device_requests(count: i64) -> Vec<DeviceRequest> {
    vec![DeviceRequest {
        driver: Some(String::new()),
        count: Some(count),
        capabilities: Some(vec![vec!["gpu".to_owned()]]),
        ..Default::default()
    }]
}

/// Whether an engine's runtimes include a GPU runtime.
pub fn has_runtime<T>(runtimes: Option<&HashMap<String, T>>) -> bool {
    runtimes.is_some_and(|r| r.contains_key(GPU_RUNTIME))
}

/// GPUs an engine offers: configured, else one when it has the runtime.
pub fn offered(configured: Option<u32>, runtime: bool) -> u32 {
    match (runtime, configured) {
        (false, _) => 0,
        (true, Some(n)) => n,
        (true, None) => 1,
    }
}

/// GPUs a node asking for `count` holds of an engine offering `offered`.
pub fn held_by(count: i64, offered: u32) -> u32 {
    if count < 0 {
        offered
    } else {
        count.min(i64::from(u32::MAX)) as u32
    }
}

/// The engine (`(index, offered, held)`, usable ones) that takes a node
/// asking for `count` GPUs: the one with the most free, if one has enough.
pub fn pick(engines: &[(usize, u32, u32)], count: i64) -> Option<usize> {
    engines
        .iter()
        .filter(|(_, offered, held)| {
            let free = offered.saturating_sub(*held);
            *offered > 0 && free >= held_by(count, *offered).max(1)
        })
        .max_by_key(|(i, offered, held)| (offered.saturating_sub(*held), std::cmp::Reverse(*i)))
        .map(|(i, ..)| *i)
}

impl super::engines::Engines {
    /// Whether an engine that answers offers GPUs.
    pub fn any_gpu(&self) -> bool {
        self.members.iter().any(|m| {
            let s = super::engines::lock(&m.state);
            s.is_up() && s.gpus > 0
        })
    }

    /// The engine for a node asking for `count` GPUs (-1: all of one
    /// engine's), under the allocation rule; why none otherwise.
    pub fn gpu_engine(&self, toolkit: &str, count: i64) -> Result<usize, crate::tool::CallError> {
        let homes = super::engines::lock(&self.homes);
        let usable: Vec<(usize, u32, u32)> = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.is_drained())
            .filter_map(|(i, m)| {
                let s = super::engines::lock(&m.state);
                (s.is_up() && s.gpus > 0).then(|| {
                    let held = homes
                        .values()
                        .filter(|h| h.engine == i)
                        .map(|h| h.gpus)
                        .sum();
                    (i, s.gpus, held)
                })
            })
            .collect();
        drop(homes);
        match pick(&usable, count) {
            Some(i) => Ok(i),
            None if usable.is_empty() => {
                Err(crate::tool::CallError::BackendUnavailable(no_gpu(toolkit)))
            }
            None => Err(crate::tool::CallError::Overloaded(format!(
                "the {toolkit} toolkit asks for {} GPU(s) and every engine's are held by other nodes: retry when one ends",
                if count < 0 {
                    "all of an engine's".to_owned()
                } else {
                    count.to_string()
                }
            ))),
        }
    }

    /// Container `name` (settled on its engine) holds the GPUs of a
    /// request for `count`.
    pub fn hold_gpus(&self, name: &str, count: i64) {
        let mut homes = super::engines::lock(&self.homes);
        if let Some(home) = homes.get_mut(name) {
            let offered = super::engines::lock(&self.member(home.engine).state).gpus;
            home.gpus = held_by(count, offered);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_the_engine_receives_is_dockers_own() {
        // As `docker run --gpus all` and `--gpus 2` send it.
        let all = serde_json::to_value(device_requests(-1)).unwrap();
        assert_eq!(
            all,
            serde_json::json!([{"Driver": "", "Count": -1, "Capabilities": [["gpu"]]}])
        );
        let two = serde_json::to_value(device_requests(2)).unwrap();
        assert_eq!(two[0]["Count"], 2);
        // In a create body, under HostConfig.DeviceRequests.
        let body = bollard::models::ContainerCreateBody {
            host_config: Some(bollard::models::HostConfig {
                device_requests: Some(device_requests(1)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let body = serde_json::to_value(body).unwrap();
        assert_eq!(
            body["HostConfig"]["DeviceRequests"][0]["Capabilities"][0][0],
            "gpu"
        );
    }

    #[test]
    fn gpus_are_counted_and_only_engines_with_the_runtime_take_them() {
        let mut runtimes = HashMap::new();
        runtimes.insert("runc".to_owned(), ());
        assert!(!has_runtime(Some(&runtimes)));
        runtimes.insert("nvidia".to_owned(), ());
        assert!(has_runtime(Some(&runtimes)) && !has_runtime::<()>(None));
        assert_eq!(
            (
                offered(Some(4), false),
                offered(None, true),
                offered(Some(4), true)
            ),
            (0, 1, 4)
        );
        // No engine offers any: none takes it.
        assert_eq!(pick(&[(0, 0, 0), (1, 0, 0)], 1), None);
        // The most free; one full is passed over.
        assert_eq!(pick(&[(0, 2, 2), (1, 4, 1), (2, 4, 3)], 1), Some(1));
        assert_eq!(pick(&[(0, 2, 1)], 2), None);
        // All of one engine's: only an engine with none held.
        assert_eq!(pick(&[(0, 2, 1), (1, 2, 0)], -1), Some(1));
        assert_eq!(held_by(-1, 3), 3);
    }
}
