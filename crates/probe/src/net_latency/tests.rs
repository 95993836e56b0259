//! The packet-latency probe on loopback: streams, split streams, round trips, counts and the watched
//! stream, each against what was sent.

use super::*;
use rtgauge_model::net_latency::{WINDOW, WORST_PACKETS};
use rtgauge_model::rt::SchedPolicy;

fn plan(addr: &str, round_trip: bool, rate: f64, duration_ms: u64) -> NetLatencyPlan {
    NetLatencyPlan {
        config: NetLatencyConfig {
            target: addr.into(),
            round_trip,
            rate_per_s: rate,
            burst: 1,
            size: 64,
            tx_cpu: None,
            rx_cpu: None,
            rtprio: None,
            rx_mode: RxMode::Block,
            tx_netns: None,
            rx_netns: None,
            ethernet: None,
            deadline_ns: Some(1),
            duration: rtgauge_model::Nanos(duration_ms * 1_000_000),
            drain_ns: 200_000_000,
            timeline_interval_ns: 100_000_000,
            role: StreamRole::Both,
            stream: None,
            peer_clock: None,
            listen_ns: None,
        },
        addr: addr.parse().unwrap(),
        peer_shift_ns: None,
    }
}

#[test]
fn the_schedule_counts_packets_not_bursts() {
    let mut p = plan("127.0.0.1:0", false, 4000.0, 1000);
    assert_eq!(p.period_ns(), 250_000.0);
    assert_eq!(p.capacity(), 4000);
    p.config.burst = 4;
    assert_eq!(p.period_ns(), 1_000_000.0, "4 packets every ms is 4,000/s");
    assert_eq!(p.capacity(), 4000);
    // 3,000/s for 0.5 s: 1,500 packets, the 1,500th due at 499.67 ms (the period not rounded to 333,333 ns).
    let mut q = plan("127.0.0.1:0", false, 3000.0, 500);
    assert_eq!(q.capacity(), 1500);
    assert_eq!(q.schedule().due_ns(1499), 499_666_667);
    q.config.timeline_interval_ns = 100_000_000;
    assert_eq!(
        q.schedule().interval(1499),
        4,
        "the last send falls in the fifth 100 ms interval"
    );
}

fn state(capacity: u64) -> RxState {
    RxState::new(&plan("127.0.0.1:0", false, 1000.0, 1000), capacity)
}

fn datagram(seq: u64, sent: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    Packet {
        stream: 9,
        seq,
        sent_realtime_ns: sent,
        // Another clock altogether (a guest's sender): used only with a shift.
        sent_mono_ns: sent.wrapping_add(7_000_000_000),
    }
    .write(&mut b);
    b
}

#[test]
fn duplicates_reordering_and_foreign_datagrams_are_counted_apart() {
    let mut s = state(100);
    let take = |s: &mut RxState, seq: u64, kernel: Option<u64>| {
        s.take(&datagram(seq, 1_000), 9, (5_000, kernel), None, Some(4_000))
    };
    take(&mut s, 0, Some(3_000));
    take(&mut s, 2, Some(3_000));
    take(&mut s, 1, None);
    take(&mut s, 2, Some(3_000));
    s.take(&[0u8; 32], 9, (5_000, None), None, None);
    take(&mut s, 100, None);
    assert_eq!(s.received, 3);
    assert_eq!(s.duplicates, 1);
    assert_eq!(s.reordered, 1, "1 came after 2");
    assert_eq!(
        s.foreign, 2,
        "a zero datagram and a sequence number beyond the run"
    );
    assert_eq!(s.unstamped, 1);
    assert_eq!(s.latency.stats().max_ns, 4_000);
    assert_eq!(s.path.stats().max_ns, 2_000, "send → kernel");
    assert_eq!(s.wakeup.stats().max_ns, 2_000, "kernel → thread");
    assert_eq!(s.late, 3, "4 µs reaches the 4 µs deadline");
    assert_eq!(s.late_packets[2].path_ns, None);
}

fn live(round_trip_to: Option<SocketAddr>) -> NetLatencyResult {
    let addr = round_trip_to.map_or("127.0.0.1:0".to_string(), |a| a.to_string());
    let p = plan(&addr, round_trip_to.is_some(), 2000.0, 500);
    run(&p, &StopFlag::new(), &mut |_| {}).expect("the probe runs on loopback")
}

