//! The host record of `rtgauge vm observe --record` read back for `rtgauge vm join`: checked to be one, and
//! not from a newer rtgauge.

use rtgauge_model::vm::{HostRecord, HOST_RECORD_KIND, HOST_SCHEMA_VERSION};

/// Why a file is not a host record this rtgauge reads.
#[derive(Debug, thiserror::Error)]
pub enum HostRecordError {
    /// Not JSON at all.
    #[error("not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// JSON of another kind (a run document, say).
    #[error("not a host record (rtgauge vm observe --record)")]
    Kind,
    /// Written by a newer rtgauge.
    #[error("schema_version {0} is newer than this rtgauge reads ({HOST_SCHEMA_VERSION})")]
    Newer(u64),
    /// The right kind, the wrong shape.
    #[error("not a valid host record: {0}")]
    Shape(#[source] serde_json::Error),
}

/// Parse a host record.
pub fn parse(bytes: &[u8]) -> Result<HostRecord, HostRecordError> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(HostRecordError::Json)?;
    if v.get("kind").and_then(|k| k.as_str()) != Some(HOST_RECORD_KIND) {
        return Err(HostRecordError::Kind);
    }
    let version = v
        .get("schema_version")
        .and_then(|x| x.as_u64())
        .unwrap_or(0);
    if version > u64::from(HOST_SCHEMA_VERSION) {
        return Err(HostRecordError::Newer(version));
    }
    serde_json::from_value(v).map_err(HostRecordError::Shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_host_record_it_reads() {
        assert!(matches!(parse(b"{"), Err(HostRecordError::Json(_))));
        assert!(matches!(
            parse(br#"{"kind":"run"}"#),
            Err(HostRecordError::Kind)
        ));
        let newer = format!(
            r#"{{"kind":"{HOST_RECORD_KIND}","schema_version":{}}}"#,
            HOST_SCHEMA_VERSION + 1
        );
        assert!(matches!(
            parse(newer.as_bytes()),
            Err(HostRecordError::Newer(_))
        ));
        let short = format!(r#"{{"kind":"{HOST_RECORD_KIND}","schema_version":1}}"#);
        assert!(matches!(
            parse(short.as_bytes()),
            Err(HostRecordError::Shape(_))
        ));
    }
}
