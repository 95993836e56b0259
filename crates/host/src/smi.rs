//! System Management Interrupts counted per CPU: `MSR_SMI_COUNT` (0x34, Intel since Nehalem; bits 31:0
//! count the SMIs the CPU has taken since reset), read through the msr driver's `/dev/cpu/N/msr` as
//! turbostat, hwlatdetect and `cyclictest --smi` read it. An SMI stops every CPU it lands on and runs
//! firmware that no kernel sees: a stall of a CPU whose SMI count rose is firmware's, whatever else
//! happened.
//!
//! What is countable: Intel CPUs (bare metal: every SMI; a KVM or QEMU guest: only the SMIs of its own
//! virtual firmware, never the host's). AMD has no such MSR (its SMIs show only as a perf event), so there
//! SMIs are "not countable", said with the reason, never a zero.

use crate::root::HostRoot;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The SMI count MSR.
pub const MSR_SMI_COUNT: u64 = 0x34;

/// Where SMIs can be counted, from `/proc/cpuinfo`'s vendor and flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmiPlatform {
    /// An Intel CPU on bare metal: every SMI is counted.
    IntelHost,
    /// An Intel CPU as a guest (the `hypervisor` flag): the count is the virtual firmware's SMIs only.
    IntelGuest,
    /// Not countable, and why.
    NotCountable(String),
}

impl SmiPlatform {
    /// What the counts cover, for the document (one line).
    pub fn describe(&self) -> String {
        match self {
            SmiPlatform::IntelHost => {
                "MSR_SMI_COUNT (0x34) per CPU through /dev/cpu/N/msr: every SMI this CPU took".into()
            }
            SmiPlatform::IntelGuest => "MSR_SMI_COUNT (0x34) per CPU through /dev/cpu/N/msr, in a guest: \
                 only the SMIs of its virtual firmware (the host's SMIs are invisible here; measure them on the host)"
                .into(),
            SmiPlatform::NotCountable(why) => format!("SMIs not counted: {why}"),
        }
    }
}

/// The platform, from the text of `/proc/cpuinfo` (pure).
pub fn parse_platform(cpuinfo: &str) -> SmiPlatform {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let guest = field("flags").is_some_and(|f| f.split_whitespace().any(|w| w == "hypervisor"));
    match field("vendor_id").as_deref() {
        Some("GenuineIntel") if guest => SmiPlatform::IntelGuest,
        Some("GenuineIntel") => SmiPlatform::IntelHost,
        Some(v @ ("AuthenticAMD" | "HygonGenuine")) => SmiPlatform::NotCountable(format!(
            "{v} CPUs have no SMI count MSR (their SMIs show only as the perf event ls_smi_rx, which rtgauge does not read)"
        )),
        Some(v) => SmiPlatform::NotCountable(format!("no SMI counter known for {v} CPUs")),
        None => SmiPlatform::NotCountable(
            "no x86 vendor in /proc/cpuinfo (SMIs are an x86 mechanism)".into(),
        ),
    }
}

/// The platform of this host (or captured tree).
pub fn read_platform(root: &HostRoot) -> SmiPlatform {
    match root.read_optional("/proc/cpuinfo") {
        Some(t) => parse_platform(&t),
        None => SmiPlatform::NotCountable("no /proc/cpuinfo".into()),
    }
}

/// Open `/dev/cpu/N/msr` of each CPU in `cpus` and read the counter once, or say why SMIs cannot be
/// counted (`modprobe msr` loads the driver: `rtgauge_probe::smi` does that first).
#[derive(Debug)]
pub struct SmiReader {
    files: Vec<(u32, File)>,
    /// What the counts cover.
    pub platform: SmiPlatform,
    /// Every CPU's count when opened (the read that proved the counter answers; each read interrupts the
    /// CPU, so it serves as the first sample).
    pub opened: BTreeMap<u32, u64>,
}

/// The counter through an open `/dev/cpu/N/msr` (bits 31:0).
fn read_count(f: &File) -> Option<u64> {
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, MSR_SMI_COUNT).ok()?;
    Some(u64::from_le_bytes(b) & 0xffff_ffff)
}

