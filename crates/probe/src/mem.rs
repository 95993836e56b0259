//! Memory probe: load latency by dependent pointer chasing, read/write/copy bandwidth, NUMA matrix
//! (methods in docs/METHODOLOGY.md, "mem").
//!
//! Latency: the working set is split into 64-byte lines; every line holds the address of the next line of
//! one random cycle through all of them (a Fisher–Yates shuffle, linked in order), so each load depends on
//! the previous one and no prefetcher can guess the next address (lmbench's default chain is a constant
//! stride, which prefetchers follow; this is closer to its `-t` mode and to Intel MLC). The chase is
//! unrolled 16×; ns per load is elapsed / loads, and the minimum over the repetitions is reported, as
//! lat_mem_rd does. Buffers are anonymous mappings with transparent huge pages explicitly off
//! (MADV_NOHUGEPAGE) unless huge pages are asked for (MADV_HUGEPAGE), so the TLB steps show or not by
//! choice rather than by the system's THP setting.
//!
//! Bandwidth (bw_mem's frd/fwr/bcopy): read sums every 8-byte word, write stores every word, copy is
//! memcpy; bytes per pass = the buffer size (not twice for copy), median over repetitions.
//!
//! NUMA: for each node with CPUs and each node with memory, a thread pinned to the first CPU of the first
//! node allocates its buffer bound to the second with mbind(MPOL_BIND) and measures latency and read
//! bandwidth; the node the kernel actually placed the first page on is recorded.

use crate::ops::XorShift;
use crate::ProbeError;
use rtgauge_model::mem::{Bandwidth, CacheInfo, LatencyPoint, MemConfig, MemResult, NumaCell};
use rtgauge_model::ops::median;
use std::hint::black_box;
use std::time::Instant;

const LINE: usize = 64;
/// Fewest loads timed per repetition of a latency point.
const MIN_LOADS: u64 = 200_000;

/// What to measure.
#[derive(Debug, Clone)]
pub struct MemPlan {
    /// The measurement as the run document records it (sizes, strides, CPUs).
    pub config: MemConfig,
    /// Caches from sysfs, to name the steps.
    pub caches: Vec<CacheInfo>,
    /// (node, first CPU) of every node with CPUs, for the NUMA matrix.
    pub cpu_nodes: Vec<(u32, u32)>,
    /// Nodes with memory.
    pub mem_nodes: Vec<u32>,
}

/// Working sets of the default sweep: 2^n and 1.5·2^n from `min` to `max` (inclusive where they fall).
pub fn sweep_sizes(min: u64, max: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut p = 4096u64;
    while p <= max {
        for s in [p, p + p / 2] {
            if s >= min && s <= max {
                out.push(s);
            }
        }
        p *= 2;
    }
    out
}

