//! A VM's host side: what the host did to a running guest's vCPUs, recorded while the guest measures, on a
//! clock shared with the guest (see `rtgauge_model::vm` for the record and the clock's bound,
//! `rtgauge_analysis::vm_join` for the join; `docs/vm.md` for the commands).
//!
//! What a host record is — per vCPU, the intervals it lost and their causes, and a clock with its bound —
//! is the model's [`HostRecord`]; how it is gathered is a [`HostSource`]:
//!
//! - [`HostSource`]: the seam; [`kvm::TracefsSource`], a QEMU/KVM guest on a Linux host followed through
//!   tracefs, is the one source today ([`kvm`]: finding its vCPU threads, folding the trace);
//! - [`channel`]: the NTP-style exchange over a serial/virtio-serial port, a unix socket or TCP (both ends),
//!   whatever the source;
//! - [`observe`]: a source and the clock as a [`rtgauge_session::SessionObserver`] run by a
//!   [`rtgauge_session::Probe`] that measures nothing itself ([`observe::VmWatch`]) through
//!   [`rtgauge_session::Session::measure`].

pub mod channel;
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
/// the channel to the guest, [`channel`]), `observer` (what observing cost), and the lines of `missing` that
/// follow the source's own (a clock that never answered, intervals the bound dropped).
///
/// One source today: [`kvm::TracefsSource`], per-event intervals from a Linux host's scheduler, interrupt
/// and kvm tracepoints. A VMware ESXi host's source would read esxtop (batch mode) or vmkperf counters,
/// which give totals per vCPU and sample period (esxtop's delay, 5 s by default), not events: the time a
/// vCPU was ready but not running (`%RDY`), co-stopped (`%CSTP`), waiting in the VMkernel (`%VMWAIT`). It
/// would implement `gather` by reading the samples as they come, and `into_record` by naming the VM and
/// its vCPUs by their world ids; but an interval of the record says when a vCPU lost time, and a total
/// only how much within a period: the record would need an additive field for such totals (the schema
/// version kept) rather than intervals stretched over whole periods. It would leave `missing` what only a
/// per-event trace has: when within a period the time was lost (what the join matches a guest spike
/// against), which thread, IRQ or softirq ran instead, VM exits and their reasons, wake-ups delayed by
/// another thread, and the host CPU of each stretch.
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
