//! `rtgauge monitor`: always-on timer-latency and tuning-drift monitoring for production hosts, spoken in
//! Prometheus' terms.
//!
//! One SCHED_FIFO thread per monitored CPU wakes every `--interval` (5 ms by default: 0.4 % of a CPU on the
//! 2-vCPU VM here, where each wake-up costs ~30 µs of kernel time; 1 ms costs ~3 %) — the timer probe of
//! `rtgauge cyclic`, run in back-to-back segments of
//! 10 s so that memory stays flat over months (each segment's histograms are folded into the exported
//! series and dropped). The probe's live per-tick peak (100 ms) feeds the window-max series, so a spike shows
//! at the next scrape; the histogram and counters are exact and lag by at most one segment.
//!
//! Beside it, on the housekeeping CPUs: an audit thread (every `--audit-every`, findings and drift against
//! the first pass), the `/metrics` endpoint (loopback unless `--allow-remote`), the `--textfile` writer for
//! node_exporter, and `--store-every` snapshots into the run store, so a month of monitoring reports and
//! compares like a run. SIGINT/SIGTERM end the current segment within one probe tick; the last snapshot is
//! stored before exit. The monitor holds no /dev/cpu_dma_latency request: it measures the system as its
//! operator configured it.

mod http;
pub mod metrics;

use super::parse_duration_arg;
use anyhow::{bail, Context as _};
use clap::Args;
use metrics::{CpuSeries, MonitorState};
use rtgauge_host::cpu::{read_cpu_mask, read_cpu_node, CpuMask};
use rtgauge_host::HostRoot;
use rtgauge_model::cyclic::{CyclicConfig, CyclicResult, CyclicThread};
use rtgauge_model::latency::{LatencyStats, TimelineEntry, WindowRecorder};
use rtgauge_model::rt::SchedPolicy;
use rtgauge_model::run::{ProbeResult, RunStatus};
use rtgauge_model::{CpuSet, Nanos};
use rtgauge_probe::clock::Clock;
use rtgauge_probe::cyclic::{self, CyclicPlan, LiveThread};
use rtgauge_probe::stop::StopFlag;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Length of one measuring segment: the histogram's update period and the bound on the monitor's memory.
const SEGMENT: Duration = Duration::from_secs(10);

/// Watch timer latency and tuning continuously; serve them to Prometheus.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("root", |a| a.help("Audit a captured tree instead of this host (latency is always measured here)")))]
pub struct MonitorArgs {
    /// CPUs to measure (kernel list syntax); default: the RT CPU set the audit finds (tuned isolated_cores,
    /// nohz_full, isolcpus), else every online CPU.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Period of each measuring thread (e.g. 1ms, 500us); longer is cheaper, shorter sees more. Each
    /// wake-up costs the kernel a timer and a context switch (about 30 µs in a VM, where arming a timer
    /// exits to the hypervisor): 5 ms keeps the monitor under 1 % of a CPU.
    #[arg(long, value_name = "D", default_value = "5ms", value_parser = parse_duration_arg)]
    pub interval: Nanos,

    /// SCHED_FIFO priority of the measuring threads (1-99).
    #[arg(long, value_name = "PRIO", default_value_t = 90, value_parser = clap::value_parser!(i32).range(1..=99))]
    pub priority: i32,

    /// Address of the /metrics endpoint, or 'off'. Loopback only unless --allow-remote.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    pub listen: String,

    /// Allow --listen on a non-loopback address (the series describe the host's tuning).
    #[arg(long)]
    pub allow_remote: bool,

    /// Also write the series to DIR/rtgauge.prom (atomically, every 10 s) for node_exporter's textfile
    /// collector.
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,

    /// How often to re-run the audit (0 = never).
    #[arg(long, value_name = "D", default_value = "5m", value_parser = parse_duration_arg)]
    pub audit_every: Nanos,

    /// Latency bound: samples at or above it are counted (rtgauge_samples_above_gate_total).
    #[arg(long, value_name = "D", default_value = "100us", value_parser = parse_duration_arg)]
    pub gate: Nanos,

