//! `rtgauge vm observe | clock-serve | join`: glue from the flags to `rtgauge_vmhost` (this KVM/QEMU host's
//! tracefs source observed through the session engine, the guest's clock responder) and
//! `rtgauge_analysis::vm_join::join`, and to the views (`rtgauge_report::vm`). Inputs are checked before
//! anything is traced: a bad pid, domain, channel or output directory is one line and exit 2.

use anyhow::{bail, Context as _};
use rtgauge_analysis::kind::ProbeData;
use rtgauge_flags::vm::*;
use rtgauge_formats::import::Importer as _;
use rtgauge_model::run::RunDocument;
use rtgauge_model::vm::HostRecord;
use rtgauge_vmhost::channel::{self, Channel};
use rtgauge_vmhost::kvm::{discover, TraceOpts, TracefsSource};
use rtgauge_vmhost::observe::{HostObserver, ObserveOpts, VmWatch};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Per-CPU host trace buffer, KiB.
const BUFFER_KB: u32 = 4096;

pub fn run(a: &VmArgs) -> anyhow::Result<ExitCode> {
    match &a.command {
        VmCommand::Observe(o) => observe(o),
        VmCommand::ClockServe(c) => clock_serve(c),
        VmCommand::Join(j) => join(j),
    }
}

/// A file this verb will write: its directory must exist now, not after a 30 s observation.
fn check_writable(path: &Path, flag: &str) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        bail!("{flag} {}: no directory {}", path.display(), dir.display());
    }
    Ok(())
}

