//! Booting a guest and getting its files back.
//!
//! The guest has three serial ports: ttyS0 is the console (written to a file the host reads), ttyS1 carries
//! the guest's `/out` back as a newc cpio archive once its script is done (raw bytes, nothing else writes
//! there), and ttyS2 (IRQ 5, output discarded) is there to be stormed: writing to it makes interrupts
//! whose handler is a thread `irq/5-ttyS2` on PREEMPT_RT. With [`Guest::clock_channel`] a fourth port,
//! ttyS3 (IRQ 7), is a unix socket on the host ([`RunningGuest::channel`]): a channel both sides have, for
//! the guest/host clock of `rtgauge vm`. The guest powers itself off; the host waits for QEMU to exit within
//! the guest's timeout and kills it otherwise; a guest stuck below its script (init silent past
//! [`Guest::init_bound`], or a stall its kernel reports) is killed at once and booted again, up to
//! [`Guest::boots`] boots. [`Guest::boot_with`] runs a function on the host while QEMU runs
//! (with [`Guest::vcpu_threads`] or KVM its vCPU threads are named `CPU n/TCG` or `CPU n/KVM`:
//! `debug-threads=on`; single-threaded TCG runs them all in one thread, `ALL CPUs/TCG`). With [`Guest::tap`]
//! the guest has a virtio NIC on a host tap interface.
//!
//! Acceleration: KVM where it runs these guests, TCG otherwise. The first boot after the host boots tries
//! KVM and falls back to TCG when the guest's init has not spoken within [`KVM_TRIAL`]; the verdict is kept in
//! the cache under the host's boot id (a nested or restricted /dev/kvm may open and then never run a
//! guest). `RTGAUGE_LAB_ACCEL=tcg|kvm` forces one. TCG needs `-cpu max,vendor=GenuineIntel`: with AMD's
//! vendor string TCG exposes no SMT siblings.

use crate::initramfs::Initramfs;
use crate::{io, pid_alive, FileLock, GuestTopology, Kernel, LabError};
use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a KVM boot may stay silent before the lab decides KVM does not run its guests.
pub const KVM_TRIAL: Duration = Duration::from_secs(15);

/// How long a boot may take to start its init, by default ([`Guest::init_bound`]). Under TCG on this 2-vCPU
/// host init starts 3-31 s after QEMU (31 s: a 16-vCPU RT guest beside two CPU hogs); a CI run lost a
/// 4-vCPU RT guest that went silent at 2.5 s and was only killed by the 240 s bound of its script.
pub const INIT_BOUND: Duration = Duration::from_secs(90);

/// The kernel's own words for a guest that is stuck: an RCU stall report or a soft lockup. A CI run saw a
/// 4-vCPU RT guest whose RCU grace-period kthread stayed runnable and never ran on an idle vCPU ("rcu_preempt
/// kthread starved for 5252 jiffies! … ->state=0x0 ->cpu=2", all quiescent states seen): the signature of a
/// wakeup lost on its way to a halted TCG vCPU. It never recovered (the same report 63, 126 and 189 s later)
/// and the script never went on.
const STALL_MARKS: [&str; 4] = [
    "detected stalls on CPUs/tasks",
    "detected expedited stalls on CPUs/tasks",
    "self-detected stall on CPU",
    "BUG: soft lockup",
];

/// How the guest's CPUs are emulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation.
    Kvm,
    /// QEMU's binary translator (single-threaded, or one host thread per vCPU with
    /// [`Guest::vcpu_threads`]).
    Tcg,
}

impl std::fmt::Display for Accel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        })
    }
}

