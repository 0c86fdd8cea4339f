//! Where a session's first node goes among several engines: the engine with
//! the most free capacity under seed 004's rule (the CPUs and memory every
//! node of ours there is capped at, against its cores and a share of its
//! memory). Pure functions, tested here; [`super::engines`] feeds them.

/// An engine as placement sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidate {
    /// Answers (or was not checked yet).
    pub up: bool,
    pub drained: bool,
    /// Lacks the image (and no archive can bring it).
    pub lacks_image: bool,
    /// On another machine (its `/proc` is not ours).
    pub remote: bool,
    pub cores: f64,
    pub memory_mb: u64,
    /// Summed caps of our containers on it.
    pub cpus_held: f64,
    pub memory_held_mb: u64,
    pub nodes: usize,
}

/// Seed 004's shares: CPUs allocated ≤ this share of the cores, memory ≤
/// this share of the memory.
#[derive(Debug, Clone, Copy)]
pub struct Shares {
    pub cpu: f64,
    pub memory: f64,
}

/// The engine a new session's node (capped at `cpus`, `memory_mb`) goes to:
/// among usable engines (up, not drained, with the image), those where it
/// fits under the rule first, then the lowest load after it (the larger of
/// the CPU and memory shares), then the fewest nodes, then the first listed.
pub fn place(c: &[Candidate], cpus: f64, memory_mb: u64, shares: Shares) -> Option<usize> {
    place_where(c, cpus, memory_mb, shares, false)
}

/// [`place`], on this machine's engines only when `local`.
pub fn place_where(
    c: &[Candidate],
    cpus: f64,
    memory_mb: u64,
    shares: Shares,
    local: bool,
) -> Option<usize> {
    let load = |x: &Candidate| {
        let cpu = if x.cores > 0.0 {
            (x.cpus_held + cpus) / (x.cores * shares.cpu)
        } else {
            f64::INFINITY
        };
        let mem = if x.memory_mb > 0 {
            (x.memory_held_mb + memory_mb) as f64 / (x.memory_mb as f64 * shares.memory)
        } else {
            f64::INFINITY
        };
        cpu.max(mem)
    };
    c.iter()
        .enumerate()
        .filter(|(_, x)| {
            let usable = x.up && !x.drained && !x.lacks_image;
            let here = !local || !x.remote;
            usable && here
        })
        .map(|(i, x)| {
            let l = load(x);
            // Unknown capacity (not checked yet): as if empty but not fitting.
            let l = if l.is_finite() { l } else { f64::MAX };
            (i, l <= 1.0 + 1e-9, l, x.nodes)
        })
        .min_by(|a, b| {
            b.1.cmp(&a.1)
                .then(a.2.total_cmp(&b.2))
                .then(a.3.cmp(&b.3))
                .then(a.0.cmp(&b.0))
        })
        .map(|(i, ..)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARES: Shares = Shares {
        cpu: 1.0,
        memory: 0.8,
    };

    fn engine(cores: f64, memory_mb: u64) -> Candidate {
        Candidate {
            up: true,
            cores,
            memory_mb,
            ..Default::default()
        }
    }

    #[test]
    fn the_engine_with_the_most_free_capacity_takes_the_node() {
        let mut c = vec![engine(2.0, 4000), engine(8.0, 16000)];
        // The larger engine is the less loaded one after the node.
        assert_eq!(place(&c, 1.0, 512, SHARES), Some(1));
        c[1].cpus_held = 7.5;
        assert_eq!(place(&c, 1.0, 512, SHARES), Some(0), "{c:?}");
        // Memory counts too: 80 % of it.
        c[1].cpus_held = 0.0;
        c[1].memory_held_mb = 12500;
        assert_eq!(place(&c, 0.5, 512, SHARES), Some(0));
        // Equal engines: the fewer nodes, then the first listed.
        let mut c = vec![engine(2.0, 4000), engine(2.0, 4000)];
        assert_eq!(place(&c, 1.0, 512, SHARES), Some(0));
        c[0].cpus_held = 1.0;
        c[0].memory_held_mb = 512;
        c[0].nodes = 1;
        assert_eq!(place(&c, 1.0, 512, SHARES), Some(1));
    }

    #[test]
    fn over_the_rule_everywhere_the_least_loaded_engine_still_takes_it() {
        // Session nodes (1 CPU each) beyond the cores: spread, not refused.
        let mut c = vec![engine(2.0, 24000), engine(2.0, 24000)];
        for _ in 0..40 {
            let i = place(&c, 1.0, 512, SHARES).unwrap();
            c[i].cpus_held += 1.0;
            c[i].memory_held_mb += 512;
            c[i].nodes += 1;
        }
        assert_eq!((c[0].nodes, c[1].nodes), (20, 20));
        // One that fits beats every one that does not.
        c.push(engine(64.0, 100000));
        c[2].cpus_held = 63.0;
        assert_eq!(place(&c, 1.0, 512, SHARES), Some(2));
    }

    #[test]
    fn down_drained_and_imageless_engines_take_no_new_session() {
        let mut c = vec![engine(2.0, 4000), engine(2.0, 4000), engine(2.0, 4000)];
        c[0].up = false;
        c[1].drained = true;
        assert_eq!(place(&c, 1.0, 512, SHARES), Some(2));
        c[2].lacks_image = true;
        assert_eq!(place(&c, 1.0, 512, SHARES), None);
        // A service node goes to this machine's engines only.
        let mut c = vec![engine(64.0, 100000), engine(2.0, 4000)];
        c[0].remote = true;
        assert_eq!(place(&c, 1.0, 512, SHARES), Some(0));
        assert_eq!(place_where(&c, 1.0, 512, SHARES, true), Some(1));
        c[1].remote = true;
        assert_eq!(place_where(&c, 1.0, 512, SHARES, true), None);
        // Not checked yet (no capacity known): usable, after known ones.
        let c = vec![
            Candidate {
                up: true,
                ..Default::default()
            },
            engine(2.0, 4000),
        ];
        assert_eq!(place(&c, 1.0, 512, SHARES), Some(1));
    }
}
