//! A VM's host side: what the host did to a running guest's vCPUs, recorded while the guest measures, on a
//! clock shared with the guest (see `rtgauge_model::vm` for the record and the clock's bound,
//! `rtgauge_analysis::vm_join` for the join; `docs/vm.md` for the commands).
//!
//! What a host record is — per vCPU, the intervals it lost and their causes, and a clock with its bound —
//! is the model's [`HostRecord`]; how it is gathered is a [`HostSource`]:
//!
//! - [`HostSource`]: the seam; [`kvm::TracefsSource`], a QEMU/KVM guest on a Linux host followed through
//!   tracefs, is the one source today ([`kvm`]: finding its vCPU threads, folding the trace);
//! - [`clock`]: the NTP-style exchange over a serial/virtio-serial port, a unix socket or TCP (both ends),
//!   whatever the source;
//! - [`observe`]: a source and the clock as an [`rtgauge_session::Observer`] run by a
//!   [`rtgauge_session::Probe`] that measures nothing itself ([`observe::VmWatch`]) through
//!   [`rtgauge_session::Session::measure`].

pub mod clock;
pub mod kvm;
pub mod observe;

use rtgauge_model::vm::HostRecord;

/// How a VM's host record is gathered: one way of learning what a host did to a VM's vCPUs while its guest
/// measures.
///
/// A source yields a [`HostRecord`] over one observation: the host (`host`, `kernel`), the VM and its
/// vCPUs (`vm`, `vcpus`), the intervals in which each vCPU lost time with their causes (`names`,
/// `intervals`, `exits`; `dropped` and `dropped_before_ns` past its bound), how they were gathered
/// (`trace`), and one line in `missing` for each thing it could not collect. What is not the source's is
/// left empty for the [`observe::HostObserver`] to fill, the same for every source: `clock` (measured over
/// the channel to the guest, [`clock`]), `observer` (what observing cost), and the lines of `missing` that
/// follow the source's own (a clock that never answered, intervals the bound dropped).
///
/// One source today: [`kvm::TracefsSource`], per-event intervals from a Linux host's scheduler, interrupt
/// and kvm tracepoints. A VMware ESXi host's source would read esxtop (batch mode) or vmkperf counters:
/// per vCPU and per sample period (seconds), the time it was ready but not running (`%RDY`), co-stopped
/// (`%CSTP`), waiting in the VMkernel (`%VMWAIT`) — totals per period, not events. It would identify the VM
/// and its vCPUs by their world ids, and its intervals could only say that a vCPU lost so much time in a
/// period, not when within it: the record has no field for such totals yet (an additive one, the schema
/// version kept), which is what such a source would add rather than stretch each total over its whole
/// period. It would leave `missing` what only a per-event trace has: which thread, IRQ or softirq ran
/// instead, VM exits and their reasons, wake-ups delayed by another thread, the host CPU of each interval,
/// and a placement in time precise enough for the join to match a guest spike to one period.
pub trait HostSource {
    /// Take in what the host produced since the last call. Called on every tick of the observation (about
    /// every 100 ms), from the session's main thread: quick, never waiting on the host.
    fn gather(&mut self);

    /// Stop gathering and hand the record over, covering `started_ns` to `ended_ns` (host
    /// CLOCK_MONOTONIC): what is still open at `ended_ns` is closed there.
    fn into_record(self: Box<Self>, started_ns: u64, ended_ns: u64) -> HostRecord;
}

/// Why the host side could not run.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// Bad input (a pid, a domain, a channel): one line naming it.
    #[error("{0}")]
    Input(String),
    /// Tracing could not start.
    #[error("host trace: {0}")]
    Trace(#[from] rtgauge_probe::trace::TraceError),
}