/// A guest to boot.
#[derive(Debug, Clone)]
pub struct Guest {
    /// A label for messages ("rt 2s×4c×2t").
    pub label: String,
    /// The kernel.
    pub kernel: Kernel,
    /// Its topology.
    pub topology: GuestTopology,
    /// Kernel parameters beyond the lab's own (`console=ttyS0 panic=-1 noirqdebug no_timer_check`).
    pub cmdline: String,
    /// Memory, MiB.
    pub memory_mib: u32,
    /// The script `/bin/sh` runs as root in `/root` after boot; what it writes under `$OUT` comes back.
    pub script: String,
    /// Host binary installed as `/usr/bin/rtgauge` (stripped of debug sections), if any.
    pub rtgauge: Option<PathBuf>,
    /// Boot through SeaBIOS (QEMU's default firmware) instead of qboot: it sets up System Management
    /// Mode and enables the APM control port's SMIs (0xB2), which qboot leaves off. Seconds slower.
    pub seabios: bool,
    /// Host binaries installed at the same path in the guest with the shared libraries `ldd` lists (an
    /// interpreter a script of `files` runs under); the caller starts them, so they are in
    /// deps/programs.tsv by the command that found them.
    pub binaries: Vec<PathBuf>,
    /// Modules of the kernel's package (those it keeps, by name: `msr`) installed under
    /// `/lib/modules/<release>/`, with the modules they need and a `modules.dep` that names them
    /// ([`crate::modules`]), for the guest's `modprobe` (not loaded).
    pub modules: Vec<String>,
    /// Programs from deps/programs.tsv installed under `/usr/bin` with their libraries (`rtla`, `chrt`).
    pub programs: Vec<String>,
    /// Extra files: guest path → bytes.
    pub files: Vec<(String, Vec<u8>)>,
    /// Bound on the whole boot, from QEMU's start to its exit.
    pub timeout: Duration,
    /// Bound on the time from QEMU's start to init's first line ([`INIT_BOUND`] by default).
    pub init_bound: Duration,
    /// Boots at most (at least one), when one gets stuck ([`LabError::is_stuck`]: no init within
    /// `init_bound`, a stall its kernel reports): a TCG guest on a busy host now and then never reaches init
    /// or loses a wakeup for good. Each stuck boot is printed. 3 by default.
    pub boots: u32,
    /// The acceleration, forced; `None` (the default): KVM where the lab's trial found it runs guests, else
    /// TCG. A guest that is meant to fail (a test's) forces TCG, so that its failure is not taken for
    /// KVM's.
    pub accel: Option<Accel>,
    /// A fourth serial port, ttyS3 (IRQ 7), connected to a unix socket on the host
    /// ([`RunningGuest::channel`]).
    pub clock_channel: bool,
    /// Under TCG, one host thread per vCPU (`tcg,thread=multi`), as under KVM: for a host side that must see
    /// each vCPU as a thread of its own (`rtgauge vm observe`). Off by default: all vCPUs then run in turn
    /// on one host thread (`tcg,thread=single`). With a thread per vCPU, Debian's QEMU 7.2 now and then
    /// left a guest stuck for good with no stall report (likely a wakeup lost on its way to a halted vCPU;
    /// not traced to QEMU's source): of six 16-vCPU RT boots running `oslat` then a traced `cyclic`, the
    /// traced run never ended in four (one froze outright, the script's 5 s console heartbeat with it);
    /// single-threaded, four of four completed (docs/lab.md).
    pub vcpu_threads: bool,
    /// A virtio NIC on this host tap interface (its name; the caller created it and brought it up, and
    /// removes it): QEMU opens it (`-netdev tap,…,script=no`) and gives the guest a `virtio-net-pci` device
    /// with MAC [`GUEST_MAC`]. The guest gets the driver's modules too; its script loads them with
    /// `modprobe virtio_net` (the PCI transport with them: [`crate::modules::TRANSPORTS`]) and then has
    /// `eth0`. None by default: no NIC at all (`-nodefaults`). Under TCG (single- or multi-threaded) QEMU's
    /// main thread (named `rtgauge-lab`) reads and writes the tap, not a vCPU thread.
    pub tap: Option<String>,
}

/// The MAC of a guest's NIC ([`Guest::tap`]): fixed, so that a host program can address the guest's frames
/// without asking it; locally administered and unicast (`02:…`: bit 1 of the first octet set, bit 0 clear),
/// so that it is no vendor's.
pub const GUEST_MAC: &str = "02:52:54:00:12:34";

/// A guest while QEMU runs it, as [`Guest::boot_with`] hands it over.
#[derive(Debug, Clone)]
pub struct RunningGuest {
    /// QEMU's process id.
    pub qemu_pid: u32,
    /// How the guest runs.
    pub accel: Accel,
    /// The serial console as QEMU writes it (the script's output goes there too).
    pub console: PathBuf,
    /// The host end of ttyS3 (a unix socket QEMU listens on), with [`Guest::clock_channel`].
    pub channel: Option<PathBuf>,
}

impl RunningGuest {
    /// Whether QEMU still runs.
    pub fn alive(&self) -> bool {
        pid_alive(self.qemu_pid)
    }

    /// The console so far.
    pub fn console_text(&self) -> String {
        read_lossy(&self.console)
    }
}

/// What runs on the host beside a guest ([`Guest::boot_with`]).
pub type During<'a> = &'a (dyn Fn(&RunningGuest) + Sync);

