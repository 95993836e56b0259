//! A VM's host side: what the host did to the vCPU threads of a running QEMU/KVM guest, recorded while the
//! guest measures, on a clock shared with the guest (see `rtgauge_model::vm` for the record and the clock's
//! bound, `rtgauge_analysis::vm_join` for the join; `docs/vm.md` for the commands).
//!
//! - [`kvm`]: a QEMU/KVM guest's vCPU threads, by QEMU pid (thread names) or libvirt domain (its status
//!   file), and the host trace folded into per-vCPU intervals;
//! - [`clock`]: the NTP-style exchange over a serial/virtio-serial port, a unix socket or TCP (both ends);
//! - [`observe`]: the trace and the clock as an [`rtgauge_session::Observer`] run by a
//!   [`rtgauge_session::Probe`] that measures nothing itself ([`observe::VmWatch`]) through
//!   [`rtgauge_session::Session::measure`].

pub mod clock;
pub mod kvm;
pub mod observe;

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
