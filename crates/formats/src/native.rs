//! The native format: the run document as pretty JSON (`--output`, `export --format json`). Reading it back
//! (`import` of a document moved from another machine) is an importer like the others, in
//! [`crate::import`].

use crate::{ExportError, Exporter};
use rtgauge_model::run::RunDocument;

/// The run document as JSON, as stored.
#[derive(Debug, Clone, Copy)]
pub struct NativeJson;

impl Exporter for NativeJson {
    fn export(&self, document: &RunDocument) -> Result<Vec<u8>, ExportError> {
        Ok((serde_json::to_string_pretty(document)? + "\n").into_bytes())
    }
}