impl Guest {
    /// A guest of `kernel` on `topology` that runs `script`, with 1 GiB (+ 64 MiB per CPU beyond 4) and a
    /// 120 s bound.
    pub fn new(kernel: &Kernel, topology: GuestTopology, script: &str) -> Guest {
        let cpus = topology.cpus();
        Guest {
            label: format!("{} {}", kernel.flavour.short(), topology),
            kernel: kernel.clone(),
            topology,
            cmdline: String::new(),
            memory_mib: 1024 + 64 * cpus.saturating_sub(4),
            script: script.to_string(),
            rtgauge: None,
            programs: Vec::new(),
            modules: Vec::new(),
            binaries: Vec::new(),
            seabios: false,
            files: Vec::new(),
            timeout: Duration::from_secs(120),
            init_bound: INIT_BOUND,
            boots: 3,
            accel: None,
            clock_channel: false,
            vcpu_threads: false,
            tap: None,
        }
    }

    /// Install `name` (listed in deps/programs.tsv) under `/usr/bin` with its libraries.
    pub fn guest_program(&mut self, name: &str) -> &mut Guest {
        self.programs.push(name.to_string());
        self
    }

    /// The full kernel command line.
    pub fn kernel_cmdline(&self) -> String {
        // noirqdebug: on PREEMPT_RT under TCG the threaded 8250 handler finds most of ttyS1's interrupts
        // already served while megabytes go out, and the kernel's spurious-IRQ detector would disable IRQ 3
        // ("nobody cared") in the middle of the transfer, which then never ends.
        // no_timer_check: the IO-APIC setup checks that the 8254 timer ticks by counting jiffies over a
        // busy-wait, which a TCG vCPU starved by the host's other work can fail: with two CPU hogs beside
        // QEMU a 16-vCPU RT guest printed "..MP-BIOS bug: 8254 timer not connected to IO-APIC" and never
        // reached init. (CI lost the same guest twice in one run before init, its console empty under
        // `quiet`, so where those stopped is not known.)
        // No `quiet`: a boot that never reaches init then shows its last kernel line in its error's
        // console tail (with `quiet` the CI's stuck boots showed nothing); 13.0 s vs 13.1 s for a 16-vCPU
        // RT boot, three each.
        format!(
            "console=ttyS0 panic=-1 noirqdebug no_timer_check {}",
            self.cmdline
        )
        .trim()
        .to_string()
    }

    /// Boot, run the script, power off; the console and the files handed back.
    pub fn boot(&self) -> Result<Boot, LabError> {
        self.boot_inner(None)
    }

    /// [`Guest::boot`], with `during` run on the host in a thread of its own while QEMU runs (once per QEMU
    /// start: a KVM trial that fails, the TCG boot after it and each boot of a stuck guest call it). The boot waits for `during`
    /// to return after QEMU has exited; `during` should end when [`RunningGuest::alive`] turns false.
    pub fn boot_with(&self, during: During<'_>) -> Result<Boot, LabError> {
        self.boot_inner(Some(during))
    }

    fn boot_inner(&self, during: Option<During<'_>>) -> Result<Boot, LabError> {
        clean_stale();
        let cache = crate::cache_dir();
        std::fs::create_dir_all(&cache).map_err(io(&cache))?;
        // One guest at a time on this machine: a TCG guest takes every host CPU it is given.
        let _lock = FileLock::exclusive(&cache.join("boot.lock"))?;
        let work = WorkDir::new()?;
        let initrd = work.path().join("initrd.cpio");
        self.initramfs()?.write(&initrd)?;
        let accel = match self.accel.or_else(|| decided_accel(&cache)) {
            Some(a) => a,
            None => {
                // Try KVM on this very guest; fall back to TCG when it does not come up.
                match self.run_qemu(&work, &initrd, Accel::Kvm, KVM_TRIAL, during) {
                    Ok(boot) => {
                        remember_accel(&cache, Accel::Kvm);
                        return self.finish(boot, &work);
                    }
                    Err(e) => {
                        eprintln!(
                            "rtgauge-lab: KVM does not run this guest here ({}); using TCG from now on",
                            e.to_string().lines().next().unwrap_or("")
                        );
                        remember_accel(&cache, Accel::Tcg);
                        Accel::Tcg
                    }
                }
            }
        };
        let mut boots = 1;
        let boot = loop {
            match self.run_qemu(&work, &initrd, accel, self.init_bound, during) {
                Err(e) if e.is_stuck() && boots < self.boots => {
                    boots += 1;
                    eprintln!("rtgauge-lab: {e}\nrtgauge-lab: booting {} again (boot {boots} of at most {})", self.label, self.boots);
                }
                r => break r?,
            }
        };
        self.finish(boot, &work)
    }

