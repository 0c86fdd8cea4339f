//! What the host has (seed 004's SystemInfo): CPUs and their use, memory,
//! the data directory's disk. Read from /proc and statvfs(2). And giving
//! memory back once a large part of it was freed ([`give_back_memory`]).

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SystemInfo {
    pub cpu_count: usize,
    /// Busy share of all CPUs over a short sample, percent.
    pub cpu_percent: f64,
    pub memory_total_mb: u64,
    pub memory_available_mb: u64,
    pub memory_percent: f64,
    /// The filesystem of the data directory.
    pub disk_total_gb: f64,
    pub disk_free_gb: f64,
}

/// (busy, total) jiffies of all CPUs.
fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().take(8).sum();
    // idle + iowait
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

fn meminfo(key: &str, text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// Sample the host for `window` (the CPU share is measured over it);
/// blocks the thread for that long.
pub fn sample(data: &Path, window: Duration) -> SystemInfo {
    let before = cpu_times();
    std::thread::sleep(window);
    let after = cpu_times();
    let cpu_percent = match (before, after) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
            100.0 * (b1.saturating_sub(b0)) as f64 / (t1 - t0) as f64
        }
        _ => 0.0,
    };
    let mem = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let total_kb = meminfo("MemTotal:", &mem).unwrap_or(0);
    let available_kb = meminfo("MemAvailable:", &mem).unwrap_or(0);
    let (disk_total, disk_free) = disk(data).unwrap_or((0, 0));
    const GB: f64 = (1u64 << 30) as f64;
    SystemInfo {
        cpu_count: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_percent: round(cpu_percent, 1),
        memory_total_mb: total_kb / 1024,
        memory_available_mb: available_kb / 1024,
        memory_percent: if total_kb == 0 {
            0.0
        } else {
            round(
                100.0 * (total_kb - available_kb.min(total_kb)) as f64 / total_kb as f64,
                1,
            )
        },
        disk_total_gb: round(disk_total as f64 / GB, 2),
        disk_free_gb: round(disk_free as f64 / GB, 2),
    }
}

/// (total, available to us) bytes of the filesystem holding `path`.
fn disk(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let block = s.f_frsize as u64;
    Some((s.f_blocks as u64 * block, s.f_bavail as u64 * block))
}

/// Whether a give-back is already waiting to run.
static GIVE_BACK_PENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// After a toolkit was removed or replaced: in a moment (calls and catalog
/// snapshots that still hold the old version let go first), hand the heap's
/// free memory back to the system. glibc's allocator keeps freed memory for
/// reuse; a removed 1,200-tool OpenAPI toolkit otherwise stays in the RSS
/// for good (tests/bench/spec_churn.py measures it). Several calls in a row
/// give back once.
pub fn give_back_memory() {
    use std::sync::atomic::Ordering;
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if GIVE_BACK_PENDING.swap(true, Ordering::AcqRel) {
        return;
    }
    runtime.spawn(async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        GIVE_BACK_PENDING.store(false, Ordering::Release);
        let _ = tokio::task::spawn_blocking(|| {
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_trim only returns free heap pages to the
            // kernel; it touches no memory in use.
            unsafe {
                libc::malloc_trim(0);
            }
        })
        .await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_described_in_plausible_numbers() {
        let info = sample(Path::new("/"), Duration::from_millis(50));
        assert!(info.cpu_count >= 1);
        assert!((0.0..=100.0).contains(&info.cpu_percent), "{info:?}");
        assert!(info.memory_total_mb > 0 && info.memory_available_mb <= info.memory_total_mb);
        assert!((0.0..=100.0).contains(&info.memory_percent));
        assert!(info.disk_total_gb > 0.0 && info.disk_free_gb <= info.disk_total_gb);
    }
}
