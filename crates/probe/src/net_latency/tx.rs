//! The sender's software transmit timestamps: each packet sent comes back on the socket's error queue with
//! the time the driver took it (`SOF_TIMESTAMPING_TX_SOFTWARE`, taken in the driver's transmit routine:
//! loopback, veth, tap, virtio-net and most NIC drivers), and its own header, so each stamp is matched to
//! the packet's send time without a table. The difference is the sender's own stack, qdisc included: the
//! first part of the path.

use super::wire::{self, Socket};
use crate::recorder::LatencyRecorder;
use rtgauge_model::net_latency::KernelStamps;

/// The send-stack recorder and what came back, allocated before the loop.
pub(super) struct TxStamps {
    pub(super) stack: LatencyRecorder,
    /// Packets of the stream that came back with a stamp.
    pub(super) stamped: u64,
    /// Why the socket refused them, if it did.
    pub(super) error: Option<String>,
    /// Messages taken from the error queue (one per packet sent, stamped or not).
    taken: u64,
    /// Drains that found no stamp while none has come yet; at [`GIVE_UP_AFTER`] it stops looking.
    empty: u64,
    buf: Vec<u8>,
}

/// Drains (one per burst) without a single stamp back after which the sender stops looking (a driver that
/// takes none: one `recvmsg` less per burst).
const GIVE_UP_AFTER: u64 = 1024;

impl TxStamps {
    /// Ask `sock` for them; packets of `size` bytes and their headers fit the buffer.
    pub(super) fn new(sock: &Socket, size: usize) -> TxStamps {
        // The stamped packets wait on the error queue, charged to the socket's receive buffer, until the
        // burst is out: room for the largest burst (capped by rmem_max).
        sock.grow_receive_buffer(4 << 20);
        TxStamps {
            stack: LatencyRecorder::new(),
            stamped: 0,
            taken: 0,
            empty: 0,
            error: sock
                .timestamp_software(false, true)
                .err()
                .map(|e| format!("SO_TIMESTAMPING (software transmit): {e}")),
            // Headers (at most an Ethernet, VLAN, IPv6 and UDP header) before the probe's.
            buf: vec![0u8; size + 128],
        }
    }

    /// Take the stamps waiting, at most one per packet of the `sent` so far (without waiting): each
    /// packet's send stack is recorded.
    #[inline]
    pub(super) fn drain(&mut self, sock: &Socket, stream: u32, sent: u64) {
        if self.error.is_some() || self.empty >= GIVE_UP_AFTER {
            return;
        }
        let (stack, stamped) = (&mut self.stack, &mut self.stamped);
        self.taken += sock.drain_tx_stamps(&mut self.buf, sent - self.taken, |stamp, bytes| {
            if let Some(p) = wire::find_packet(bytes, stream) {
                stack.record(stamp.saturating_sub(p.sent_realtime_ns));
                *stamped += 1;
            }
        });
        if self.stamped == 0 {
            self.empty += 1;
        }
    }

    /// After the last send: the stamps of packets a queue held back past their send.
    pub(super) fn finish(&mut self, sock: &Socket, stream: u32, sent: u64) {
        std::thread::sleep(std::time::Duration::from_millis(1));
        self.drain(sock, stream, sent);
    }

    /// What the kernel's transmit timestamps were, over `sent` packets.
    pub(super) fn status(&self, sent: u64) -> KernelStamps {
        super::kernel_stamps(
            self.error.as_deref(),
            (sent, self.stamped),
            (
                "no packet was sent",
                "no packet sent came back with a software transmit timestamp (its driver takes none)",
            ),
        )
    }
}