    fn finish(&self, boot: Boot, _work: &WorkDir) -> Result<Boot, LabError> {
        eprintln!(
            "rtgauge-lab: {} ({}): {} in {:.1} s, init at {:.1} s guest time; clocksource {}; script exit {}",
            self.label,
            self.kernel.package,
            boot.accel,
            boot.wall.as_secs_f64(),
            boot.init_uptime_s.unwrap_or(f64::NAN),
            boot.clocksource,
            boot.status.map_or("none".to_string(), |s| s.to_string())
        );
        Ok(boot)
    }

    /// The root file system: busybox, /init, the script, rtgauge and the programs.
    pub fn initramfs(&self) -> Result<Initramfs, LabError> {
        let mut fs = Initramfs::new();
        for d in [
            "proc", "sys", "dev", "tmp", "run", "root", "out/lab", "etc", "usr/bin", "usr/sbin",
            "sbin", "lab",
        ] {
            fs.dir(d);
        }
        fs.host_file("bin/busybox", &crate::guest_program("busybox")?, 0o755);
        fs.file("init", INIT, 0o755);
        fs.file("lab/script", self.script.as_bytes(), 0o755);
        fs.file(
            "etc/os-release",
            "PRETTY_NAME=\"rtgauge lab (busybox initramfs)\"\nNAME=\"rtgauge-lab\"\nID=rtgauge-lab\n",
            0o644,
        );
        fs.file("etc/hostname", "lab\n", 0o644);
        fs.file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0o644);
        fs.file("etc/group", "root:x:0:\n", 0o644);
        if let Some(bin) = &self.rtgauge {
            let s = crate::initramfs::stripped(bin)?;
            fs.binary_with_libraries("usr/bin/rtgauge", &s)?;
            // ldd of the stripped copy lists the same libraries as the original.
        }
        for p in &self.programs {
            let host = crate::guest_program(p)?;
            fs.binary_with_libraries(&format!("usr/bin/{p}"), &host)?;
        }
        for b in &self.binaries {
            let at = b.display().to_string();
            fs.binary_with_libraries(at.trim_start_matches('/'), b)?;
        }
        for (path, data) in &self.files {
            fs.file(path, data.clone(), 0o755);
        }
        let mut modules = self.modules.clone();
        if self.tap.is_some() {
            modules.push("virtio_net".into());
        }
        if !modules.is_empty() {
            crate::modules::install(&mut fs, &self.kernel, &modules)?;
        }
        Ok(fs)
    }

    fn qemu_args(&self, work: &WorkDir, initrd: &Path, accel: Accel) -> Vec<String> {
        let w = |n: &str| work.path().join(n).display().to_string();
        let mut a: Vec<String> = vec![
            "-name".into(),
            // debug-threads: the vCPU threads are named `CPU n/TCG` (`CPU n/KVM`), as libvirt's guests' are
            // (`ALL CPUs/TCG` for the one thread of single-threaded TCG).
            "rtgauge-lab,process=rtgauge-lab,debug-threads=on".into(),
            "-nodefaults".into(),
            "-no-user-config".into(),
            "-display".into(),
            "none".into(),
            "-no-reboot".into(),
            "-pidfile".into(),
            w("qemu.pid"),
        ];
        if !self.seabios {
            // qboot: a firmware that only loads the kernel (SeaBIOS adds seconds of TCG time per boot).
            a.extend(["-bios".into(), "qboot.rom".into()]);
        }
        match accel {
            Accel::Kvm => a.extend(["-accel", "kvm", "-cpu", "host"].map(String::from)),
            Accel::Tcg => a.extend(
                [
                    "-accel",
                    match self.vcpu_threads {
                        true => "tcg,thread=multi",
                        false => "tcg,thread=single",
                    },
                    "-cpu",
                    "max,vendor=GenuineIntel",
                ]
                .map(String::from),
            ),
        }
        a.extend(self.topology.qemu_args(self.memory_mib));
        a.extend([
            "-kernel".into(),
            self.kernel.vmlinux.display().to_string(),
            "-initrd".into(),
            initrd.display().to_string(),
            "-append".into(),
            self.kernel_cmdline(),
            "-chardev".into(),
            format!("file,id=console,path={}", w("console.log")),
            "-serial".into(),
            "chardev:console".into(),
            "-chardev".into(),
            format!("file,id=out,path={}", w("out.cpio")),
            "-serial".into(),
            "chardev:out".into(),
            "-chardev".into(),
            "null,id=storm".into(),
            "-device".into(),
            "isa-serial,chardev=storm,index=2,irq=5".into(),
        ]);
        if let Some(tap) = &self.tap {
            // qboot leaves the device's BARs unassigned; the kernel assigns them (`pci 0000:00:02.0: BAR 1 …:
            // assigned`), and virtio_pci binds it.
            a.extend([
                "-netdev".into(),
                format!("tap,id=net0,ifname={tap},script=no,downscript=no"),
                "-device".into(),
                format!("virtio-net-pci,netdev=net0,mac={GUEST_MAC}"),
            ]);
        }
        if self.clock_channel {
            a.extend([
                "-chardev".into(),
                format!(
                    "socket,id=clock,path={},server=on,wait=off",
                    w("clock.sock")
                ),
                "-device".into(),
                "isa-serial,chardev=clock,index=3,irq=7".into(),
            ]);
        }
        a
    }

    /// Start QEMU and wait for it to exit; give up (kill) when the guest's init has not printed its first
    /// line within `init_bound` (a KVM trial's or the guest's own) or its kernel reports a stall.
    fn run_qemu(
        &self,
        work: &WorkDir,
        initrd: &Path,
        accel: Accel,
        init_bound: Duration,
        during: Option<During<'_>>,
    ) -> Result<Boot, LabError> {
        let console = work.path().join("console.log");
        let out = work.path().join("out.cpio");
        for f in [&console, &out] {
            let _ = std::fs::remove_file(f);
        }
        let args = self.qemu_args(work, initrd, accel);
        let mut cmd = rtgauge_programs::command("qemu-system-x86_64");
        cmd.args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        // SAFETY: getpid has no preconditions and cannot fail.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the child between fork and exec, where only async-signal-safe calls
        // are sound: it makes only prctl, getppid and _exit (system calls, no allocation, no lock) and
        // touches no state but the copied `parent`.
        unsafe {
            cmd.pre_exec(move || {
                // Killed with this test process, even by SIGKILL (the thread that forks also waits).
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                // QEMU keeps the nice value of the tests. At nice 10 (as it ran until the CI lost a boot)
                // the one vCPU that runs early boot gets about a tenth of its CPU beside a busy nice-0
                // thread (weights 110 vs 1024), and the kernel's boot-time checks (the 8254 timer check)
                // run on a starved vCPU.
                Ok(())
            });
        }
        let start = Instant::now();
        let child = cmd.spawn().map_err(|e| LabError::Program {
            program: "qemu-system-x86_64".into(),
            message: rtgauge_programs::not_found("qemu-system-x86_64", &e),
        })?;
        let running = RunningGuest {
            qemu_pid: child.id(),
            accel,
            console: console.clone(),
            channel: self.clock_channel.then(|| work.path().join("clock.sock")),
        };
        let mut guard = Qemu(Some(child));
        std::thread::scope(|scope| {
            if let Some(f) = during {
                let r = running.clone();
                scope.spawn(move || f(&r));
            }
            self.wait_qemu(&mut guard, &console, accel, init_bound, start)
        })
        .and_then(|status| self.collect(&mut guard, status, &console, &out, accel, start))
    }

    /// Wait for QEMU to exit within the bounds; killed (and an error) past them.
    fn wait_qemu(
        &self,
        guard: &mut Qemu,
        console: &Path,
        accel: Accel,
        init_bound: Duration,
        start: Instant,
    ) -> Result<std::process::ExitStatus, LabError> {
        let deadline = start + self.timeout;
        let (mut init_seen, mut checked) = (false, start);
        Ok(loop {
            if let Some(s) = guard.try_wait() {
                break s;
            }
            let now = Instant::now();
            // The console is read once a second: for init's first line, then for the kernel's stall reports.
            if now >= checked + Duration::from_secs(1) {
                checked = now;
                let text = read_lossy(console);
                init_seen = init_seen || text.contains("rtgauge-lab: up");
                if !init_seen && now > start + init_bound {
                    guard.kill();
                    return Err(LabError::NoInit {
                        guest: format!("{} under {accel}", self.label),
                        secs: init_bound.as_secs(),
                        tail: tail(&text, 10),
                    });
                }
                if let Some(line) = stall_report(&text) {
                    guard.kill();
                    return Err(LabError::Stalled {
                        guest: format!("{} under {accel}", self.label),
                        line: line.trim().to_string(),
                        tail: tail(&text, 30),
                    });
                }
            }
            if now > deadline {
                guard.kill();
                return Err(LabError::Timeout {
                    guest: self.label.clone(),
                    secs: self.timeout.as_secs(),
                    tail: tail(&read_lossy(console), 30),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        })
    }

    /// The console, the files handed back and the boot's figures, once QEMU has exited.
    fn collect(
        &self,
        guard: &mut Qemu,
        status: std::process::ExitStatus,
        console: &Path,
        out: &Path,
        accel: Accel,
        start: Instant,
    ) -> Result<Boot, LabError> {
        let wall = start.elapsed();
        let stderr = guard.stderr();
        let console_text = read_lossy(console);
        if !status.success() {
            return Err(LabError::Program {
                program: "qemu-system-x86_64".into(),
                message: format!("{status}: {}\n{}", stderr.trim(), tail(&console_text, 10)),
            });
        }
        let archive = std::fs::read(out).unwrap_or_default();
        let files = tempfile::Builder::new()
            .prefix("rtgauge-lab-files-")
            .tempdir()
            .map_err(io(&std::env::temp_dir()))?;
        let names =
            crate::initramfs::unpack(&archive, files.path()).map_err(|e| LabError::NoResult {
                guest: self.label.clone(),
                why: format!("{} bytes on ttyS1: {e}", archive.len()),
                tail: tail(&console_text, 30),
            })?;
        let read = |n: &str| std::fs::read_to_string(files.path().join(n)).unwrap_or_default();
        let status = read("lab/status").trim().parse().ok();
        let clocksource = Clocksource::parse(
            &read("lab/clocksource.start"),
            &read("lab/clocksource.end"),
            &read("lab/dmesg"),
        );
        let init_uptime_s = console_text
            .lines()
            .find_map(|l| l.split("rtgauge-lab: up ").nth(1))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok());
        Ok(Boot {
            console: console_text,
            files,
            names,
            status,
            accel,
            wall,
            init_uptime_s,
            clocksource,
            cmdline: self.kernel_cmdline(),
        })
    }
}

/// What a boot handed back.
#[derive(Debug)]
pub struct Boot {
    /// The serial console.
    pub console: String,
    files: tempfile::TempDir,
    /// The files handed back (relative to [`Boot::dir`]): everything the script wrote under `$OUT`, and
    /// `lab/` (status, script.log, dmesg, clocksource).
    pub names: Vec<String>,
    /// The script's exit status (`None`: it did not finish).
    pub status: Option<i32>,
    /// How the guest ran.
    pub accel: Accel,
    /// Wall time from QEMU's start to its exit.
    pub wall: Duration,
    /// Guest uptime when its init started, s.
    pub init_uptime_s: Option<f64>,
    /// The clocksource the guest found.
    pub clocksource: Clocksource,
    /// The kernel command line it booted with.
    pub cmdline: String,
}

impl Boot {
    /// Where the files are (removed when the `Boot` is dropped).
    pub fn dir(&self) -> &Path {
        self.files.path()
    }

    /// A file handed back, as text ("" when absent).
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir().join(name)).unwrap_or_default()
    }

    /// The script's output.
    pub fn log(&self) -> String {
        self.read("lab/script.log")
    }

    /// Copy the files handed back, and the console as `lab/console.log`, to `dest` (kept after the `Boot`).
    pub fn copy_to(&self, dest: &Path) -> Result<(), LabError> {
        copy_tree(self.dir(), dest)?;
        let c = dest.join("lab/console.log");
        std::fs::write(&c, &self.console).map_err(io(&c))
    }
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    for e in std::fs::read_dir(from).map_err(io(from))?.flatten() {
        let p = e.path();
        let dest = to.join(e.file_name());
        if p.is_dir() {
            copy_tree(&p, &dest)?;
        } else {
            std::fs::copy(&p, &dest).map_err(io(&dest))?;
        }
    }
    Ok(())
}

