//! The node backend's series in `/metrics`, registered in the server's
//! registry at the first scrape and brought up to date at each: nodes by
//! state, removals, each toolkit's availability and failed creations, and
//! each place of the provider (a Docker engine: up, drained, nodes there).
//! The names keep their `docker_` prefix: dashboards read them.

use prometheus::{IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry};

/// Counts of nodes, read at scrape time.
#[derive(Debug, Default, Clone)]
pub struct NodeCensus {
    /// Nodes serving a session.
    pub running: u64,
    /// Pre-started nodes waiting in the hot pools.
    pub pooled: u64,
    /// Nodes removed since start (idle, dead, closed sessions, evicted).
    pub removed: u64,
    /// Per toolkit: whether its nodes can be created now, and how many
    /// creations failed since start.
    pub toolkits: Vec<ToolkitCensus>,
    /// Per place of the provider (a Docker engine): health, drain, nodes.
    pub engines: Vec<EngineCensus>,
}

/// One engine in the [`NodeCensus`].
#[derive(Debug, Clone)]
pub struct EngineCensus {
    pub engine: String,
    pub up: bool,
    pub drained: bool,
    pub nodes: u64,
}

/// One toolkit in the [`NodeCensus`].
#[derive(Debug, Clone)]
pub struct ToolkitCensus {
    pub toolkit: String,
    pub available: bool,
    pub create_failures: u64,
}

/// The series, registered once.
pub struct NodeSeries {
    nodes: IntGaugeVec,
    nodes_removed: IntCounter,
    /// Per engine: `up` (1/0), `drained` (1/0), `nodes`.
    engine_gauges: [IntGaugeVec; 3],
    toolkit_available: IntGaugeVec,
    create_failures: IntCounterVec,
}

impl NodeSeries {
    /// The series, registered in `r` (a registry that has them already
    /// keeps its own; these then record nothing visible).
    pub fn register(r: &Registry) -> Self {
        let add = |c: Box<dyn prometheus::core::Collector>| {
            let _ = r.register(c);
        };
        let gauge = |name: &str, help: &str, label: &str| {
            let g = IntGaugeVec::new(Opts::new(name, help), &[label]).expect("valid metric");
            add(Box::new(g.clone()));
            g
        };
        let nodes = gauge(
            "docker_nodes",
            "Docker nodes by state: `running` (serving a session) or `pooled` (pre-started).",
            "state",
        );
        let nodes_removed = IntCounter::new(
            "docker_nodes_removed_total",
            "Docker nodes removed (idle, dead, session closed, evicted, shutdown).",
        )
        .expect("valid metric");
        add(Box::new(nodes_removed.clone()));
        let toolkit_available = gauge(
            "docker_toolkit_available",
            "1 when a Docker toolkit's nodes can be created now, 0 when not (see GET /plugins for why).",
            "toolkit",
        );
        let create_failures = IntCounterVec::new(
            Opts::new(
                "docker_node_create_failures_total",
                "Docker nodes (session or hot pool) that could not be created or started.",
            ),
            &["toolkit"],
        )
        .expect("valid metric");
        add(Box::new(create_failures.clone()));
        let engine_gauges = [
            gauge(
                "docker_engine_up",
                "1 when a Docker engine of the node pool answers its health check, 0 when not.",
                "engine",
            ),
            gauge(
                "docker_engine_drained",
                "1 when a Docker engine is drained (no new session goes there).",
                "engine",
            ),
            gauge(
                "docker_engine_nodes",
                "Our containers on each Docker engine (session, pooled and service nodes).",
                "engine",
            ),
        ];
        NodeSeries {
            nodes,
            nodes_removed,
            engine_gauges,
            toolkit_available,
            create_failures,
        }
    }

    /// Bring the series up to `c`.
    pub fn record(&self, c: &NodeCensus) {
        self.nodes
            .with_label_values(&["running"])
            .set(c.running as i64);
        self.nodes
            .with_label_values(&["pooled"])
            .set(c.pooled as i64);
        let counter = &self.nodes_removed;
        counter.inc_by(c.removed.saturating_sub(counter.get()));
        for t in &c.toolkits {
            self.toolkit_available
                .with_label_values(&[&t.toolkit])
                .set(i64::from(t.available));
            let failures = self.create_failures.with_label_values(&[&t.toolkit]);
            failures.inc_by(t.create_failures.saturating_sub(failures.get()));
        }
        let [up, drained, nodes] = &self.engine_gauges;
        for e in &c.engines {
            up.with_label_values(&[&e.engine]).set(i64::from(e.up));
            drained
                .with_label_values(&[&e.engine])
                .set(i64::from(e.drained));
            nodes.with_label_values(&[&e.engine]).set(e.nodes as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_census_shows_up_in_the_text_format() {
        let m = crate::metrics::Metrics::new();
        let series = NodeSeries::register(m.registry());
        series.record(&NodeCensus {
            running: 2,
            pooled: 1,
            removed: 5,
            toolkits: vec![ToolkitCensus {
                toolkit: "shell".into(),
                available: false,
                create_failures: 3,
            }],
            engines: vec![EngineCensus {
                engine: "b".into(),
                up: false,
                drained: true,
                nodes: 4,
            }],
        });
        let text = m.render();
        for line in [
            r#"toolhost_docker_nodes{state="running"} 2"#,
            r#"toolhost_docker_nodes{state="pooled"} 1"#,
            "toolhost_docker_nodes_removed_total 5",
            r#"toolhost_docker_toolkit_available{toolkit="shell"} 0"#,
            r#"toolhost_docker_node_create_failures_total{toolkit="shell"} 3"#,
            r#"toolhost_docker_engine_up{engine="b"} 0"#,
            r#"toolhost_docker_engine_drained{engine="b"} 1"#,
            r#"toolhost_docker_engine_nodes{engine="b"} 4"#,
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
        // The removed counter follows the backend's count without going back.
        series.record(&NodeCensus {
            removed: 7,
            ..Default::default()
        });
        assert!(m.render().contains("toolhost_docker_nodes_removed_total 7"));
    }
}