/// An anonymous mapping, unmapped on drop.
struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    fn new(len: usize, hugepages: bool) -> Result<Region, MemError> {
        let len = len.div_ceil(2 << 20) * (2 << 20);
        // SAFETY: anonymous private mapping; MAP_FAILED is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(MemError::Map {
                len,
                cause: std::io::Error::last_os_error().to_string(),
            });
        }
        let advice = if hugepages {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: advising our own mapping; failure (no THP support) only loses the advice.
        unsafe { libc::madvise(ptr, len, advice) };
        Ok(Region {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Write every page (fault it in now, not while measuring).
    fn touch(&mut self) {
        let mut off = 0;
        while off < self.len {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::write_volatile(self.ptr.add(off), 0) };
            off += 4096;
        }
    }

    fn words(&mut self, bytes: usize) -> &mut [u64] {
        // SAFETY: the mapping is at least `bytes` long, page-aligned, zero-filled and exclusively ours.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u64>(), bytes.min(self.len) / 8) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Link the first `size` bytes of `r` into one random cycle of lines; returns the start address.
fn build_chain(r: &mut Region, size: usize, seed: u64) -> *const usize {
    let lines = (size / LINE).max(1);
    let mut order: Vec<u32> = (0..lines as u32).collect();
    XorShift(seed | 1).shuffle(&mut order);
    let base = r.ptr;
    for k in 0..lines {
        let from = order[k] as usize * LINE;
        let to = order[(k + 1) % lines] as usize * LINE;
        // SAFETY: both offsets are inside the first `size` bytes of the mapping; lines are 8-aligned.
        unsafe { std::ptr::write(base.add(from).cast::<usize>(), base.add(to) as usize) };
    }
    // SAFETY: offset inside the mapping.
    unsafe { base.add(order[0] as usize * LINE).cast::<usize>() }
}

/// Follow the chain for `loads` loads (a multiple of 16); ns elapsed and where it ended.
#[inline(never)]
fn chase(mut p: *const usize, loads: u64) -> (u64, *const usize) {
    let t0 = Instant::now();
    for _ in 0..loads / 16 {
        // SAFETY: every line of the chain holds the address of another line of the same mapping.
        unsafe {
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
            p = *p as *const usize;
        }
    }
    let ns = t0.elapsed().as_nanos() as u64;
    (ns, black_box(p))
}

fn loads_for(size: u64, cap: u64) -> u64 {
    let lines = size / LINE as u64;
    lines.clamp(MIN_LOADS, cap.max(MIN_LOADS)).div_ceil(16) * 16
}

/// One latency point on region `r` (at least `size` long).
fn latency_point(r: &mut Region, size: u64, cfg: &MemConfig) -> LatencyPoint {
    let start = build_chain(r, size as usize, size);
    let loads = loads_for(size, cfg.loads_per_repetition);
    // Warm-up: one lap (bounded), so cache-sized sets start cached.
    let (_, mut p) = chase(start, (size / LINE as u64).clamp(16, 4 << 20) / 16 * 16);
    let mut samples = Vec::with_capacity(cfg.repetitions as usize);
    for _ in 0..cfg.repetitions.max(1) {
        let (ns, q) = chase(p, loads);
        p = q;
        samples.push(ns as f64 / loads as f64);
    }
    LatencyPoint {
        size_bytes: size,
        ns_per_load: samples.iter().copied().fold(f64::INFINITY, f64::min),
        samples_ns: samples,
    }
}

fn read_pass(w: &[u64]) -> u64 {
    let mut a = [0u64; 8];
    for c in w.chunks_exact(8) {
        for k in 0..8 {
            a[k] = a[k].wrapping_add(c[k]);
        }
    }
    a.iter().fold(0, |x, y| x.wrapping_add(*y))
}

/// Repetitions of `pass` over `bytes` (enough passes per repetition to last ≥ 10 ms), bytes/s each.
fn bandwidth(bytes: usize, reps: u32, mut pass: impl FnMut()) -> Vec<f64> {
    pass(); // warm-up
    let t = Instant::now();
    pass();
    let one = t.elapsed().as_nanos().max(1) as u64;
    let passes = (10_000_000 / one).clamp(1, 1 << 20);
    (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..passes {
                pass();
            }
            let ns = t.elapsed().as_nanos().max(1) as f64;
            bytes as f64 * passes as f64 * 1e9 / ns
        })
        .collect()
}

fn bw_result(kind: &str, size: usize, samples: Vec<f64>) -> Bandwidth {
    Bandwidth {
        kind: kind.into(),
        size_bytes: size as u64,
        bytes_per_sec: median(&samples),
        samples,
    }
}

fn measure_bandwidth(cfg: &MemConfig) -> Result<Vec<Bandwidth>, MemError> {
    let size = (cfg.bw_size_bytes as usize).max(4096) / 64 * 64;
    let mut a = Region::new(size, cfg.hugepages)?;
    let mut b = Region::new(size, cfg.hugepages)?;
    a.touch();
    b.touch();
    let reps = cfg.repetitions;
    let read = {
        let w = a.words(size);
        bandwidth(size, reps, || {
            black_box(read_pass(black_box(&*w)));
        })
    };
    let write = {
        let w = a.words(size);
        let mut v = 0u64;
        bandwidth(size, reps, || {
            v = v.wrapping_add(1);
            w.fill(v);
            black_box(&*w);
        })
    };
    let src: &[u64] = a.words(size);
    let dst = b.words(size);
    let copy = bandwidth(size, reps, || {
        dst.copy_from_slice(black_box(src));
        black_box(&*dst);
    });
    Ok(vec![
        bw_result("read", size, read),
        bw_result("write", size, write),
        bw_result("copy", size, copy),
    ])
}

/// Why the memory probe could not measure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemError {
    /// Its buffer could not be mapped.
    #[error("mmap {len} bytes: {cause}")]
    Map {
        /// The size asked, bytes.
        len: usize,
        /// What the system said.
        cause: String,
    },
    /// A NUMA node beyond the 1,024 of the policy mask.
    #[error("node {0} beyond 1023")]
    NodeBeyondMask(u32),
    /// A buffer could not be bound to a node.
    #[error("mbind to node {node}: {cause}")]
    Bind {
        /// The node.
        node: u32,
        /// What the system said.
        cause: String,
    },
    /// The thread of one NUMA cell panicked.
    #[error("NUMA cell thread panicked")]
    CellPanicked,
}

const MPOL_BIND: libc::c_long = 2;
const MPOL_MF_STRICT: libc::c_long = 1;
const MPOL_MF_MOVE: libc::c_long = 2;
const MPOL_F_NODE: libc::c_long = 1;
const MPOL_F_ADDR: libc::c_long = 2;

/// Bind `r` to `node` (mbind(2), MPOL_BIND). libc has no wrapper for it (libnuma's is in another library).
fn bind(r: &Region, node: u32) -> Result<(), MemError> {
    let mut mask = [0u64; 16];
    let (w, b) = (node as usize / 64, node % 64);
    if w >= mask.len() {
        return Err(MemError::NodeBeyondMask(node));
    }
    mask[w] = 1 << b;
    // SAFETY: our mapping, a mask of 1024 bits and maxnode = bits + 1 as mbind(2) expects.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            r.ptr,
            r.len,
            MPOL_BIND,
            mask.as_ptr(),
            1025usize,
            MPOL_MF_STRICT | MPOL_MF_MOVE,
        )
    };
    if rc != 0 {
        return Err(MemError::Bind {
            node,
            cause: std::io::Error::last_os_error().to_string(),
        });
    }
    Ok(())
}

