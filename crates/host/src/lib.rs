//! Reading the platform, and nothing else: the audit (`rtgauge-audit`), the linters (`rtgauge-lint`) and
//! the planner (`rtgauge-plan`) are built on these facts in crates of their own.
//!
//! Reading the platform. Every read of `/proc`, `/sys`, `/dev` and `/etc` goes through a [`HostRoot`]
//! (default `/`), so a tree captured from another machine can be replayed with `--root DIR`.
//! Functions named `read_*` do I/O through the root; `parse_*` functions are pure and tested with hostile input.

#![deny(missing_docs)]

pub mod accounting;
pub mod counters;
pub mod cpu;
pub mod fingerprint;
pub mod numa;
pub mod parse;
pub mod privilege;
pub mod root;
pub mod smi;
pub mod system;

pub use root::{HostError, HostRoot};
