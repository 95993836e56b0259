//! One module per verb: its clap arguments, their validation into a probe plan, and the glue that runs the
//! probe and renders the outputs.

pub mod audit;
pub mod cyclic;
pub mod fingerprint;
pub mod oslat;
pub mod run;
pub mod runs;
