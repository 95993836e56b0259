//! `rtgauge-lab`: the kernel lab from the command line, for the benches (bench/scale) and for
//! looking into a guest by hand:
//!
//! ```sh
//! rtgauge-lab boot --kernel rt --topology 2x4x2 --nodes 2 --rtgauge target/debug/rtgauge \
//!     --script my.sh --out /tmp/guest-files --append "tsc=reliable"
//! rtgauge-lab boot … --clock-channel  # + ttyS3 on a unix socket; stderr names QEMU's pid and the socket
//! rtgauge-lab fetch --kernel std      # download and cache a kernel
//! rtgauge-lab clean                   # kill a killed run's QEMU, remove its work directory
//! ```
//!
//! Exit code: the guest script's exit status (0–255), 2 when the guest could not be booted or timed out.

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use rtgauge_lab::{Flavour, Guest, GuestTopology, Kernel};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "rtgauge-lab",
    about = "Boot Debian kernels in QEMU with rtgauge inside"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Boot a kernel, run a script inside, copy the files it wrote under $OUT to --out.
    Boot {
        /// rt (linux-image-rt-amd64), std (linux-image-amd64) or rt-bpo (Debian 12 backports: 6.12 RT).
        #[arg(long, default_value = "rt")]
        kernel: String,
        /// SOCKETSxCORESxTHREADS, e.g. 2x4x2.
        #[arg(long, default_value = "1x2x1")]
        topology: String,
        /// NUMA nodes.
        #[arg(long, default_value_t = 1)]
        nodes: u32,
        /// Extra kernel parameters.
        #[arg(long, default_value = "")]
        append: String,
        /// The script the guest runs (sh).
        #[arg(long)]
        script: PathBuf,
        /// rtgauge binary to install in the guest.
        #[arg(long)]
        rtgauge: Option<PathBuf>,
        /// Programs from deps/programs.tsv to install in the guest (rtla, chrt).
        #[arg(long = "program")]
        programs: Vec<String>,
        /// A program newer than the machine's own, from the Debian package of that name in bookworm-backports
        /// (rtla: 6.12, which has hwnoise), installed in the guest at its unpacked path; the script finds
        /// it as $NAME_BIN (RTLA_BIN).
        #[arg(long = "backports-program", value_name = "NAME")]
        backports_programs: Vec<String>,
        /// Where to copy the files the guest handed back.
        #[arg(long)]
        out: PathBuf,
        /// Bound on the boot, seconds.
        #[arg(long, default_value_t = 180)]
        timeout: u64,
        /// Bound on the time from QEMU's start to init, seconds (a 64-vCPU guest under TCG needs more
        /// than the default 90).
        #[arg(long, default_value_t = rtgauge_lab::boot::INIT_BOUND.as_secs())]
        init_bound: u64,
        /// Memory, MiB (default: 1 GiB + 64 MiB per CPU beyond 4).
        #[arg(long)]
        memory: Option<u32>,
        /// A fourth serial port, ttyS3, on a unix socket of the host (the guest/host clock of `rtgauge vm`);
        /// once QEMU runs, one line on stderr says its pid, console and socket (bench/vm_observe_overhead).
        #[arg(long)]
        clock_channel: bool,
        /// Under TCG, one host thread per vCPU (as `rtgauge vm observe` needs); by default one thread runs
        /// every vCPU in turn (QEMU 7.2's per-vCPU threads now and then freeze a guest: docs/lab.md).
        #[arg(long)]
        vcpu_threads: bool,
    },
    /// Download and cache a kernel; print where it is.
    Fetch {
        /// rt or std.
        #[arg(long, default_value = "rt")]
        kernel: String,
    },
    /// Remove what a killed run left behind.
    Clean,
}

fn flavour(s: &str) -> anyhow::Result<Flavour> {
    Flavour::parse(s)
        .with_context(|| format!("--kernel {s}: rt, std or rt-bpo (Debian 12's backports)"))
}

fn topology(s: &str, nodes: u32) -> anyhow::Result<GuestTopology> {
    let v: Vec<u32> = s
        .split('x')
        .map(|p| p.parse::<u32>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("--topology {s}: SOCKETSxCORESxTHREADS"))?;
    let [s_, c, t] = v[..] else {
        anyhow::bail!("--topology {s}: SOCKETSxCORESxTHREADS");
    };
    Ok(GuestTopology::new(s_, c, t, nodes)?)
}

fn main() -> ExitCode {
    match real_main() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rtgauge-lab: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main() -> anyhow::Result<ExitCode> {
    match Cli::parse().cmd {
        Cmd::Fetch { kernel } => {
            let k = Kernel::fetch(flavour(&kernel)?)?;
            println!("{} {} {}", k.package, k.version, k.vmlinux.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Clean => {
            let n = rtgauge_lab::clean_stale();
            println!("{n} leftover work directories removed");
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Boot {
            kernel,
            topology: topo,
            nodes,
            append,
            script,
            rtgauge,
            programs,
            backports_programs,
            out,
            timeout,
            init_bound,
            memory,
            clock_channel,
            vcpu_threads,
        } => {
            let k = Kernel::fetch(flavour(&kernel)?)?;
            let mut text = std::fs::read_to_string(&script)
                .with_context(|| format!("--script {}", script.display()))?;
            let mut binaries = Vec::new();
            for name in &backports_programs {
                let bin = rtgauge_lab::debian_package(Some(rtgauge_lab::BACKPORTS), name)?
                    .join("usr/bin")
                    .join(name);
                text = format!(
                    "{}_BIN={}\n{text}",
                    name.to_uppercase().replace('-', "_"),
                    bin.display()
                );
                binaries.push(bin);
            }
            let mut g = Guest::new(&k, topology(&topo, nodes)?, &text);
            g.cmdline = append;
            g.binaries = binaries;
            g.rtgauge = rtgauge;
            g.programs = programs;
            g.timeout = std::time::Duration::from_secs(timeout);
            g.init_bound = std::time::Duration::from_secs(init_bound);
            if let Some(m) = memory {
                g.memory_mib = m;
            }
            g.clock_channel = clock_channel;
            g.vcpu_threads = vcpu_threads;
            let boot = g.boot_with(&|r: &rtgauge_lab::RunningGuest| {
                eprintln!(
                    "rtgauge-lab: running: qemu pid {} console {} channel {}",
                    r.qemu_pid,
                    r.console.display(),
                    r.channel
                        .as_ref()
                        .map_or("none".into(), |c| c.display().to_string())
                );
            })?;
            boot.copy_to(&out)?;
            std::fs::write(
                out.join("lab/boot.txt"),
                format!(
                    "accel={}\nwall_s={:.2}\ninit_uptime_s={}\nclocksource={}\ncmdline={}\n",
                    boot.accel,
                    boot.wall.as_secs_f64(),
                    boot.init_uptime_s.unwrap_or(f64::NAN),
                    boot.clocksource,
                    boot.cmdline
                ),
            )?;
            Ok(ExitCode::from(
                boot.status.map_or(2, |s| s.clamp(0, 255) as u8),
            ))
        }
    }
}
