//! The file formats at the edges of the pipeline, pure functions of model data: the run document's envelope
//! (tool, command line, timestamps) and its native JSON, CSV, and rt-tests' cyclictest and oslat text and
//! JSON — rendered out ([`rttests`]) and read in ([`import`]); the monitor's OpenMetrics and Prometheus
//! text ([`openmetrics`]: what `/metrics` serves); a VM host record read back ([`host_record`]). Every output format is an [`Exporter`] and
//! every input format an [`import::Importer`], one small module each, so a new format is one module and one
//! line where the CLI names it.

#![deny(missing_docs)]

pub mod csv;
pub mod envelope;
pub mod host_record;
pub mod import;
pub mod native;
pub mod openmetrics;
pub mod rttests;

pub use import::{ImportError, Importer};

use rtgauge_model::run::RunDocument;

/// Why a run could not be written in a format.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// rt-tests JSON holds one cyclictest or oslat run.
    #[error("the run has no cyclic or oslat result")]
    NoRtTestsResult,
    /// serde_json refused to serialise the document.
    #[error("serialising JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// One output format of a stored run: the document in, the file's bytes out.
pub trait Exporter {
    /// The file's bytes for `document`.
    fn export(&self, document: &RunDocument) -> Result<Vec<u8>, ExportError>;
}