    /// Span of rtgauge_latency_window_max_seconds; keep it at least one scrape interval.
    #[arg(long, value_name = "D", default_value = "15s", value_parser = parse_duration_arg)]
    pub window: Nanos,

    /// Store a snapshot run (the latency of the period, as a cyclic probe result) this often, and at exit.
    #[arg(long, value_name = "D", value_parser = parse_duration_arg)]
    pub store_every: Option<Nanos>,

    /// Label of the stored snapshots.
    #[arg(long, value_name = "TEXT", value_parser = super::parse_name)]
    pub label: Option<String>,

    /// Results database: a SQLite file or a postgresql:// URL (default: $RTGAUGE_DB, else
    /// $XDG_DATA_HOME/rtgauge/rtgauge.db).
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,

    #[command(flatten)]
    pub root: super::RootArg,

    /// Stop after this long (default: run until SIGINT/SIGTERM).
    #[arg(short = 'D', long, value_name = "TIME", value_parser = parse_duration_arg)]
    pub duration: Option<Nanos>,
}

/// What the monitor measures, resolved from the flags.
struct Setup {
    cpus: CpuSet,
    housekeeping: Option<CpuSet>,
    listen: Option<SocketAddr>,
}

fn resolve(a: &MonitorArgs) -> anyhow::Result<Setup> {
    let live = HostRoot::live();
    let online = read_cpu_mask(&live, CpuMask::Online).context("reading the online CPUs")?;
    let cpus = match &a.cpus {
        Some(t) => {
            let set = CpuSet::parse(t).map_err(|e| anyhow::anyhow!("--cpus {t}: {e}"))?;
            let offline = set.difference(&online);
            if !offline.is_empty() {
                bail!("--cpus {t}: CPU {offline} is not online");
            }
            set
        }
        None => {
            // The measured CPUs are this machine's, whatever tree the audit reads.
            let cmdline = rtgauge_host::fingerprint::read_cmdline(&live);
            rtgauge_host::audit::derive_isolated(&live, &cmdline, &online, None)
                .map(|(s, _)| s.intersection(&online))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| online.clone())
        }
    };
    if cpus.is_empty() {
        bail!("--cpus: no CPU to measure");
    }
    if a.interval.as_ns() < 50_000 || a.interval.as_ns() > 1_000_000_000 {
        bail!(
            "--interval {}: between 50us and 1s (a monitor runs for months; use rtgauge cyclic for dense sampling)",
            a.interval
        );
    }
    if a.window.as_ns() < 1_000_000_000 {
        bail!("--window {}: at least 1s", a.window);
    }
    let listen = if a.listen == "off" {
        None
    } else {
        let addr: SocketAddr = a.listen.parse().map_err(|_| {
            anyhow::anyhow!(
                "--listen {}: not an address such as 127.0.0.1:9464 (or 'off')",
                a.listen
            )
        })?;
        if !addr.ip().is_loopback() && !a.allow_remote {
            bail!(
                "--listen {addr}: not a loopback address; the series describe this host's tuning, so serving \
                 them beyond it needs --allow-remote"
            );
        }
        Some(addr)
    };
    if listen.is_none() && a.textfile.is_none() && a.store_every.is_none() {
        bail!("--listen off: give --textfile DIR or --store-every D, or the monitor has no output");
    }
    let rest = online.difference(&cpus);
    Ok(Setup {
        housekeeping: (!rest.is_empty()).then_some(rest),
        cpus,
        listen,
    })
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn lock(state: &Mutex<MonitorState>) -> std::sync::MutexGuard<'_, MonitorState> {
    // A panic while holding the lock cannot leave the plain-data state half-written in a way that matters
    // for the next scrape; keep serving.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// `rtgauge monitor`.
