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
//! Beside them, the kinds watched without end that the flags ask for (`rtgauge_flags::kinds::WatchArgs`):
//! each a [`rtgauge_session::watch::Watch`], started here, ticked with the timer probe, its series in the
//! state; this module names none of them.
//!
//! Beside it, on the housekeeping CPUs: an audit thread (every `--audit-every`, findings and drift against
//! the first pass), the `/metrics` endpoint (loopback unless `--allow-remote`), the `--textfile` writer for
//! node_exporter, and `--store-every` snapshots into the run store, so a month of monitoring reports and
//! compares like a run. SIGINT/SIGTERM end the current segment within one probe tick; the last snapshot is
//! stored before exit. The monitor holds no /dev/cpu_dma_latency request: it measures the system as its
//! operator configured it.

mod http;
mod store_every;

use store_every::StorePeriod;

use anyhow::{bail, Context as _};
use rtgauge_analysis::monitor::{CpuSeries, MonitorState};
use rtgauge_flags::monitor::{resolve, MonitorArgs, MonitorPlan};
use rtgauge_formats::openmetrics;
use rtgauge_host::cpu::read_cpu_node;
use rtgauge_host::HostRoot;
use rtgauge_model::cyclic::{CyclicConfig, CyclicResult};
use rtgauge_model::rt::SchedPolicy;
use rtgauge_model::run::ProbeResult;
use rtgauge_probe::cyclic::CyclicPlan;
use rtgauge_probe::stop::StopFlag;
use rtgauge_probe::time::ClockId;
use rtgauge_session::watch::{lock, Watch, WatchContext};
use rtgauge_session::{SessionObserver, Tick};
use std::net::TcpListener;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Length of one measuring segment: the histogram's update period and the bound on the monitor's memory.
const SEGMENT: Duration = Duration::from_secs(10);

/// Feeds each probe tick's peak per CPU into the series, and ticks the watches (their live figures into
/// theirs).
struct Peaks<'a> {
    state: &'a Mutex<MonitorState>,
    started: Instant,
    window_ns: u64,
    watches: &'a mut [Box<dyn Watch>],
}