/// The clocksource the guest found at the start and at the end of its script, and what the kernel said
/// about its clocksources (the watchdog marking the TSC unstable, switches).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Clocksource {
    /// `current_clocksource` when the script started.
    pub at_start: String,
    /// … and when it ended.
    pub at_end: String,
    /// `available_clocksource`.
    pub available: String,
    /// Kernel messages about clocksources: switches, TSC found unstable, watchdog skew.
    pub events: Vec<String>,
}

impl Clocksource {
    /// From the guest's `lab/clocksource.{start,end}` ("current available…") and its dmesg.
    pub fn parse(start: &str, end: &str, dmesg: &str) -> Clocksource {
        let current = |s: &str| s.split_whitespace().next().unwrap_or("").to_string();
        let available = start
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ");
        let events = dmesg
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                l.contains("switched to clocksource")
                    || l.contains("unstable")
                    || l.contains("watchdog") && (l.contains("clocksource") || l.contains("skew"))
            })
            .map(|l| l.trim().to_string())
            .collect();
        Clocksource {
            at_start: current(start),
            at_end: current(end),
            available,
            events,
        }
    }

    /// Whether the kernel marked the TSC unstable during this boot.
    pub fn tsc_unstable(&self) -> bool {
        self.events
            .iter()
            .any(|e| e.to_ascii_lowercase().contains("tsc unstable"))
    }
}