pub fn run(a: &MonitorArgs) -> anyhow::Result<ExitCode> {
    let audit_root = a.root.open()?;
    let setup = resolve(a)?;
    let listener = match setup.listen {
        Some(addr) => Some(
            TcpListener::bind(addr).with_context(|| format!("--listen {addr}: cannot listen"))?,
        ),
        None => None,
    };
    if let Some(dir) = &a.textfile {
        if !dir.is_dir() {
            bail!("--textfile {}: not a directory", dir.display());
        }
    }
    let mut store = match a.store_every {
        Some(_) => {
            let (s, db) = super::open_store(a.db.as_deref())?;
            Some((s, db))
        }
        None => None,
    };

    let stop = StopFlag::new();
    stop.on_termination_signals()
        .context("installing SIGINT/SIGTERM handlers")?;
    // Threads started from here inherit the housekeeping affinity; the measuring threads pin themselves.
    if let Some(hk) = &setup.housekeeping {
        rtgauge_probe::rt::set_affinity(hk);
    }

    let state = Arc::new(Mutex::new(MonitorState {
        version: env!("CARGO_PKG_VERSION").to_string(),
        interval_ns: a.interval.as_ns(),
        cpus_text: setup.cpus.to_string(),
        start_unix_s: unix_now(),
        gate_ns: a.gate.as_ns(),
        cpus: setup.cpus.iter().map(CpuSeries::new).collect(),
        ..MonitorState::default()
    }));
    if let Some(l) = listener {
        let addr = l
            .local_addr()
            .map_or_else(|_| a.listen.clone(), |x| x.to_string());
        eprintln!("rtgauge monitor: serving http://{addr}/metrics");
        let st = Arc::clone(&state);
        std::thread::Builder::new()
            .name("rtg-metrics".into())
            .spawn(move || http::serve(l, st))
            .context("starting the metrics endpoint")?;
    }
    if a.audit_every.as_ns() > 0 {
        let (st, root, every, stop) = (
            Arc::clone(&state),
            audit_root.clone(),
            Duration::from_nanos(a.audit_every.as_ns()),
            stop.clone(),
        );
        std::thread::Builder::new()
            .name("rtg-audit".into())
            .spawn(move || audit_loop(&root, &st, every, &stop))
            .context("starting the audit thread")?;
    }

    let plan = segment_plan(a, &setup);
    let deadline = a
        .duration
        .map(|d| Instant::now() + Duration::from_nanos(d.as_ns()));
    let store_every = a.store_every.map(|d| Duration::from_nanos(d.as_ns()));
    let mut snapshot = Snapshot::new(&plan.config);
    let mut warned = false;
    loop {
        let mut seg_plan = plan.clone();
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let seg = left.map_or(SEGMENT, |l| l.min(SEGMENT));
        seg_plan.config.duration_ns = Some(seg.as_nanos() as u64);
        let started = Instant::now();
        let window_ns = a.window.as_ns();
        let st = Arc::clone(&state);
        let mut hook = |elapsed: Duration, threads: &[LiveThread]| {
            let now = (started.elapsed().max(elapsed)).as_nanos() as u64;
            let mut g = lock(&st);
            for (c, t) in g.cpus.iter_mut().zip(threads) {
                c.add_peak(now, t.peak_ns, window_ns);
            }
        };
        let result = cyclic::run(&seg_plan, &stop, &mut hook).context("measuring timer latency")?;
        if !warned {
            for w in super::cyclic::shortfalls(&result) {
                eprintln!("rtgauge monitor: warning: {w}");
            }
            warned = true;
        }
        fold_segment(&mut lock(&state), &result, a.gate.as_ns());
        read_cpu_times(&mut lock(&state));
        if let Some(dir) = &a.textfile {
            write_textfile(dir, &lock(&state))?;
        }
        // Segments are kept (merged) only for the store's snapshots: without --store-every nothing grows.
        if store.is_some() {
            snapshot.absorb(result);
        }
        let stopping = stop.is_set() || deadline.is_some_and(|d| Instant::now() >= d);
        if let (Some((s, db)), Some(every)) = (store.as_mut(), store_every) {
            if stopping || snapshot.started.elapsed() >= every {
                if let Some(doc) = snapshot.document(a) {
                    s.insert(&doc)
                        .with_context(|| format!("storing a monitor snapshot in {db}"))?;
                }
                snapshot = Snapshot::new(&plan.config);
            }
        }
        if stopping {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The timer probe's plan for one segment: one SCHED_FIFO thread per CPU, no rt-tests histogram, no
/// cpu_dma_latency request, the main thread on the housekeeping CPUs.
fn segment_plan(a: &MonitorArgs, setup: &Setup) -> CyclicPlan {
    let live = HostRoot::live();
    let cpus: Vec<Option<u32>> = setup.cpus.iter().map(Some).collect();
    CyclicPlan {
        config: CyclicConfig {
            threads: cpus.len() as u32,
            interval_ns: a.interval.as_ns(),
            distance_ns: 0,
            policy: SchedPolicy::Fifo,
            priority: a.priority,
            priospread: false,
            duration_ns: Some(SEGMENT.as_nanos() as u64),
            loops: None,
            relative: false,
            skip_missed: false,
            hist_buckets: None,
            unit_ns: 1000,
            spike_threshold_ns: None,
            break_threshold_ns: None,
            timeline_interval_ns: 1_000_000_000,
            cpus: cpus.clone(),
        },
        clock: Clock::Monotonic,
        mlockall: true,
        dma_latency_us: None,
        main_cpus: setup.housekeeping.clone(),
        spike_nodes: 0,
        late_floor_ns: None,
        nodes: cpus
            .iter()
            .map(|c| c.and_then(|c| read_cpu_node(&live, c)))
            .collect(),
        tick: Duration::from_millis(100),
    }
}

/// Fold one segment's exact histograms and counters into the exported series.
fn fold_segment(state: &mut MonitorState, r: &CyclicResult, gate_ns: u64) {
    for (c, t) in state.cpus.iter_mut().zip(&r.threads) {
        c.missed += t.missed_deadlines;
        c.count += t.latency.count;
        c.sum_ns += u128::from(t.latency.sum_ns);
        let Ok(h) = t.latency.hdr.decode() else {
            continue;
        };
        // Each HDR bucket is counted at its highest equivalent value: a sample is never put in a lower
        // Prometheus bucket than its own (HDR's 3 significant digits make the difference < 0.1 %).
        for v in h.iter_recorded() {
            c.add_bucket(v.value_iterated_to(), v.count_at_value());
        }
        c.above_gate += h.count_between(gate_ns, u64::MAX);
    }
}

/// Steal, IRQ and softirq time of the monitored CPUs since boot, from /proc/stat.
fn read_cpu_times(state: &mut MonitorState) {
    let Ok(text) = HostRoot::live().read_text("/proc/stat") else {
        return;
    };
    let (ticks, _) = rtgauge_host::accounting::parse_stat_times(&text);
    // USER_HZ from the host crate, so that the binary needs no unsafe code of its own.
    let hz = 1e9 / rtgauge_host::accounting::tick_ns() as f64;
    for c in &mut state.cpus {
        if let Some(t) = ticks.get(&c.cpu) {
            c.steal_s = t.steal as f64 / hz;
            c.irq_s = t.irq as f64 / hz;
            c.softirq_s = t.softirq as f64 / hz;
        }
    }
}

/// DIR/rtgauge.prom, replaced atomically (written beside it, then renamed) so the collector never reads
/// half a file.
fn write_textfile(dir: &Path, state: &MonitorState) -> anyhow::Result<()> {
    let path = dir.join("rtgauge.prom");
    crate::output::write_atomic(&path, metrics::render_textfile(state).as_bytes())
        .with_context(|| format!("--textfile {}", dir.display()))
}

/// Re-run the audit every `every` and fold its findings into the state (drift is logged with the rule id).
fn audit_loop(root: &HostRoot, state: &Mutex<MonitorState>, every: Duration, stop: &StopFlag) {
    let opts = rtgauge_host::audit::AuditOptions {
        target: None,
        isolated: None,
        sample: Some(Duration::from_secs(1)),
    };
    loop {
        let report = rtgauge_host::audit::run_audit(root, &opts);
        let findings = report.findings.iter().map(|f| {
            (
                f.id.clone(),
                f.severity.as_str().to_string(),
                f.status.as_str().to_string(),
            )
        });
        for line in lock(state).apply_audit(findings, unix_now()) {
            eprintln!("rtgauge monitor: {line}");
        }
        let until = Instant::now() + every;
        while Instant::now() < until {
            if stop.is_set() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100).min(every));
        }
    }
}

/// The segments of one store period, merged into one cyclic result.
struct Snapshot {
    started: Instant,
    started_at: String,
    before: rtgauge_host::accounting::Snapshot,
    merged: Option<CyclicResult>,
    windows: Vec<WindowRecorder>,
    offset_ns: u64,
}

impl Snapshot {
    fn new(config: &CyclicConfig) -> Snapshot {
        Snapshot {
            started: Instant::now(),
            started_at: crate::output::now_rfc3339(),
            before: rtgauge_host::accounting::read_snapshot(&HostRoot::live()),
            merged: None,
            windows: (0..config.threads)
                .map(|_| WindowRecorder::new(SEGMENT.as_nanos() as u64))
                .collect(),
            offset_ns: 0,
        }
    }

    fn absorb(&mut self, seg: CyclicResult) {
        for (w, t) in self.windows.iter_mut().zip(&seg.threads) {
            if let Ok(h) = t.latency.hdr.decode() {
                w.push(&h, 1);
            }
        }
        let offset = self.offset_ns;
        self.offset_ns += seg.elapsed_ns;
        match &mut self.merged {
            None => {
                let mut seg = seg;
                seg.spikes.clear();
                self.merged = Some(seg);
            }
            Some(m) => {
                for (a, b) in m.threads.iter_mut().zip(seg.threads) {
                    merge_thread(a, b, offset);
                }
                m.elapsed_ns += seg.elapsed_ns;
                m.stop_reason = seg.stop_reason;
            }
        }
    }

    /// The period as a run document; `None` before the first segment ended. A snapshot is complete also
    /// when SIGTERM cut its period short: it holds every sample of the time it covers, and stopping is how a
    /// monitor ends.
    fn document(&mut self, a: &MonitorArgs) -> Option<rtgauge_model::run::RunDocument> {
        let root = HostRoot::live();
        let mut r = self.merged.take()?;
        for (t, w) in r.threads.iter_mut().zip(&self.windows) {
            t.windows = w.windows();
        }
        r.config.duration_ns = Some(r.elapsed_ns);
        r.accounting = Some(rtgauge_host::accounting::delta(
            &self.before,
            &rtgauge_host::accounting::read_snapshot(&root),
        ));
        let mut doc = crate::output::document(
            self.started_at.clone(),
            rtgauge_host::system::read_system_info(&root),
            vec![ProbeResult::Cyclic(r)],
            RunStatus::Complete,
            Vec::new(),
        );
        doc.label = a.label.clone();
        doc.tags.insert("source".into(), "monitor".into());
        Some(doc)
    }
}

/// Add segment thread `b` (which started `offset_ns` after the period's start) to `a`.
fn merge_thread(a: &mut CyclicThread, b: CyclicThread, offset_ns: u64) {
    a.cycles += b.cycles;
    a.missed_deadlines += b.missed_deadlines;
    a.skipped_periods += b.skipped_periods;
    a.early_wakeups += b.early_wakeups;
    a.last_ns = b.last_ns;
    a.timeline_dropped += b.timeline_dropped;
    a.timeline.extend(b.timeline.iter().map(|e| TimelineEntry {
        start_ns: e.start_ns + offset_ns,
        ..*e
    }));
    if let (Ok(mut h), Ok(hb)) = (a.latency.hdr.decode(), b.latency.hdr.decode()) {
        if h.add(&hb).is_ok() {
            let min = match (a.latency.count, b.latency.count) {
                (0, _) => b.latency.min_ns,
                (_, 0) => a.latency.min_ns,
                _ => a.latency.min_ns.min(b.latency.min_ns),
            };
            a.latency = LatencyStats::from_parts(
                &h,
                min,
                a.latency.max_ns.max(b.latency.max_ns),
                a.latency.sum_ns.saturating_add(b.latency.sum_ns),
                a.latency.clamped + b.latency.clamped,
            );
        }
    }
}