/// Node of the page at `addr` (get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)).
fn node_of(addr: *const u8) -> Option<u32> {
    let mut node: libc::c_int = -1;
    // SAFETY: valid out-pointer, no mask requested, `addr` is in one of our mappings.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut node as *mut libc::c_int,
            std::ptr::null_mut::<u64>(),
            0usize,
            addr,
            MPOL_F_NODE | MPOL_F_ADDR,
        )
    };
    (rc == 0 && node >= 0).then_some(node as u32)
}

fn numa_cell(cfg: &MemConfig, cpu_node: u32, cpu: u32, mem_node: u32) -> NumaCell {
    let mut cell = NumaCell {
        cpu_node,
        mem_node,
        cpu,
        verified_node: None,
        latency_ns: 0.0,
        read_bytes_per_sec: 0.0,
        error: None,
    };
    let pin = crate::rt::pin_thread(Some(cpu));
    if let Some(e) = pin.error {
        cell.error = Some(e);
        return cell;
    }
    let size = cfg.numa_size_bytes as usize;
    let mut r = match Region::new(size, cfg.hugepages) {
        Ok(r) => r,
        Err(e) => {
            cell.error = Some(e.to_string());
            return cell;
        }
    };
    if let Err(e) = bind(&r, mem_node) {
        cell.error = Some(e.to_string());
        return cell;
    }
    r.touch();
    cell.verified_node = node_of(r.ptr);
    let small = MemConfig {
        repetitions: cfg.repetitions.min(5),
        ..cfg.clone()
    };
    cell.latency_ns = latency_point(&mut r, size as u64, &small).ns_per_load;
    let w = r.words(size);
    cell.read_bytes_per_sec = median(&bandwidth(size, small.repetitions, || {
        black_box(read_pass(black_box(&*w)));
    }));
    cell
}

