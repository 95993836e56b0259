//! The native format: the run document as pretty JSON (`--output`, `export --format json`), and read back
//! (`import` of a document moved from another machine).

use crate::import::{bad, ImportError, Importer};
use crate::{ExportError, Exporter};
use rtgauge_model::run::RunDocument;
use serde_json::Value;

/// The run document as JSON, as stored.
#[derive(Debug, Clone, Copy)]
pub struct NativeJson;

impl Exporter for NativeJson {
    fn export(&self, document: &RunDocument) -> Result<Vec<u8>, ExportError> {
        Ok((serde_json::to_string_pretty(document)? + "\n").into_bytes())
    }
}

impl Importer for NativeJson {
    fn import(&self, text: &str, _file: &str) -> Result<RunDocument, ImportError> {
        let v: Value = serde_json::from_str(text).map_err(|e| ImportError::Json(e.to_string()))?;
        let doc = from_value(v)?;
        crate::import::check_document(&doc)?;
        Ok(doc)
    }
}

/// An rtgauge run document (`export --format json`, `run --output`), e.g. moved from another machine.
pub(crate) fn from_value(value: Value) -> Result<RunDocument, ImportError> {
    let version = value
        .get("schema_version")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if version > u64::from(rtgauge_model::SCHEMA_VERSION) {
        return Err(bad(
            "schema_version",
            format!(
                "{version} is newer than this rtgauge reads ({})",
                rtgauge_model::SCHEMA_VERSION
            ),
        ));
    }
    serde_json::from_value(value)
        .map_err(|e| ImportError::Json(format!("not a valid run document: {e}")))
}