#[test]
fn one_way_on_loopback_receives_every_packet_with_its_split() {
    let r = live(None);
    assert_eq!(r.sent, 1000, "2,000/s for 0.5 s");
    assert_eq!(r.received + r.lost, r.sent);
    assert_eq!(r.lost, 0, "loopback loses nothing at 2,000/s");
    assert_eq!(r.duplicates, 0);
    assert_eq!(r.timestamps, KernelStamps::Software);
    let (path, wake) = (r.path.as_ref().unwrap(), r.wakeup.as_ref().unwrap());
    assert_eq!(path.count, r.received);
    // Each packet's path and wake-up add up to its latency (within the clocks' reads).
    assert!(path.min_ns + wake.min_ns <= r.latency.max_ns);
    assert!(r.latency.min_ns >= path.min_ns);
    assert_eq!(r.late, r.received, "every packet reaches a 1 ns deadline");
    assert_eq!(r.late_packets.len() as u64, r.late);
    assert_eq!(r.timeline.iter().map(|t| t.count).sum::<u64>(), r.received);
    assert_eq!(r.timeline.len(), 5, "0.5 s in 100 ms intervals");
    assert_eq!(r.sender.policy.achieved, SchedPolicy::Other);
    assert!(r.sender_cpu_ns > 0 && r.receiver_cpu_ns > 0);
}

#[test]
fn a_round_trip_goes_through_the_reflector() {
    let stop = StopFlag::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let refl = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            reflect(
                &ReflectPlan {
                    listen: "127.0.0.1:0".parse().unwrap(),
                    cpu: None,
                    rtprio: None,
                    duration: None,
                },
                &stop,
                move |a| tx.send(a).unwrap(),
            )
        })
    };
    let addr = rx.recv().unwrap();
    let r = live(Some(addr));
    stop.set();
    let echoed = refl.join().unwrap().unwrap().echoed;
    assert_eq!(echoed, r.sent, "the reflector sent back every packet");
    assert_eq!(r.received, r.sent);
    assert!(r.config.round_trip);
}

#[test]
fn nothing_listening_loses_every_packet_and_says_so() {
    // A port bound by nobody: the round trip's packets never come back.
    let free = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let r = live(Some(addr));
    assert_eq!(r.received, 0);
    assert_eq!(r.lost + r.send_errors, 1000);
}

#[test]
fn the_slowest_packets_are_kept_without_a_deadline() {
    let mut s = state(100);
    for (seq, latency) in (0..40u64).map(|i| (i, (i * 7919) % 97 + 1)) {
        s.take(
            &datagram(seq, 1_000),
            9,
            (1_000 + latency, None),
            None,
            None,
        );
    }
    let mut kept: Vec<u64> = s.worst.iter().map(|p| p.latency_ns).collect();
    kept.sort_unstable();
    let mut all: Vec<u64> = (0..40u64).map(|i| (i * 7919) % 97 + 1).collect();
    all.sort_unstable();
    assert_eq!(
        kept,
        all[all.len() - WORST_PACKETS..],
        "the 16 slowest of 40"
    );
    assert_eq!(s.worst.capacity(), WORST_PACKETS, "never grown");
    assert_eq!(s.late, 0, "no deadline: none is late");
}

#[test]
fn a_packet_is_lost_once_the_window_has_passed_it_and_stale_if_it_comes_after() {
    // 1,000/s for 10,000 s: more sequence numbers than the window holds.
    let p = plan("127.0.0.1:0", false, 1000.0, 10_000_000);
    let mut s = RxState::new(&p, p.capacity());
    assert_eq!(s.window_len(), WINDOW);
    let take =
        |s: &mut RxState, seq: u64| s.take(&datagram(seq, 1_000), 9, (5_000, None), None, None);
    take(&mut s, 0);
    take(&mut s, WINDOW + 5);
    assert_eq!(s.base, 6, "0..=5 settled: 0 received, 1..=5 not");
    assert_eq!(s.unseen_in.iter().sum::<u64>(), 5);
    take(&mut s, 3);
    assert_eq!((s.stale, s.received), (1, 2), "3 came after it was settled");
    take(&mut s, WINDOW + 5);
    assert_eq!(s.duplicates, 1, "still in the window: a duplicate");
    s.settle(WINDOW + 10);
    assert_eq!(s.unseen_in.iter().sum::<u64>(), WINDOW + 10 - 2);
    // 10,000 s in at most 2,048 intervals: 100 ms doubled to 6.4 s, 6,400 packets each; the first holds
    // every unseen one of its own but packet 0.
    let sch = p.schedule();
    assert_eq!(sch.span_ns, 6_400_000_000);
    assert!(sch.intervals <= rtgauge_model::latency::MAX_TIMELINE + 1);
    assert_eq!(s.unseen_in[0], 6_399);
}