fn measure_all(plan: &MemPlan) -> Result<MemResult, MemError> {
    let cfg = &plan.config;
    crate::rt::pin_thread(cfg.cpu);
    let max = cfg.sizes_bytes.iter().copied().max().unwrap_or(0) as usize;
    let mut latency = Vec::with_capacity(cfg.sizes_bytes.len());
    {
        let mut r = Region::new(max.max(4096), cfg.hugepages)?;
        r.touch();
        for &s in &cfg.sizes_bytes {
            latency.push(latency_point(&mut r, s, cfg));
        }
    }
    let bandwidth = if cfg.bw_size_bytes > 0 {
        measure_bandwidth(cfg)?
    } else {
        Vec::new()
    };
    let mut numa = Vec::new();
    if cfg.numa_size_bytes > 0 {
        for &(cn, cpu) in &plan.cpu_nodes {
            for &mn in &plan.mem_nodes {
                let c = cfg.clone();
                let cell = std::thread::spawn(move || numa_cell(&c, cn, cpu, mn))
                    .join()
                    .map_err(|_| MemError::CellPanicked)?;
                numa.push(cell);
            }
        }
    }
    Ok(MemResult {
        config: cfg.clone(),
        caches: plan.caches.clone(),
        latency,
        // What the curve's steps are is the analysis' (the session names them).
        steps: Vec::new(),
        bandwidth,
        numa,
        load: None,
    })
}

/// Run the plan on a thread of its own, pinned to `config.cpu`.
pub fn run(plan: &MemPlan) -> Result<MemResult, ProbeError> {
    let plan = plan.clone();
    crate::rt::on_own_thread("rtgauge-mem", move || measure_all(&plan))?
        .map_err(|e| ProbeError::Config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_has_two_points_per_octave() {
        let s = sweep_sizes(4096, 64 << 10);
        assert_eq!(
            s.iter().map(|x| x >> 10).collect::<Vec<_>>(),
            vec![4, 6, 8, 12, 16, 24, 32, 48, 64]
        );
        assert!(sweep_sizes(1 << 20, 1 << 20) == vec![1 << 20]);
    }

    #[test]
    fn chain_is_one_cycle_through_every_line() {
        let mut r = Region::new(64 << 10, false).unwrap();
        r.touch();
        let start = build_chain(&mut r, 64 << 10, 7);
        let mut seen = std::collections::HashSet::new();
        let mut p = start;
        for _ in 0..1024 {
            assert!(seen.insert(p as usize));
            // SAFETY: chain built above.
            p = unsafe { *p } as *const usize;
        }
        assert_eq!(p, start, "the chain closes after exactly 1024 lines");
    }

    #[test]
    fn dram_is_slower_than_l1_and_bandwidth_is_positive() {
        let plan = MemPlan {
            config: MemConfig {
                cpu: Some(0),
                sizes_bytes: vec![16 << 10, 256 << 20],
                loads_per_repetition: 300_000,
                repetitions: 3,
                bw_size_bytes: 8 << 20,
                numa_size_bytes: 8 << 20,
                hugepages: false,
            },
            caches: Vec::new(),
            cpu_nodes: vec![(0, 0)],
            mem_nodes: vec![0],
        };
        let r = run(&plan).unwrap();
        let (l1, dram) = (r.latency[0].ns_per_load, r.latency[1].ns_per_load);
        assert!(l1 > 0.1 && l1 < 5.0, "{l1}");
        assert!(dram > 4.0 * l1, "{dram} vs {l1}");
        assert_eq!(r.bandwidth.len(), 3);
        assert!(
            r.bandwidth.iter().all(|b| b.bytes_per_sec > 1e8),
            "{:?}",
            r.bandwidth
        );
        assert_eq!(r.numa.len(), 1);
        assert_eq!(r.numa[0].error, None);
        assert_eq!(r.numa[0].verified_node, Some(0));
    }
}
