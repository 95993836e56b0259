//! The rtgauge data model: the run document and its units. Everything a probe measures and everything a
//! report shows is one of these plain, serde-friendly types: each probe kind's result (one module per
//! kind, listed once in [`with_kinds!`]), the conditions it was taken under, the
//! fingerprint and audit, gates and verdicts, the "why" of a spike, a VM's host record, CPU sets, HDR
//! histograms and nanoseconds ([`units`]: the one ns → µs conversion). Nothing here does I/O,
//! measurement or analysis: what the data means is `rtgauge_analysis`, how it is shown `rtgauge_report`.
//!
//! Invariants:
//! - every duration is integer nanoseconds and its field name ends in `_ns` (or another unit suffix);
//! - a run document carries [`SCHEMA_VERSION`]; readers refuse documents from a newer major schema;
//! - histograms are stored whole (HdrHistogram V2 + DEFLATE, base64) so that they can be merged and any
//!   percentile derived later; the percentiles stored beside them are a convenience, never the source.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod accounting;
pub mod attribution;
pub mod audit;
pub mod clock;
pub mod conditions;
pub mod cpuset;
pub mod cyclic;
pub mod error;
pub mod fingerprint;
pub mod hwnoise;
pub mod kind;
pub mod latency;
pub mod load;
pub mod measure;
pub mod mem;
pub mod net;
pub mod net_latency;
pub mod numa;
pub mod ops;
pub mod oslat;
pub mod rt;
pub mod run;
pub mod units;
pub mod verdict;
pub mod vm;

pub use cpuset::CpuSet;
pub use units::Nanos;

/// For `skip_serializing_if`: a zero count is left out of the document.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Version of the run-document schema. Bump on any incompatible change; additive fields keep it.
pub const SCHEMA_VERSION: u32 = 1;