#[test]
fn a_receiver_on_another_clock_puts_the_monotonic_send_time_on_its_own() {
    let mut s = state(100);
    // The sender's CLOCK_MONOTONIC was 7,000,001,000 at the send; ours reads it as 3,000 on our wall
    // clock (shift −6,999,998,000): received at 5,000, kernel stamp 4,500.
    s.take(
        &datagram(0, 1_000),
        9,
        (5_000, Some(4_500)),
        Some(-6_999_998_000),
        None,
    );
    let l = s.latency.stats();
    assert_eq!((l.count, l.max_ns), (1, 2_000), "5,000 − 3,000");
    assert_eq!(s.path.stats().max_ns, 1_500);
    assert_eq!(s.wakeup.stats().max_ns, 500);
}

#[test]
fn a_watched_stream_counts_from_its_first_packet_and_again_from_a_restarted_sender() {
    let mut s = RxState::following(&plan("127.0.0.1:0", false, 1000.0, 1000));
    assert_eq!(s.window_len(), rtgauge_model::net_latency::WATCH_WINDOW);
    let take = |s: &mut RxState, seq: u64, sent: u64| {
        s.take(&datagram(seq, sent), 9, (sent + 500, None), None, None)
    };
    // Joined mid-stream: what came before its first packet is not lost.
    assert_eq!(take(&mut s, 1_000_000, 10_000), Some((500, None)));
    take(&mut s, 1_000_002, 10_002);
    take(&mut s, 1_000_001, 10_001);
    assert_eq!((s.received, s.reordered, s.restarts), (3, 1, 0));
    // Late beyond the window: stale, not a restart (it was sent before the highest).
    take(&mut s, 1_000_000 + 9_000, 20_000_000);
    take(&mut s, 1_000_004, 10_004);
    assert_eq!((s.stale, s.restarts), (1, 0));
    assert_eq!(
        s.unseen,
        9_000 + 1 - 8_192 - 3,
        "3 of the settled numbers were received"
    );
    // The sender started again: numbered from 0, sent after everything before. The old run's unsettled
    // numbers are lost; the count starts again.
    let before = s.unseen;
    take(&mut s, 0, 30_000_000);
    assert_eq!(s.restarts, 1);
    assert_eq!(
        s.unseen - before,
        8_192 - 1,
        "the old window, less its one packet received"
    );
    take(&mut s, 1, 30_000_001);
    take(&mut s, 1, 30_000_001);
    assert_eq!(
        (s.received, s.duplicates, s.restarts),
        (6, 1, 1),
        "a duplicate is no restart"
    );
    // The old run's packet, late: numbered above the new highest but sent before it. Not the count's
    // (foreign), and not a new highest (that would settle a billion numbers).
    take(&mut s, 1_000_000_000, 19_000);
    assert_eq!((s.foreign, s.highest, s.restarts), (1, Some(1), 1));
    assert_eq!(s.stale, 1);
}

#[test]
fn a_watched_stream_counts_a_long_gap_at_once_and_a_sender_behind_its_old_clock_as_a_restart() {
    let mut s = RxState::following(&plan("127.0.0.1:0", false, 1000.0, 1000));
    let take = |s: &mut RxState, seq: u64, sent: u64| {
        s.take(&datagram(seq, sent), 9, (sent + 500, None), None, None)
    };
    take(&mut s, 0, 1_000);
    // Further ahead than the sender's clock allows (10^12 numbers in 1 µs): another sender's numbering.
    take(&mut s, 1_000_000_000_000, 2_000);
    assert_eq!((s.foreign, s.highest), (1, Some(0)));
    // A link down for 28 hours: 10^12 numbers never came, counted in one step.
    let later = 1_000 + 100_000_000_000_000;
    take(&mut s, 1_000_000_000_000, later);
    assert_eq!(s.unseen, 1_000_000_000_000 - 8_192);
    assert_eq!(s.base, 1_000_000_000_001 - 8_192);
    // The sender started again with its clock behind the old run's (a rebooted host): every packet looks
    // older than the highest. After 64 stale ones in a row the count starts again from the next.
    for seq in 0..64 {
        assert_eq!(take(&mut s, seq, 1_500 + seq), None);
    }
    assert_eq!((s.stale, s.restarts), (64, 0));
    assert!(take(&mut s, 64, 1_600).is_some());
    assert_eq!(s.restarts, 1);
    assert_eq!(s.highest, Some(64));
    take(&mut s, 65, 1_601);
    assert_eq!((s.received, s.stale), (4, 64));
}