impl std::fmt::Display for Clocksource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.at_start == self.at_end {
            write!(f, "{}", self.at_start)?;
        } else {
            write!(f, "{} → {}", self.at_start, self.at_end)?;
        }
        if self.tsc_unstable() {
            f.write_str(" (the watchdog marked the TSC unstable)")?;
        }
        Ok(())
    }
}

/// The guest's /init: mount the kernel file systems a systemd host has mounted (proc, sysfs, devtmpfs, cgroup2,
/// debugfs — where a PREEMPT_DYNAMIC kernel tells its preemption mode; tracefs is left to rtgauge and the
/// scripts, which must mount it themselves as on a fresh host), report the clocksource, run the script, hand `/out`
/// back on ttyS1, power off. The script's output also goes to the console, so a timeout shows where it was.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root OUT=/out
mount -t proc proc /proc
# The boot's messages went to the console (no `quiet`); from here on only errors, as under `quiet`, so
# that the script's lines are not cut by the kernel's and its measurements do not wait on the console.
echo 4 > /proc/sys/kernel/printk
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
hostname lab
cs=/sys/devices/system/clocksource/clocksource0
echo "rtgauge-lab: up $(cut -d' ' -f1 /proc/uptime) s, clocksource $(cat $cs/current_clocksource)"
echo "$(cat $cs/current_clocksource) $(cat $cs/available_clocksource)" > /out/lab/clocksource.start
cat /proc/cmdline > /out/lab/cmdline
cd /root
{ sh /lab/script < /dev/null; echo $? > /out/lab/status; } 2>&1 | tee /out/lab/script.log
echo "$(cat $cs/current_clocksource) $(cat $cs/available_clocksource)" > /out/lab/clocksource.end
dmesg > /out/lab/dmesg
echo "rtgauge-lab: script exit $(cat /out/lab/status) at $(cut -d' ' -f1 /proc/uptime) s, clocksource $(cat $cs/current_clocksource)"
stty -F /dev/ttyS1 raw -echo
cd /out && find . | cpio -o -H newc > /dev/ttyS1 2>/dev/null
echo "rtgauge-lab: files sent"
poweroff -f
"#;