impl SessionObserver for Peaks<'_> {
    fn tick(&mut self, tick: &Tick<'_>, _: Option<&mut dyn FnMut() -> ProbeResult>) {
        let now = (self.started.elapsed().max(tick.elapsed)).as_nanos() as u64;
        let mut g = lock(self.state);
        for (c, t) in g.cpus.iter_mut().zip(tick.threads) {
            c.add_peak(now, t.peak_ns, self.window_ns);
        }
        for w in self.watches.iter_mut() {
            w.tick(&mut g, now, self.window_ns);
        }
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `rtgauge monitor`.
pub fn run(a: &MonitorArgs) -> anyhow::Result<ExitCode> {
    let audit_root = a.root.open()?;
    let live = HostRoot::live();
    let mut setup = resolve(a)?;
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
            let (s, db) = a.db.open()?;
            Some((s, db))
        }
        None => None,
    };

    let stop = super::stop_on_signals()?;
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
    // Dropped (their threads stopped and joined) however the monitor ends.
    let mut watches = std::mem::take(&mut setup.watches);
    let cx = WatchContext {
        state: Arc::clone(&state),
        stop: stop.clone(),
        say: |line| eprintln!("rtgauge monitor: {line}"),
    };
    for w in &mut watches {
        w.start(&cx)?;
    }
    spawn_side_threads(a, &state, listener, audit_root, &setup.cpus, &stop)?;

    let smi = SmiWatch::start(&live, &setup.cpus);
    let plan = segment_plan(a, &setup);
    let deadline = a
        .duration
        .map(|d| Instant::now() + Duration::from_nanos(d.as_ns()));
    let store_every = a.store_every.map(|d| Duration::from_nanos(d.as_ns()));
    let mut period = StorePeriod::new(&plan.config);
    let mut warned = false;
    loop {
        let mut seg_plan = plan.clone();
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let seg = left.map_or(SEGMENT, |l| l.min(SEGMENT));
        seg_plan.config.duration = Some(rtgauge_model::Nanos(seg.as_nanos() as u64));
        let result = measure_segment(a, &seg_plan, (&state, &mut watches), &live, &stop)?;
        if !warned {
            super::warn_all(&rtgauge_report::kind::KindView::shortfalls(&result));
            warned = true;
        }
        let unmet = crate::output::unmet_of(std::slice::from_ref(&result));
        if unmet != lock(&state).unmet {
            // Said when it starts and whenever it changes (a cgroup given a budget, a limit raised).
            for u in &unmet {
                eprintln!("rtgauge monitor: NOT MET: {}", u.line());
            }
            lock(&state).unmet = unmet;
        }
        lock(&state).fold_segment(&result, a.gate.as_ns());
        for w in &mut watches {
            w.segment();
        }
        lock(&state).set_cpu_times(&rtgauge_host::accounting::read_cpu_seconds(&live));
        if let Some(since) = smi.since() {
            lock(&state).set_smis(&since);
        }
        if let Some(dir) = &a.textfile {
            // Rendered and written outside the lock: the endpoint's scrapes never wait on the disk.
            let snapshot = lock(&state).clone();
            write_textfile(dir, &snapshot)?;
        }
        // Segments are kept (merged) only for the store's snapshots: without --store-every nothing grows.
        if store.is_some() {
            period.absorb(result);
        }
        let stopping = stop.is_set() || deadline.is_some_and(|d| Instant::now() >= d);
        if let (Some((s, db)), Some(every)) = (store.as_mut(), store_every) {
            if stopping || period.started.elapsed() >= every {
                if let Some(doc) = period.document(a) {
                    s.insert(&doc)
                        .with_context(|| format!("storing a monitor snapshot in {db}"))?;
                }
                period = StorePeriod::new(&plan.config);
            }
        }
        if stopping {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The SMIs of the watched CPUs since the monitor started, where countable; the msr driver is held (and
/// unloaded at the end if the monitor loaded it).
struct SmiWatch {
    reader: Option<(
        rtgauge_host::smi::SmiReader,
        std::collections::BTreeMap<u32, u64>,
    )>,
    _msr: rtgauge_probe::smi::MsrDriver,
}

impl SmiWatch {
    fn start(live: &HostRoot, cpus: &rtgauge_model::CpuSet) -> SmiWatch {
        let msr = rtgauge_probe::smi::MsrDriver::ensure();
        let reader = match rtgauge_host::smi::SmiReader::open(live, cpus.iter()) {
            Ok(r) => {
                let base = r.opened.clone();
                Some((r, base))
            }
            Err(why) => {
                eprintln!("rtgauge monitor: SMIs not counted: {why}");
                None
            }
        };
        SmiWatch { reader, _msr: msr }
    }

    fn since(&self) -> Option<std::collections::BTreeMap<u32, u64>> {
        let (r, base) = self.reader.as_ref()?;
        Some(
            r.read()
                .into_iter()
                .filter_map(|(cpu, n)| {
                    Some((cpu, rtgauge_host::smi::smi_delta(n, *base.get(&cpu)?)))
                })
                .collect(),
        )
    }
}

/// The `/metrics` endpoint and the audit thread, on the housekeeping CPUs.
fn spawn_side_threads(
    a: &MonitorArgs,
    state: &Arc<Mutex<MonitorState>>,
    listener: Option<TcpListener>,
    audit_root: HostRoot,
    measured: &rtgauge_model::CpuSet,
    stop: &StopFlag,
) -> anyhow::Result<()> {
    if let Some(l) = listener {
        let addr = l
            .local_addr()
            .map_or_else(|_| a.listen.clone(), |x| x.to_string());
        eprintln!("rtgauge monitor: serving http://{addr}/metrics");
        let endpoint = http::Endpoint::new(l).context("starting the metrics endpoint")?;
        let st = Arc::clone(state);
        std::thread::Builder::new()
            .name("rtg-metrics".into())
            .spawn(move || endpoint.serve(st))
            .context("starting the metrics endpoint")?;
    }
    if a.audit_every.as_ns() > 0 {
        let opts = rtgauge_audit::AuditOptions {
            sample: Some(Duration::from_secs(1)),
            rt_priority: Some(a.priority),
            measured: Some(measured.clone()),
            ..Default::default()
        };
        let (st, root, every, stop) = (
            Arc::clone(state),
            audit_root,
            Duration::from_nanos(a.audit_every.as_ns()),
            stop.clone(),
        );
        std::thread::Builder::new()
            .name("rtg-audit".into())
            .spawn(move || audit_loop(&root, &st, every, &opts, &stop))
            .context("starting the audit thread")?;
    }
    Ok(())
}

/// One segment of the timer probe through the session engine, its live peaks feeding the window-max
/// series.
fn measure_segment(
    a: &MonitorArgs,
    plan: &CyclicPlan,
    (state, watches): (&Mutex<MonitorState>, &mut [Box<dyn Watch>]),
    live: &HostRoot,
    stop: &StopFlag,
) -> anyhow::Result<rtgauge_model::cyclic::CyclicResult> {
    let mut peaks = Peaks {
        state,
        started: Instant::now(),
        window_ns: a.window.as_ns(),
        watches,
    };
    let session = rtgauge_session::Session { root: live, stop };
    let m = session
        .measure_kind(
            &rtgauge_session::kind::cyclic::Cyclic(plan),
            &rtgauge_session::Around::default(),
            &mut [&mut peaks],
        )
        .context("measuring timer latency")?;
    Ok(rtgauge_session::first::<CyclicResult, _>(m.results)?)
}

/// The timer probe's plan for one segment: one SCHED_FIFO thread per CPU, no rt-tests histogram, no
/// cpu_dma_latency request, the main thread on the housekeeping CPUs.
fn segment_plan(a: &MonitorArgs, setup: &MonitorPlan) -> CyclicPlan {
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
            duration: Some(rtgauge_model::Nanos(SEGMENT.as_nanos() as u64)),
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
        clock: ClockId::Monotonic,
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

/// DIR/rtgauge.prom, replaced atomically (written beside it, then renamed) so the collector never reads
/// half a file.
fn write_textfile(dir: &Path, state: &MonitorState) -> anyhow::Result<()> {
    let path = dir.join("rtgauge.prom");
    crate::output::write_atomic(&path, openmetrics::render_textfile(state).as_bytes())
        .with_context(|| format!("--textfile {}", dir.display()))
}

/// Re-run the audit every `every` and fold its findings into the state (drift is logged with the rule id).
/// `opts` judge the process rules at the monitor's own priority and CPUs.
fn audit_loop(
    root: &HostRoot,
    state: &Mutex<MonitorState>,
    every: Duration,
    opts: &rtgauge_audit::AuditOptions,
    stop: &StopFlag,
) {
    loop {
        let report = rtgauge_audit::run_audit(root, opts);
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