impl SmiReader {
    /// A reader of the counters of `cpus`, each read once to prove it answers.
    pub fn open(root: &HostRoot, cpus: impl IntoIterator<Item = u32>) -> Result<SmiReader, String> {
        let platform = read_platform(root);
        if let SmiPlatform::NotCountable(why) = platform {
            return Err(why);
        }
        let (mut files, mut opened) = (Vec::new(), BTreeMap::new());
        for cpu in cpus {
            let p = root.path(&format!("/dev/cpu/{cpu}/msr"));
            let f = File::open(&p).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => format!(
                    "no {} (the msr driver is not loaded: modprobe msr, CONFIG_X86_MSR)",
                    p.display()
                ),
                _ => format!(
                    "{}: {e} (reading MSRs needs root and CAP_SYS_RAWIO)",
                    p.display()
                ),
            })?;
            let n = read_count(&f).ok_or_else(|| {
                format!(
                    "{}: MSR_SMI_COUNT (0x34) cannot be read (a CPU or hypervisor without it)",
                    p.display()
                )
            })?;
            opened.insert(cpu, n);
            files.push((cpu, f));
        }
        Ok(SmiReader {
            files,
            platform,
            opened,
        })
    }

    /// Every CPU's count now (a CPU whose read fails is left out).
    pub fn read(&self) -> BTreeMap<u32, u64> {
        self.files
            .iter()
            .filter_map(|(cpu, f)| Some((*cpu, read_count(f)?)))
            .collect()
    }
}

/// SMIs between two reads of the 32-bit counter (it wraps).
pub fn smi_delta(after: u64, before: u64) -> u64 {
    (after as u32).wrapping_sub(before as u32) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendor_and_the_hypervisor_flag_decide_what_is_countable() {
        let intel = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu vme msr\n";
        assert_eq!(parse_platform(intel), SmiPlatform::IntelHost);
        let guest = "vendor_id\t: GenuineIntel\nflags\t\t: fpu msr hypervisor\n";
        assert_eq!(parse_platform(guest), SmiPlatform::IntelGuest);
        assert!(parse_platform(guest)
            .describe()
            .contains("host's SMIs are invisible"));
        let amd = "vendor_id\t: AuthenticAMD\nflags\t\t: fpu\n";
        match parse_platform(amd) {
            SmiPlatform::NotCountable(w) => assert!(w.contains("AuthenticAMD"), "{w}"),
            p => panic!("{p:?}"),
        }
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n";
        assert!(matches!(parse_platform(arm), SmiPlatform::NotCountable(_)));
        assert!(matches!(parse_platform(""), SmiPlatform::NotCountable(_)));
    }

    #[test]
    fn the_counter_wraps_at_32_bits() {
        assert_eq!(smi_delta(16, 11), 5);
        assert_eq!(smi_delta(2, 0xffff_fffe), 4);
        assert_eq!(smi_delta(7, 7), 0);
    }

    #[test]
    fn a_tree_without_the_msr_device_says_what_to_load() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(
            dir.path().join("proc/cpuinfo"),
            "vendor_id\t: GenuineIntel\nflags\t\t: fpu\n",
        )
        .unwrap();
        let root = HostRoot::at(dir.path());
        let e = SmiReader::open(&root, [0]).unwrap_err();
        assert!(e.contains("modprobe msr"), "{e}");
        // A file standing for the device: the count at offset 0x34.
        std::fs::create_dir_all(dir.path().join("dev/cpu/0")).unwrap();
        let mut msr = vec![0u8; 0x40];
        msr[0x34..0x3c].copy_from_slice(&0xdead_0000_0000_0011u64.to_le_bytes());
        std::fs::write(dir.path().join("dev/cpu/0/msr"), msr).unwrap();
        let r = SmiReader::open(&root, [0]).unwrap();
        assert_eq!(r.read(), BTreeMap::from([(0, 0x11)]));
        assert_eq!(r.opened, r.read());
        assert_eq!(r.platform, SmiPlatform::IntelHost);
    }
}
