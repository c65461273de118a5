//! The federation run's real gmetads (`--fed-gmetad`): one on the
//! baseline gateway's port, or one per shard port and a top above them;
//! each one's CPU per step once its hosts' RRDs exist, and its disk.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::{FedOptions, shard_of};
use crate::gateway::{clock_ticks, cpu_ticks};
use crate::{Scratch, free_port};

/// One real gmetad in steady state.
#[derive(Debug, Default)]
pub struct GmetadRun {
    pub label: String,
    pub cpu_per_step: f64,
    pub busiest_thread_per_step: f64,
    pub rrd_bytes: u64,
    pub rrd_files: u64,
    /// How long until its hosts' RRDs existed (None: not within the wait).
    pub created_s: Option<f64>,
}

/// A real gmetad: its process, its scratch directory (rrd_rootdir under
/// it), its xml_port; killed on drop.
struct RealGmetad {
    child: Child,
    label: String,
    dir: Scratch,
    xml_port: u16,
}

impl Drop for RealGmetad {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RealGmetad {
    /// gmetad polling 127.0.0.1:`port` of each `(name, port)`, with
    /// `extra` lines (gridname, scalable) and the run's RRAs.
    fn start(label: &str, sources: &[(String, u16)], o: &FedOptions, extra: &str) -> RealGmetad {
        let dir = Scratch::new("fed-gmetad");
        let rrds = dir.0.join("rrds");
        std::fs::create_dir_all(&rrds).expect("rrd_rootdir");
        let xml_port = free_port();
        let mut conf = String::new();
        for (name, port) in sources {
            conf.push_str(&format!(
                "data_source {name:?} {} 127.0.0.1:{port}\n",
                o.step
            ));
        }
        if !o.rras.is_empty() {
            conf.push_str(&format!("RRAs {:?}\n", o.rras));
        }
        conf.push_str(&format!(
            "{extra}\nsetuid off\nxml_port {xml_port}\ninteractive_port {}\nserver_threads 2\n\
             trusted_hosts 127.0.0.1\nrrd_rootdir {:?}\n",
            free_port(),
            rrds.display().to_string()
        ));
        let path = dir.0.join("gmetad.conf");
        std::fs::write(&path, conf).expect("gmetad.conf");
        let log = std::fs::File::create(dir.0.join("gmetad.log")).expect("gmetad.log");
        let child = Command::new("/usr/sbin/gmetad")
            .arg("-c")
            .arg(&path)
            .args(["-d", "1"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("gmetad (Debian's gmetad package)");
        RealGmetad {
            child,
            label: label.into(),
            dir,
            xml_port,
        }
    }

    fn rrds(&self) -> std::path::PathBuf {
        self.dir.0.join("rrds")
    }

    /// Host directories under rrd_rootdir (each cluster's, summaries left out).
    fn host_dirs(&self) -> usize {
        dirs(&self.rrds()).iter().map(|c| dirs(c).len()).sum()
    }

    /// CPU ticks of the process and of each of its threads.
    fn ticks(&self) -> (u64, HashMap<String, u64>) {
        let pid = self.child.id();
        let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| {
                let tid = t.file_name().to_string_lossy().into_owned();
                let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
                Some((tid, stat_ticks(&stat)))
            })
            .collect();
        (cpu_ticks(pid), threads)
    }
}

/// utime + stime of a /proc stat line.
fn stat_ticks(stat: &str) -> u64 {
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

/// Subdirectories of `dir` but gmetad's `__SummaryInfo__`.
fn dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != "__SummaryInfo__")
        .map(|e| e.path())
        .collect()
}

/// Bytes and files under `dir` (`du`'s apparent size would do as well).
fn disk(dir: &Path) -> (u64, u64) {
    let mut total = (0, 0);
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        match e.metadata() {
            Ok(m) if m.is_dir() => {
                let (b, f) = disk(&e.path());
                total = (total.0 + b, total.1 + f);
            }
            Ok(m) => total = (total.0 + m.len(), total.1 + 1),
            Err(_) => {}
        }
    }
    total
}

/// Real gmetads on the gateway's ports: one on its port (the baseline),
/// or one per shard port and a top above them. Each measured over
/// `sustain` once its hosts' RRDs exist.
pub(super) fn gmetads(o: &FedOptions, xml_port: u16, shard_ports: &[u16]) -> Vec<GmetadRun> {
    let mut running = Vec::new();
    let mut hosts = Vec::new();
    if shard_ports.is_empty() {
        running.push(RealGmetad::start(
            "one gmetad",
            &[("all".into(), xml_port)],
            o,
            "",
        ));
        hosts.push(o.servers);
    }
    for (s, p) in shard_ports.iter().enumerate() {
        let grid = format!("gridname \"Shard{s}\"");
        running.push(RealGmetad::start(
            &format!("shard {s}"),
            &[(format!("shard{s}"), *p)],
            o,
            &grid,
        ));
        hosts.push((0..o.servers).filter(|&i| shard_of(i, o) == s).count());
    }
    if !shard_ports.is_empty() {
        let sources: Vec<(String, u16)> = running
            .iter()
            .enumerate()
            .map(|(s, g)| (format!("Shard{s}"), g.xml_port))
            .collect();
        running.push(RealGmetad::start(
            "top",
            &sources,
            o,
            "gridname \"Top\"\nscalable on",
        ));
        hosts.push(0);
    }
    // RRDs made: every host's directory, then two steps for the last
    // ones' files.
    let t0 = Instant::now();
    let created: Vec<Option<f64>> = running
        .iter()
        .zip(&hosts)
        .map(|(g, &n)| {
            while g.host_dirs() < n && t0.elapsed() < Duration::from_secs(1200) {
                thread::sleep(Duration::from_secs(1));
            }
            (g.host_dirs() >= n).then(|| t0.elapsed().as_secs_f64())
        })
        .collect();
    thread::sleep(Duration::from_secs(2 * o.step));
    let before: Vec<_> = running.iter().map(RealGmetad::ticks).collect();
    let t = Instant::now();
    thread::sleep(o.sustain);
    let steps = t.elapsed().as_secs_f64() / o.step as f64;
    running
        .iter()
        .zip(before)
        .zip(created)
        .map(|((g, (cpu0, threads0)), created_s)| {
            let (cpu1, threads1) = g.ticks();
            let busiest = threads1
                .iter()
                .map(|(tid, t)| t - threads0.get(tid).copied().unwrap_or(0))
                .max()
                .unwrap_or(0);
            let (rrd_bytes, rrd_files) = disk(&g.rrds());
            GmetadRun {
                label: g.label.clone(),
                cpu_per_step: (cpu1 - cpu0) as f64 / clock_ticks() / steps,
                busiest_thread_per_step: busiest as f64 / clock_ticks() / steps,
                rrd_bytes,
                rrd_files,
                created_s,
            }
        })
        .collect()
}