/// A running QEMU: killed and reaped when dropped.
struct Qemu(Option<std::process::Child>);

impl Qemu {
    fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        let c = self.0.as_mut()?;
        match c.try_wait() {
            Ok(Some(s)) => Some(s),
            Ok(None) => None,
            // Cannot be waited for: treat as gone.
            Err(_) => Some(std::os::unix::process::ExitStatusExt::from_raw(1 << 8)),
        }
    }

    fn kill(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn stderr(&mut self) -> String {
        let mut s = String::new();
        if let Some(e) = self.0.as_mut().and_then(|c| c.stderr.as_mut()) {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        self.kill();
    }
}

fn read_lossy(p: &Path) -> String {
    std::fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The console's first line in which the guest's kernel reports a stall.
fn stall_report(console: &str) -> Option<&str> {
    console
        .lines()
        .find(|l| STALL_MARKS.iter().any(|m| l.contains(m)))
}

/// The last `n` lines.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Where boots keep their work directories: `$TMPDIR/rtgauge-lab/<owner pid>-…`.
fn runtime_dir() -> PathBuf {
    std::env::temp_dir().join("rtgauge-lab")
}

/// A boot's work directory (initramfs, console, the archive handed back, QEMU's pid file), removed when
/// dropped; named after its owner's pid so that a killed owner's is found and removed by [`clean_stale`].
struct WorkDir(tempfile::TempDir);

impl WorkDir {
    fn new() -> Result<WorkDir, LabError> {
        let rt = runtime_dir();
        std::fs::create_dir_all(&rt).map_err(io(&rt))?;
        tempfile::Builder::new()
            .prefix(&format!("{}-", std::process::id()))
            .tempdir_in(&rt)
            .map(WorkDir)
            .map_err(io(&rt))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Remove what a killed earlier run left: its QEMU (still running if the kernel did not kill it) and its
/// work directory. Returns how many work directories were removed.
pub fn clean_stale() -> usize {
    let rt = runtime_dir();
    let Ok(entries) = std::fs::read_dir(&rt) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let owner = name.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if owner.is_none_or(|p| p == std::process::id() || pid_alive(p)) {
            continue;
        }
        let dir = e.path();
        if let Some(qpid) = std::fs::read_to_string(dir.join("qemu.pid"))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            // Only a QEMU whose command line names this directory: a recycled pid is someone else's.
            let cmdline = std::fs::read(format!("/proc/{qpid}/cmdline")).unwrap_or_default();
            let needle = dir.display().to_string();
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                // SAFETY: plain kill of a process we identified as our leftover QEMU.
                unsafe { libc::kill(qpid, libc::SIGKILL) };
                for _ in 0..100 {
                    if !pid_alive(qpid as u32) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        if std::fs::remove_dir_all(&dir).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// This host boot's identity: a KVM verdict holds until the host reboots.
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The acceleration to use, if decided: forced by `RTGAUGE_LAB_ACCEL`, TCG without a usable /dev/kvm, or
/// the verdict remembered for this host boot.
fn decided_accel(cache: &Path) -> Option<Accel> {
    match std::env::var("RTGAUGE_LAB_ACCEL").ok().as_deref() {
        Some("tcg") => return Some(Accel::Tcg),
        Some("kvm") => return Some(Accel::Kvm),
        _ => {}
    }
    if std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        return Some(Accel::Tcg);
    }
    let text = std::fs::read_to_string(cache.join("accel")).ok()?;
    let map: BTreeMap<&str, &str> = text
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect();
    if map.get("boot_id") != Some(&boot_id().as_str()) {
        return None;
    }
    match map.get("accel") {
        Some(&"kvm") => Some(Accel::Kvm),
        Some(&"tcg") => Some(Accel::Tcg),
        _ => None,
    }
}

fn remember_accel(cache: &Path, accel: Accel) {
    let _ = std::fs::write(
        cache.join("accel"),
        format!("boot_id={} accel={accel}\n", boot_id()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_report_is_found_in_the_console_and_a_sound_boot_has_none() {
        // The console of the guest a CI run lost (kernel lines and the script's own).
        let stuck = "rtgauge-lab: up 3.46 s, clocksource tsc\n[3.56 s] culprit\n\
            [   25.792241] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n\
            [   25.794273] rcu: All QSes seen, last rcu_preempt kthread activity 5252 (4294898675-4294893423), jiffies_till_next_fqs=1, root ->qsmask 0x0\n\
            [   25.796672] rcu: rcu_preempt kthread starved for 5252 jiffies! g-631 f0x2 RCU_GP_WAIT_FQS(5) ->state=0x0 ->cpu=2\n";
        assert_eq!(
            stall_report(stuck),
            Some("[   25.792241] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:")
        );
        let lockup = "[   48.1] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [sh:96]\n";
        assert!(stall_report(lockup).is_some());
        // Lines of a sound RT boot that speak of lockups and RCU, and a script's own words.
        let sound = "[    0.050417] IRQ lockup detection disabled\n\
            [    0.093112] rcu: Preemptible hierarchical RCU implementation.\n\
            [    0.093117] rcu: \tRCU priority boosting: priority 1 delay 500 ms.\n\
            rtgauge: stalls: 3 episodes\nrtgauge-lab: up 3.5 s, clocksource tsc\n";
        assert_eq!(stall_report(sound), None);
    }

    #[test]
    fn clocksource_events_are_read_from_dmesg() {
        let dmesg = "[    1.45] clocksource: Switched to clocksource tsc-early\n\
                     [    5.98] clocksource:                       'tsc' is current clocksource.\n\
                     [    5.98] tsc: Marking TSC unstable due to clocksource watchdog\n\
                     [    6.16] clocksource: Switched to clocksource hpet\n\
                     [    6.20] random: crng init done\n";
        let c = Clocksource::parse("tsc tsc hpet acpi_pm\n", "hpet tsc hpet acpi_pm\n", dmesg);
        assert_eq!(c.at_start, "tsc");
        assert_eq!(c.at_end, "hpet");
        assert_eq!(c.available, "tsc hpet acpi_pm");
        assert_eq!(c.events.len(), 3, "{:?}", c.events);
        assert!(c.tsc_unstable());
        assert_eq!(
            c.to_string(),
            "tsc → hpet (the watchdog marked the TSC unstable)"
        );
        let quiet = Clocksource::parse("tsc tsc\n", "tsc tsc\n", "");
        assert!(!quiet.tsc_unstable());
        assert_eq!(quiet.to_string(), "tsc");
    }

    #[test]
    fn stale_work_directories_of_dead_owners_are_removed() {
        let rt = runtime_dir();
        std::fs::create_dir_all(&rt).unwrap();
        // A pid that cannot be alive (above pid_max's ceiling).
        let dead = rt.join("4194305-stale-test");
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(dead.join("qemu.pid"), "1\n").unwrap();
        let mine = WorkDir::new().unwrap();
        clean_stale();
        assert!(!dead.exists(), "a dead owner's directory is removed");
        assert!(mine.path().exists(), "a live owner's is kept");
        assert!(pid_alive(1), "pid 1 (named in the pid file) was not killed");
    }
}
