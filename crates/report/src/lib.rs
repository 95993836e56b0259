//! Rendering: every output of rtgauge is a pure function of model data (`render_*`), so it can be
//! golden-tested and re-rendered from stored runs.

pub mod net;
pub mod rttests;
