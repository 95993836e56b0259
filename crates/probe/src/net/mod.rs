//! Network-function capacity: an HTTP/1.1 load generator (CPS and keep-alive throughput) and a reference
//! HTTP/1.1 server, both one non-blocking event loop per CPU, pinned.
//!
//! Event loop choice: raw epoll through `libc`, edge-triggered, one `epoll_ctl(ADD)` per connection (close
//! removes it), the slot index and a generation in the event's `u64`. mio would hide exactly the knobs this
//! probe is about (SO_LINGER, IP_BIND_ADDRESS_NO_PORT, SO_REUSEPORT, the errno of a failed connect) behind
//! an abstraction we would bypass anyway, and tokio adds a scheduler between the socket and the
//! measurement. No allocation in the loops: connection slots, header buffers, histograms and the
//! per-second table are allocated before the start; requests are built once.
//!
//! [`plan`] expands what a load command asks for into points; [`measure`] runs them (the reference server,
//! when asked for, per point) into results.
//!
//! HTTP parsing uses `httparse` (header block only, zero-copy); body framing (Content-Length, chunked,
//! until close) is a small state machine in [`http`].

pub mod client;
pub mod http;
mod measure;
pub mod plan;
pub mod server;
pub(crate) mod sys;

pub use measure::{measure, NetError};
pub use plan::{NetPlan, Point};
pub use sys::errno_text;