fn observe(a: &ObserveArgs) -> anyhow::Result<ExitCode> {
    let channel = a
        .clock
        .as_deref()
        .map(|c| Channel::parse(c, "--clock"))
        .transpose()?;
    check_writable(&a.record, "--record")?;
    let proc = Path::new("/proc");
    let vm = match (a.pid, &a.domain) {
        (Some(pid), _) => discover::by_pid(proc, pid)?,
        (None, Some(d)) => discover::by_domain(proc, Path::new("/run/libvirt/qemu"), d)?,
        (None, None) => bail!("--pid PID or --domain NAME: which VM to observe"),
    };
    let root = rtgauge_host::HostRoot::live();
    let cpus = match &a.cpus {
        Some(c) => c.clone(),
        None => rtgauge_host::cpu::read_cpu_mask(&root, rtgauge_host::cpu::CpuMask::Online)
            .context("reading this host's online CPUs")?,
    };
    let stop = super::stop_on_signals()?;
    let threads: Vec<String> = vm
        .vcpus
        .iter()
        .map(|v| {
            format!(
                "vCPU {} = thread {} on host CPUs {}",
                v.index, v.tid, v.cpus_allowed
            )
        })
        .collect();
    eprintln!(
        "rtgauge: observing VM pid {}{}: {}; tracing host CPUs {cpus}; clock {}",
        vm.pid,
        vm.name
            .as_deref()
            .map_or(String::new(), |n| format!(" ({n})")),
        threads.join(", "),
        channel
            .as_ref()
            .map_or("none (--clock)".to_string(), |c| c.to_string())
    );
    // A real-time guest's vCPU threads run at a real-time policy on the host (libvirt vcpusched, tuned's
    // realtime-virtual-host guides): at SCHED_OTHER any host thread above CFS, and CFS threads by their
    // share, take their CPU, and the guest's figures are not of a real-time VM. Said first.
    let normal: Vec<String> = vm
        .vcpus
        .iter()
        .filter(|v| v.realtime() == Some(false))
        .map(|v| format!("{} ({})", v.index, v.sched.as_deref().unwrap_or("?")))
        .collect();
    if !normal.is_empty() {
        eprintln!(
            "rtgauge: NOT MET: vCPU threads {} of {} run at no real-time policy on this host: any host thread \
             above CFS, and CFS threads by their share, take their CPU — give them SCHED_FIFO (libvirt \
             <vcpusched vcpus='…' scheduler='fifo' priority='1'/>, or chrt -f -p 1 TID); the record keeps \
             each vCPU's policy",
            normal.join(", "),
            vm.vcpus.len()
        );
    }
    let trace = TraceOpts {
        cpus,
        buffer_kb: BUFFER_KB,
        max_intervals: a.max_intervals,
    };
    let opts = ObserveOpts {
        clock: channel,
        sync_every: Duration::from_nanos(a.sync_interval.as_ns()),
    };
    let vcpu_cpus = rtgauge_model::CpuSet::new(vm.vcpus.iter().flat_map(|v| {
        rtgauge_model::CpuSet::parse(&v.cpus_allowed)
            .map(|c| c.iter().collect::<Vec<_>>())
            .unwrap_or_default()
    }));
    let pid = vm.pid;
    rtgauge_vmhost::observe::renice(a.nice)?;
    let source = TracefsSource::start(vm, &trace)?;
    let mut observer = HostObserver::start(Box::new(source), &opts);
    let watch = VmWatch {
        pid,
        duration: a.duration.map(|d| Duration::from_nanos(d.as_ns())),
        cpus: vcpu_cpus,
        tick: Duration::from_millis(100),
        ended: std::cell::Cell::new(""),
    };
    rtgauge_session::Session {
        root: &root,
        stop: &stop,
    }
    .measure(
        &watch,
        &rtgauge_session::Around::default(),
        &mut [&mut observer],
    )?;
    let record = observer.into_record();
    // Compact: a busy host's record holds hundreds of thousands of intervals.
    let mut bytes = serde_json::to_vec(&record).context("serialising the host record")?;
    bytes.push(b'\n');
    crate::output::write_atomic(&a.record, &bytes)
        .with_context(|| format!("--record {}", a.record.display()))?;
    super::print_text(&rtgauge_report::vm::render_record(&record))?;
    println!(
        "ended: {}; record: {}",
        watch.ended.get(),
        a.record.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn clock_serve(a: &ClockServeArgs) -> anyhow::Result<ExitCode> {
    let channel = Channel::parse(&a.channel, "CHANNEL")?;
    let stop = super::stop_on_signals()?;
    let until = match a.duration {
        None => None,
        Some(d) => Some(
            rtgauge_probe::time::now_ns(rtgauge_probe::time::ClockId::Monotonic)
                .checked_add(d.as_ns())
                .with_context(|| format!("-D/--duration {d}: too long"))?,
        ),
    };
    let n = channel::serve(&channel, &stop, until)?;
    eprintln!("rtgauge: {n} clock exchanges answered on {channel}");
    Ok(ExitCode::SUCCESS)
}

/// A host record file, checked to be one.
fn read_record(path: &Path) -> anyhow::Result<HostRecord> {
    let bytes =
        rtgauge_flags::read_user_file(path, "HOST_RECORD", rtgauge_flags::MAX_IMPORT_BYTES)?;
    rtgauge_formats::host_record::parse(&bytes)
        .map_err(|e| anyhow::anyhow!("HOST_RECORD {}: {e}", path.display()))
}

fn join(a: &JoinArgs) -> anyhow::Result<ExitCode> {
    for (p, flag) in [(&a.output.output, "--output"), (&a.html.html, "--html")] {
        if let Some(p) = p {
            check_writable(p, flag)?;
        }
    }
    let name = a.guest.display().to_string();
    let bytes =
        rtgauge_flags::read_user_file(&a.guest, "GUEST_RUN", rtgauge_flags::MAX_IMPORT_BYTES)?;
    let mut doc: RunDocument = rtgauge_formats::native::NativeJson
        .import(&String::from_utf8_lossy(&bytes), &name)
        .map_err(|e| anyhow::anyhow!("GUEST_RUN {name}: {e}"))?;
    let mut record = read_record(&a.host)?;
    if record.clock.as_ref().is_none_or(|c| c.samples.is_empty()) {
        // The guest read the host's clock itself (a receive-only packet stream's --clock): its exchanges.
        if let Some(c) = doc
            .probes
            .iter()
            .find_map(|p| p.data().peer_clock_sync().cloned())
        {
            eprintln!(
                "rtgauge: the host record has no clock: the guest run's own exchanges over {} put its episodes on the host's clock",
                c.channel
            );
            record.clock = Some(c);
        }
    }
    let mut joined = 0;
    for p in &mut doc.probes {
        if let Some(w) = rtgauge_analysis::vm_join::joinable_why(p.data_mut()) {
            rtgauge_analysis::vm_join::join(w, &record);
            joined += 1;
        }
    }
    if joined == 0 {
        bail!(
            "GUEST_RUN {name}: no latency probe with spike episodes to join (measure the guest with --trace, or --spike)"
        );
    }
    // The joined run is a new run (the guest's own may be stored or pushed already): a uuid of its own, the
    // guest run's kept as a tag.
    if let Some(source) = doc.uuid.replace(rtgauge_model::run::new_uuid()) {
        doc.tags.insert("joined_from".into(), source);
    }
    let mut id = 0;
    if a.store {
        let (mut store, path) = a.db.open()?;
        id = store.insert(&doc).context("storing the joined run")?;
        eprintln!("rtgauge: joined run stored as run {id} in {path}");
    }
    // As every --output: a file before the text, '-' after it.
    let output = a.output.output.as_deref();
    crate::output::write_output_file(output, &doc)?;
    if let Some(p) = &a.html.html {
        super::report::write_html(p, &rtgauge_report::html::render_report(id, &doc))?;
    }
    if a.format.json() {
        // The document itself is what it prints: once, whatever --output says.
        crate::output::write_json(Path::new("-"), &doc)?;
    } else {
        let mut text = String::new();
        for p in &doc.probes {
            text.push_str(&rtgauge_report::spikes::render_why(
                p.data(),
                rtgauge_report::text::TextOptions::full(),
            ));
        }
        super::print_text(&text)?;
        crate::output::write_output_to_stdout(output, &doc)?;
    }
    Ok(ExitCode::SUCCESS)
}
