//! rtgauge's own run documents in ([`NativeJson`], `export --format json`, `run --output`), e.g. a run moved
//! from another machine: a document of a newer schema is refused rather than misread.

use super::{bad, check_document, ImportError, Importer};
use crate::native::NativeJson;
use rtgauge_model::run::RunDocument;
use serde_json::Value;

impl Importer for NativeJson {
    fn import(&self, text: &str, _file: &str) -> Result<RunDocument, ImportError> {
        let v: Value = serde_json::from_str(text).map_err(ImportError::Json)?;
        let doc = from_value(v)?;
        check_document(&doc)?;
        Ok(doc)
    }
}

/// An rtgauge run document (`export --format json`, `run --output`), e.g. moved from another machine.
pub(super) fn from_value(value: Value) -> Result<RunDocument, ImportError> {
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
    serde_json::from_value(value).map_err(ImportError::Document)
}
