//! The round trip's far end (`rtgauge net reflect`): every probe packet received is sent back unchanged
//! to where it came from, by one thread (pinned and SCHED_FIFO when asked), blocking in `recvfrom`.

use super::wire::{self, Socket};
use crate::rt;
use crate::stop::StopFlag;
use crate::ProbeError;
use rtgauge_model::rt::ThreadConditions;
use rtgauge_model::Nanos;
use std::net::SocketAddr;

/// What `net reflect` was asked for.
#[derive(Debug, Clone)]
pub struct ReflectPlan {
    /// The address to listen on (port 0: any).
    pub listen: SocketAddr,
    /// The CPU of its thread.
    pub cpu: Option<u32>,
    /// SCHED_FIFO priority (`None`: SCHED_OTHER).
    pub rtprio: Option<i32>,
    /// Stop after this long (`None`: until `stop`).
    pub duration: Option<Nanos>,
}

/// What the reflector did.
#[derive(Debug, Clone)]
pub struct Reflected {
    /// Datagrams sent back.
    pub echoed: u64,
    /// Sends that failed.
    pub errors: u64,
    /// Datagrams that were not the probe's, not sent back.
    pub ignored: u64,
    /// Its thread's scheduling and CPU, as asked and as got.
    pub conditions: ThreadConditions,
}

/// Reflect until `stop` (or the duration); `bound` hears the address once the socket listens.
pub fn reflect(
    plan: &ReflectPlan,
    stop: &StopFlag,
    bound: impl FnOnce(SocketAddr) + Send + 'static,
) -> Result<Reflected, ProbeError> {
    let (plan, stop) = (plan.clone(), stop.clone());
    rt::on_own_thread("rtgauge-reflect", move || {
        rt::block_signals();
        let sock = Socket::udp(&plan.listen)
            .map_err(|e| ProbeError::Config(format!("reflector socket: {e}")))?;
        sock.bind(&plan.listen)
            .map_err(|e| ProbeError::Config(format!("--listen {}: {e}", plan.listen)))?;
        let addr = sock
            .local_addr()
            .map_err(|e| ProbeError::Config(format!("reflector socket: {e}")))?;
        sock.grow_receive_buffer(4 << 20);
        sock.receive_timeout(50_000_000)
            .map_err(|e| ProbeError::Config(format!("reflector socket: {e}")))?;
        let conditions = super::thread_conditions(plan.cpu, plan.rtprio);
        bound(addr);
        let end = plan
            .duration
            .map(|d| wire::monotonic_ns().saturating_add(d.as_ns()));
        let mut buf = vec![0u8; 65_536];
        let mut out = Reflected {
            echoed: 0,
            errors: 0,
            ignored: 0,
            conditions,
        };
        while !stop.is_set() && end.is_none_or(|e| wire::monotonic_ns() < e) {
            if let Ok((n, from)) = sock.recv_from(&mut buf) {
                // Only the probe's packets: anything else sent back where it came from could bounce
                // between two reflectors for ever.
                if !super::wire::is_probe_packet(&buf[..n]) {
                    out.ignored += 1;
                    continue;
                }
                match sock.send_to(&buf[..n], &from) {
                    Ok(_) => out.echoed += 1,
                    Err(_) => out.errors += 1,
                }
            }
        }
        Ok(out)
    })?
}
