//! Importing rt-tests results into run documents, so that runs taken with cyclictest or oslat elsewhere can
//! be stored, reported and compared like rtgauge's own. Pure: text in, document out; every error names what
//! was wrong and where.
//!
//! Accepted:
//! - cyclictest JSON (rt-tests ≥ 2.0, `rt_write_json()` + `write_stats()`): per thread `cycles`, `min`,
//!   `max`, `avg` in µs (ns with `resolution_in_ns: 1`), optional `histogram` of non-zero 1-unit buckets;
//! - cyclictest text: the `T:` summary lines and/or the `-h`/`-H` histogram block, in both layouts — v2.4
//!   (every bucket, `# Total:`) and v2.7+ (zero buckets omitted) — with the `-H` sum column, overflow
//!   counts and overflow cycle lists. Text carries no unit: µs unless the caller says ns (`-N`);
//! - oslat JSON (`write_summary_json()`): per thread `cpu`, `freq`, `min`, `avg`, `max`, `duration` and a
//!   histogram keyed by bucket upper edges;
//! - oslat text (`write_summary()`, rt-tests 2.x): `Core:`, `Counter Freq:`, the `NNN (us):` bucket rows
//!   (the last `(including overflows)`), `Minimum`, `Average`, `Maximum`, `Max-Min`, `Duration`, one
//!   column per core. It is read into the JSON's shape and imported by the same code, so the text and the
//!   JSON of one run store the same result (the text's average has 3 decimals);
//! - rtgauge's own run documents (`export --format json`), e.g. from another machine, up to this
//!   rtgauge's schema version.
//!
//! Refused, naming the thread: figures no measurement gives (avg outside [min, max], min above max, a
//! negative average, figures without samples) — a thread that never completed a cycle is kept with the
//! all-zero figures, or the initial min, rt-tests prints for it. [`check_document`] refuses a `uuid` that
//! is not canonical and a label, host name or tag holding a control character.
//!
//! The interval, priority and `-h` range are read from the command line when the file has one. What the
//! tools do not keep is not invented: samples beyond a histogram's range are known only by their count (and
//! the exact max), so they are stored at the range's edge with a warning that percentiles there are lower
//! bounds; cyclictest's skipped periods (missed deadlines) are unknown.

mod cyclictest;
mod native;
mod oslat;

pub use cyclictest::{
    parse_cyclictest_json, parse_cyclictest_text, CyclictestJson, CyclictestText,
};
pub use oslat::{parse_oslat_text, OslatJson, OslatText};

use cyclictest::cyclictest_json;
use oslat::oslat_json;
use rtgauge_analysis::kind::ProbeData;
use rtgauge_model::rt::{ProcessConditions, Setting};
use rtgauge_model::run::{ImportSource, ProbeResult, RunDocument, RunStatus, SystemInfo, ToolInfo};
use rtgauge_model::CpuSet;
use serde_json::Value;

/// One input format: text in, run document out. Pure; every error names what was wrong and where.
pub trait Importer {
    /// The run `text` holds; `file` names it in errors and in the document's import source.
    fn import(&self, text: &str, file: &str) -> Result<RunDocument, ImportError>;
}

/// Any format below, told apart by its content (what `rtgauge import` reads).
#[derive(Debug, Clone, Copy)]
pub struct AnyRtTests {
    /// The unit of cyclictest text output: 1000 (µs), or 1 for a run with `-N`.
    pub text_unit_ns: u64,
}

impl Importer for AnyRtTests {
    fn import(&self, text: &str, file: &str) -> Result<RunDocument, ImportError> {
        let doc = self.import_unchecked(text, file)?;
        check_document(&doc)?;
        Ok(doc)
    }
}

impl AnyRtTests {
    /// The document of any format, before [`check_document`].
    fn import_unchecked(&self, text: &str, file: &str) -> Result<RunDocument, ImportError> {
        if text.trim_start().starts_with('{') {
            let v: Value = serde_json::from_str(text).map_err(ImportError::Json)?;
            if v.get("schema_version").is_some() && v.get("probes").is_some() {
                return native::from_value(v);
            }
            let first = v
                .get("thread")
                .and_then(Value::as_object)
                .and_then(|t| t.values().next());
            if first.is_some_and(|t| t.get("freq").is_some() && t.get("cycles").is_none()) {
                return oslat_json(&v, file);
            }
            return cyclictest_json(&v, file);
        }
        if text
            .lines()
            .any(|l| l.trim_start().starts_with("Counter Freq:"))
        {
            return parse_oslat_text(text, file);
        }
        parse_cyclictest_text(text, file, self.text_unit_ns)
    }
}

/// Why a file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    // The parser's message is in the message too: `rtgauge import` shows this error as one line with `{}`
    // (never as a chain), and the parser's error is the source for a caller that inspects it.
    /// The file looked like JSON but does not parse.
    #[error("not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// The JSON does not have a run document's shape (`import` of an rtgauge document).
    #[error("not a valid run document: {0}")]
    Document(#[source] serde_json::Error),
    /// A field is missing or holds a value that cannot be read.
    #[error("{field}: {reason}")]
    Field {
        /// The field or section of the input (`thread`, `# Histogram`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The file is neither rt-tests JSON nor cyclictest text.
    #[error("not a cyclictest or oslat result (JSON with a \"thread\" object, or cyclictest's text output)")]
    Unrecognised,
}

pub(crate) fn bad(field: impl Into<String>, reason: impl Into<String>) -> ImportError {
    ImportError::Field {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Most threads and buckets accepted (cyclictest's own limits).
const MAX_THREADS: usize = 4096;
const MAX_BUCKETS: u64 = 1_000_000;

/// cyclictest's `min` before a thread's first cycle (rt-tests: `stat->min = 1000000`): a thread that never
/// completed a cycle prints it with max 0 and avg 0, and that is a real file, not an impossible one.
const CYCLICTEST_UNSET_MIN: u64 = 1_000_000;
/// oslat's `minlat` before the first loop (rt-tests: `t->minlat = (uint64_t)-1`), for the same reason.
const OSLAT_UNSET_MIN: u64 = u64::MAX;

/// One thread's summary figures as the file gives them, all in the file's unit.
#[derive(Debug, Clone, Copy)]
struct Figures {
    /// `cycles` (cyclictest) or `samples` (oslat): the word in messages.
    samples_word: &'static str,
    samples: u64,
    min: u64,
    avg: Option<f64>,
    max: u64,
    /// The `min` the tool prints for a thread without a sample.
    unset_min: u64,
    /// How far the tool's own rounding or bias can put `avg` outside [min, max].
    slack: f64,
}

/// Refuse figures no measurement gives (avg outside [min, max], min above max, figures without samples):
/// stored, they would be compared and judged as if measured. `at` names the thread.
fn check_figures(at: &str, f: Figures) -> Result<(), ImportError> {
    let avg = f.avg.map_or_else(|| "-".to_string(), |a| a.to_string());
    if f.samples == 0 {
        let unset = f.min == 0 || f.min == f.unset_min;
        if !unset || f.max != 0 || f.avg.is_some_and(|a| a != 0.0) {
            return Err(bad(
                at,
                format!(
                    "0 {} but min {}, avg {avg}, max {}: figures without samples",
                    f.samples_word, f.min, f.max
                ),
            ));
        }
        return Ok(());
    }
    if f.min > f.max {
        return Err(bad(at, format!("min {} > max {}", f.min, f.max)));
    }
    if let Some(a) = f.avg {
        if a + f.slack < f.min as f64 {
            return Err(bad(at, format!("avg {avg} < min {}", f.min)));
        }
        if a - f.slack > f.max as f64 {
            return Err(bad(at, format!("avg {avg} > max {}", f.max)));
        }
    }
    Ok(())
}

/// An average as the file gives it: absent, or a finite non-negative number (a negative or non-numeric one
/// is refused, not dropped: the run would be stored with a mean of 0).
fn read_avg(t: &Value, at: &str) -> Result<Option<f64>, ImportError> {
    match t.get("avg") {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|a| a.is_finite() && *a >= 0.0)
            .map(Some)
            .ok_or_else(|| {
                bad(
                    format!("{at}.avg"),
                    format!("{v} is not a non-negative number"),
                )
            }),
    }
}

/// A host name, label or tag read from a file: refused when it holds a control character (see
/// [`rtgauge_model::run::forbidden_in_name`]), so it never reaches a terminal or a page as it is.
pub(crate) fn check_name(field: &str, name: &str) -> Result<(), ImportError> {
    match rtgauge_model::run::forbidden_in_name(name) {
        Some(c) => Err(bad(
            field,
            format!("holds the control character U+{:04X}", c as u32),
        )),
        None => Ok(()),
    }
}

/// The names of an imported document (label, host name, tags), its `uuid` and its verdicts' metrics,
/// checked before it is stored: a document from another machine is input like any other.
pub fn check_document(doc: &RunDocument) -> Result<(), ImportError> {
    if let Some(u) = &doc.uuid {
        if !rtgauge_model::run::is_canonical_uuid(u) {
            let shown: String = u.chars().take(40).collect();
            let more = if u.chars().count() > 40 { "…" } else { "" };
            return Err(bad(
                "uuid",
                format!("'{shown}{more}' is not a UUID in canonical form (8-4-4-4-12 lowercase hex digits, not nil)"),
            ));
        }
    }
    if let Some(r) = &doc.repeat {
        r.check().map_err(|e| bad("repeat", e))?;
    }
    // A metric is stored by its kind's name and its gate's, with the threshold its gate takes: anything else
    // is no verdict rtgauge could show or judge again.
    for v in &doc.verdicts {
        let m = &v.gate.metric;
        let name = format!("{}_{}", m.kind.as_str(), m.name.escape_debug());
        match rtgauge_analysis::kind::gate_def(m) {
            None => return Err(bad("verdicts", format!("unknown metric '{name}'"))),
            Some(d) if d.threshold != m.threshold_ns.is_some() => {
                let why = if d.threshold { "needs" } else { "takes no" };
                return Err(bad(
                    "verdicts",
                    format!("metric '{name}' {why} threshold_ns"),
                ));
            }
            Some(_) => {}
        }
    }
    if let Some(l) = &doc.label {
        check_name("label", l)?;
    }
    check_name("system.nodename", &doc.system.nodename)?;
    for (k, v) in &doc.tags {
        check_name("tags", k)?;
        check_name(&format!("tags.{k}"), v)?;
    }
    Ok(())
}

/// Import any supported rt-tests result: JSON (cyclictest or oslat) or cyclictest text.
/// `text_unit_ns` is the unit of cyclictest text output (1000, or 1 for `-N`).
pub fn parse_rt_tests(
    text: &str,
    file: &str,
    text_unit_ns: u64,
) -> Result<RunDocument, ImportError> {
    AnyRtTests { text_unit_ns }.import(text, file)
}

/// The value of a flag in a cyclictest command line (`-i 200`, `-i200`, `--interval=200`).
fn flag_value(cmdline: &str, short: &str, long: &str) -> Option<u64> {
    let words: Vec<&str> = cmdline.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let v = if *w == short || *w == long {
            words.get(i + 1).copied()
        } else if let Some(rest) = w.strip_prefix(&format!("{long}=")) {
            Some(rest)
        } else if short.len() == 2 && w.starts_with(short) && w.len() > 2 && !w.starts_with("--") {
            Some(&w[2..])
        } else {
            None
        };
        if let Some(n) = v.and_then(|v| v.parse().ok()) {
            return Some(n);
        }
    }
    None
}

fn rfc2822_to_3339(s: &str) -> String {
    chrono::DateTime::parse_from_rfc2822(s)
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|_| s.to_string())
}

/// One cyclictest thread as any format gives it, in the file's unit.
#[derive(Debug, Default)]
struct ImportedThread {
    index: u32,
    cycles: u64,
    min: u64,
    max: u64,
    avg: Option<f64>,
    cpu: Option<u32>,
    node: Option<u32>,
    tid: i32,
    /// (bucket, count) pairs, if a histogram was kept.
    buckets: Option<Vec<(u64, u64)>>,
    overflows: Option<u64>,
    overflow_cycles: Vec<u64>,
    /// The thread's own period, µs (cyclictest's -d distance makes thread i run at -i + i × -d); None when
    /// the file does not say it.
    interval_us: Option<u64>,
}

/// More samples than any run holds (a week at 1 MHz is 6 × 10¹¹): a count beyond this is a corrupt file, and
/// would overflow the histogram's total.
const MAX_SAMPLES: u64 = 1_000_000_000_000_000;

/// What the whole file says about the run.
struct Meta<'a> {
    file: &'a str,
    format: &'a str,
    unit_ns: u64,
    interval_us: u64,
    priority: i32,
    hist_range: Option<u64>,
    cmdline: String,
    tool_version: String,
    started_at: String,
    ended_at: String,
    system: SystemInfo,
}

fn sysinfo(sys: Option<&Value>) -> SystemInfo {
    let ss = |k: &str| {
        sys.and_then(|x| x.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    SystemInfo {
        sysname: ss("sysname"),
        nodename: ss("nodename"),
        release: ss("release"),
        version: ss("version"),
        machine: ss("machine"),
        realtime: sys.and_then(|x| x.get("realtime")).and_then(Value::as_i64) == Some(1),
        cpus_online: CpuSet::default(),
        clocksource: None,
    }
}

fn not_recorded() -> ProcessConditions {
    let why = Some("not recorded by rt-tests".to_string());
    ProcessConditions {
        mlockall: Setting {
            requested: false,
            achieved: false,
            error: why.clone(),
        },
        cpu_dma_latency_us: Setting {
            requested: None,
            achieved: None,
            error: why,
        },
        cpu_dma_latency_before_us: None,
        main_affinity: Setting {
            requested: None,
            achieved: None,
            error: None,
        },
        contended: Vec::new(),
    }
}

fn imported_document(
    meta: Meta<'_>,
    tool: &str,
    probe: ProbeResult,
    warnings: Vec<String>,
) -> RunDocument {
    let mut doc = RunDocument::new(
        ToolInfo {
            name: tool.into(),
            version: meta.tool_version,
        },
        meta.cmdline.split_whitespace().map(String::from).collect(),
        meta.started_at,
        meta.ended_at,
        meta.system,
        vec![probe],
        RunStatus::Complete,
    );
    doc.warnings = warnings;
    doc.imported_from = Some(ImportSource {
        format: meta.format.into(),
        file: meta.file.into(),
        resolution_ns: meta.unit_ns,
    });
    doc
}

/// Warnings for rt-tests histograms whose limit lost samples (below the min, or > 0.1 % overflowing).
pub fn limit_warnings(document: &RunDocument) -> Vec<String> {
    document
        .probes
        .iter()
        .flat_map(|p| p.data().limit_warnings())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgauge_model::cyclic::CyclicResult;

    pub const SAMPLE: &str = r##"{
  "file_version": 1,
  "cmdline:": "cyclictest -m -p 80 -t 2 -a -i 200 -D 5 -h 50 -H 50 --json=ct.json -q --spike=30",
  "rt_test_version:": "2.40",
  "start_time": "Sun, 22 Nov 2026 11:08:50 +0000",
  "end_time": "Sun, 22 Nov 2026 11:08:55 +0000",
  "return_code": 0,
  "sysinfo": { "sysname": "Linux", "nodename": "vm", "release": "6.18.44-fc-v669",
               "version": "#1 SMP PREEMPT_DYNAMIC @0", "machine": "x86_64", "realtime": 0 },
  "num_threads": 2,
  "resolution_in_ns": 0,
  "thread": {
    "0": { "histogram": { "8": 1, "10": 1, "11": 9, "13": 2204 },
           "cycles": 2216, "min": 8, "max": 601, "avg": 14.69, "cpu": 0, "node": 0 },
    "1": { "histogram": { "9": 100 }, "cycles": 100, "min": 9, "max": 9, "avg": 9.0, "cpu": 1, "node": 0 }
  }
}"##;

    /// rt-tests 2.4 layout: every bucket, `# Total:`, `-H` sum column and max-of-max.
    const TEXT_V24: &str = "# /dev/cpu_dma_latency set to 0us\n# Histogram\n000000 000000\t000000\t000000\n000001 000000\t000000\t000000\n000002 000003\t000001\t000004\n000003 000001\t000002\t000003\n# Total: 000000004 000000003 000000007\n# Min Latencies: 00002 00002\n# Avg Latencies: 00002 00002\n# Max Latencies: 00007 00003 00007\n# Histogram Overflows: 00001 00000 00001\n# Histogram Overflow at cycle number:\n# Thread 0: 00003\n# Thread 1:\n";

    /// rt-tests ≥ 2.7 layout (zero buckets omitted) with the T: lines printed by a non-histogram run too.
    const TEXT_V27: &str = "policy: fifo: loadavg: 0.10 0.05 0.01 1/123 4567\n\nT: 0 ( 4242) P:90 I:200 C:      5 Min:      2 Act:    3 Avg:    2 Max:       7\n# Histogram\n000002 000003\n000003 000001\n# Min Latencies: 00002\n# Avg Latencies: 00002\n# Max Latencies: 00007\n# Histogram Overflows: 00001\n# Histogram Overflow at cycle number:\n# Thread 0: 00003\n";

    const OSLAT: &str = r#"{ "file_version": 1, "cmdline:": "oslat -c 1 -D 5", "rt_test_version:": "2.40",
      "start_time": "Sun, 22 Nov 2026 11:08:50 +0000", "end_time": "Sun, 22 Nov 2026 11:08:55 +0000",
      "return_code": 0, "sysinfo": { "sysname": "Linux", "nodename": "vm", "release": "6", "version": "v", "machine": "x86_64", "realtime": 0 },
      "num_threads": 1,
      "thread": { "0": { "cpu": 1, "freq": 2597, "min": 1, "avg": 1.001361, "max": 50038, "duration": 4.998,
                         "histogram": { "1": 215793394, "2": 3506, "32": 472 } } } }"#;

    fn cyclic(d: &RunDocument) -> &CyclicResult {
        d.probes[0].downcast_ref().expect("cyclic")
    }

    #[test]
    fn every_format_goes_through_one_importer_and_exporter_shape() {
        use crate::{csv::Csv, native::NativeJson, rttests::RtTestsJson, ExportError, Exporter};
        let any = AnyRtTests { text_unit_ns: 1000 };
        let d = CyclictestJson.import(SAMPLE, "ct.json").unwrap();
        assert_eq!(any.import(SAMPLE, "ct.json").unwrap(), d);
        assert_eq!(
            OslatJson.import(OSLAT, "o.json").unwrap(),
            any.import(OSLAT, "o.json").unwrap()
        );
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        // The native document reads back as it was written.
        let native = text(NativeJson.export(&d).unwrap());
        assert_eq!(NativeJson.import(&native, "d.json").unwrap(), d);
        // rt-tests JSON out reads back in with the same figures.
        let rt = text(RtTestsJson.export(&d).unwrap());
        let again = CyclictestJson.import(&rt, "rt.json").unwrap();
        assert_eq!(cyclic(&again).threads[0].latency.max_ns, 601_000);
        assert_eq!(cyclic(&again).threads[1].cycles, 100);
        // CSV: a header and one row per thread.
        assert_eq!(text(Csv.export(&d).unwrap()).lines().count(), 3);
        let mut none = d.clone();
        none.probes.clear();
        assert!(matches!(
            RtTestsJson.export(&none),
            Err(ExportError::NoRtTestsResult)
        ));
    }

    #[test]
    fn imports_the_published_json_sample() {
        let d = parse_cyclictest_json(SAMPLE, "ct.json").unwrap();
        let c = cyclic(&d);
        assert_eq!(c.config.interval_ns, 200_000);
        assert_eq!(c.config.hist_buckets, Some(50));
        assert_eq!(c.config.priority, 80);
        let t = &c.threads[0];
        assert_eq!(t.cycles, 2216);
        assert_eq!(t.latency.min_ns, 8_000);
        assert_eq!(t.latency.max_ns, 601_000);
        assert_eq!(
            t.linear.as_ref().unwrap().overflows,
            1,
            "2216 cycles, 2215 in the histogram"
        );
        assert_eq!(t.latency.hdr.decode().unwrap().len(), 2216);
        assert!((t.latency.mean_ns - 14_690.0).abs() < 1e-6);
        assert_eq!(d.started_at, "2026-11-22T11:08:50+00:00");
        assert_eq!(d.imported_from.as_ref().unwrap().resolution_ns, 1000);
        assert!(d.warnings.iter().any(|w| w.contains("lower bounds")));
        assert!(d.warnings.iter().any(|w| w.contains("unknown")));
    }

    #[test]
    fn imports_both_text_layouts() {
        let d = parse_cyclictest_text(TEXT_V24, "v24.txt", 1000).unwrap();
        let c = cyclic(&d);
        assert_eq!(c.threads.len(), 2, "the -H sum column is not a thread");
        let t0 = &c.threads[0];
        assert_eq!(t0.cycles, 5, "4 in the histogram + 1 overflow");
        assert_eq!(t0.latency.max_ns, 7_000);
        let l = t0.linear.as_ref().unwrap();
        assert_eq!((l.buckets[2], l.buckets[3], l.overflows), (3, 1, 1));
        assert_eq!(l.overflow_cycles, vec![3]);
        assert_eq!(c.threads[1].cycles, 3);
        let d = parse_cyclictest_text(TEXT_V27, "v27.txt", 1000).unwrap();
        let c = cyclic(&d);
        assert_eq!(c.threads.len(), 1);
        assert_eq!((c.threads[0].cycles, c.threads[0].tid), (5, 4242));
        assert_eq!((c.config.interval_ns, c.config.priority), (200_000, 90));
        // The same run in both layouts gives the same thread 0.
        let a = parse_cyclictest_text(TEXT_V24, "a", 1000).unwrap();
        assert_eq!(cyclic(&a).threads[0].linear, c.threads[0].linear);
    }

    #[test]
    fn without_a_histogram_every_percentile_is_unknown_above_the_min() {
        // cyclictest --json without -h writes an empty histogram object (rt-tests 2.40, real output).
        let json = r#"{"file_version": 1, "cmdline:": "cyclictest -m -p80 -i 500 -D 2 -q -t 2 -a 0-1 --json=c1.json",
            "rt_test_version:": "2.40", "num_threads": 1, "resolution_in_ns": 0,
            "thread": {"0": {"histogram": {}, "cycles": 3956, "min": 11, "max": 5273, "avg": 34.95, "cpu": 0, "node": 0}}}"#;
        let text =
            "T: 0 ( 99) P:80 I:1000 C:   1000 Min:     14 Act:   28 Avg:   34 Max:     976\n";
        for d in [
            parse_rt_tests(json, "c1.json", 1000).unwrap(),
            parse_cyclictest_text(text, "t.txt", 1000).unwrap(),
        ] {
            let l = &cyclic(&d).threads[0].latency;
            // Percentiles: only "> min" is known, never a figure made from min and max.
            assert_eq!(l.unknown_above(50.0), Some(l.min_ns), "{l:?}");
            assert_eq!(l.unknown_above(99.99), Some(l.min_ns));
            let ms = d.probes[0].data().measures();
            let p99 = ms.iter().find(|m| m.key == "cyclic.p99").unwrap();
            assert_eq!(p99.unknown_above, Some(0.0));
            let max = ms.iter().find(|m| m.key == "cyclic.max").unwrap();
            assert_eq!((max.unknown_above, max.value), (None, l.max_ns as f64));
            assert!(
                d.warnings.iter().any(|w| w.contains("no histogram")),
                "{:?}",
                d.warnings
            );
            assert!(limit_warnings(&d).is_empty(), "{:?}", limit_warnings(&d));
        }
    }

    #[test]
    fn a_refreshed_screen_with_a_histogram_takes_each_threads_last_line() {
        let text = include_str!("../../../../tests/fixtures/rt-tests/cyclictest-noq-h10.txt");
        let d = parse_cyclictest_text(text, "noq.txt", 1000).unwrap();
        let c = cyclic(&d);
        assert_eq!(c.threads.len(), 1);
        let t = &c.threads[0];
        // The histogram's figures, and the last T: line's period.
        assert_eq!(
            (t.cycles, t.latency.min_ns, t.latency.max_ns),
            (500, 13_000, 982_000)
        );
        assert_eq!(
            (t.interval_ns, c.config.interval_ns),
            (1_000_000, 1_000_000)
        );
    }

    #[test]
    fn each_thread_keeps_its_own_period() {
        // Real `cyclictest -t 2 -q` text: thread 1 runs at -i + -d (500 µs by default).
        let text = "T: 0 (24160) P:80 I:1000 C:   1984 Min:     11 Act:   27 Avg:   34 Max:    5273\n\
                    T: 1 (24161) P:80 I:1500 C:   1322 Min:     14 Act:   36 Avg:   44 Max:    5661\n";
        let d = parse_cyclictest_text(text, "t2.txt", 1000).unwrap();
        let c = cyclic(&d);
        let periods: Vec<u64> = c.threads.iter().map(|t| t.interval_ns).collect();
        assert_eq!(periods, vec![1_000_000, 1_500_000]);
        assert_eq!(c.config.distance_ns, 500_000);
        // JSON states -i and -d only on its command line.
        let json = r#"{"cmdline:": "cyclictest -t 2 -i 200 -q --json=x", "resolution_in_ns": 0, "thread": {
            "0": {"cycles": 1, "min": 5, "max": 5, "avg": 5},
            "1": {"cycles": 1, "min": 5, "max": 5, "avg": 5}}}"#;
        let d = parse_rt_tests(json, "t2.json", 1000).unwrap();
        let periods: Vec<u64> = cyclic(&d).threads.iter().map(|t| t.interval_ns).collect();
        assert_eq!(periods, vec![200_000, 700_000]);
        // A histogram without T: lines states no period: 0, shown as unknown.
        let d = parse_rt_tests(TEXT_V24, "v24.txt", 1000).unwrap();
        assert_eq!(cyclic(&d).config.interval_ns, 0);
    }

    #[test]
    fn numbers_too_large_for_any_run_are_errors_not_panics() {
        let cases = [
            ("T: 0 ( 1) P:90 I:18446744073709551615 C: 10 Min: 5 Act: 5 Avg: 5 Max: 6\n", "above an hour"),
            ("T: 0 ( 1) P:90 I:5000000000000000 C: 10 Min: 5 Act: 5 Avg: 5 Max: 6\n", "above an hour"),
            (
                "# Histogram\n000001 000001\n# Min Latencies: 00001\n# Avg Latencies: 00001\n# Max Latencies: 00001\n# Histogram Overflows: 18446744073709551615\n",
                "more than any run holds",
            ),
            (
                r#"{"cmdline:": "cyclictest -i 18446744073709551615 -h 100", "thread": {"0": {"cycles": 1, "min": 1, "max": 1, "avg": 1}}}"#,
                "above an hour",
            ),
        ];
        for (text, what) in cases {
            let e = parse_rt_tests(text, "f", 1000).unwrap_err().to_string();
            assert!(e.contains(what), "{what}: {e}");
        }
    }

    #[test]
    fn text_in_the_wrong_unit_is_refused_with_the_option_that_reads_it() {
        // Real -N output (rt-tests 2.40): ns figures, nothing in the text says so.
        let ns = "T: 0 (25678) P:80 I:1000 C:   1000 Min:  14716 Act:   28320 Avg:   37098 Max: 2293701\n\
                  T: 1 (25679) P:80 I:1500 C:    677 Min:  17163 Act:   45699 Avg:   45680 Max: 1653624\n";
        let e = parse_cyclictest_text(ns, "n.txt", 1000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--nsecs") && e.contains("min 14716"), "{e}");
        assert!(parse_cyclictest_text(ns, "n.txt", 1).is_ok());
        let us = "T: 0 ( 99) P:80 I:1000 C:   1000 Min:     14 Act:   28 Avg:   34 Max:     976\n";
        let e = parse_cyclictest_text(us, "u.txt", 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("without --nsecs"), "{e}");
    }

    #[test]
    fn text_with_only_summary_lines_and_nsecs() {
        let text =
            "T: 0 ( 99) P:80 I:1000 C:   1000 Min:   2500 Act:   3000 Avg:   3100 Max:   15000\n";
        let d = parse_cyclictest_text(text, "n.txt", 1).unwrap();
        let t = &cyclic(&d).threads[0];
        assert_eq!(
            (t.cycles, t.latency.min_ns, t.latency.max_ns),
            (1000, 2_500, 15_000)
        );
        assert!(d.warnings.iter().any(|w| w.contains("no histogram")));
    }

    #[test]
    fn imports_oslat_json() {
        let d = parse_rt_tests(OSLAT, "o.json", 1000).unwrap();
        let o = d.probes[0]
            .downcast_ref::<rtgauge_model::oslat::OslatResult>()
            .expect("oslat");
        let t = &o.threads[0];
        assert_eq!(t.cpu, 1);
        assert_eq!(t.iterations, 215_793_394 + 3_506 + 472);
        assert_eq!(t.buckets.counts.len(), 32);
        assert_eq!(t.buckets.counts[31], 472);
        assert_eq!(t.gaps.max_ns, 50_038_000);
        assert_eq!(o.counter.frequency_hz, 2_597_000_000);
        assert_eq!(t.duration_ns, 4_998_000_000);
        assert_eq!(d.tool.name, "oslat");
    }

    /// oslat 2.40's text summary of a 2-core run (tests/fixtures/rt-tests/oslat-2core.txt, shortened).
    const OSLAT_TEXT: &str = "oslat V 2.40
Total runtime: \t\t3 seconds

        Core:\t 0 1
Counter Freq:\t 2597 2597 (Mhz)
    001 (us):\t 123892660 121388384
    002 (us):\t 184 322
    003 (us):\t 0 0
    004 (us):\t 425 1865 (including overflows)
     Minimum:\t 1 1 (us)
     Average:\t 1.003 1.004 (us)
     Maximum:\t 5058 4140 (us)
     Max-Min:\t 5057 4139 (us)
    Duration:\t 3.005 3.005 (sec)
";

    #[test]
    fn imports_oslat_text_with_its_overflow_bucket_unknown() {
        let d = parse_rt_tests(OSLAT_TEXT, "os.txt", 1000).unwrap();
        assert_eq!(d.imported_from.as_ref().unwrap().format, "oslat-text");
        let o = d.probes[0]
            .downcast_ref::<rtgauge_model::oslat::OslatResult>()
            .expect("oslat");
        assert_eq!(o.config.cpus, vec![0, 1]);
        let t = &o.threads[1];
        assert_eq!(t.buckets.counts, vec![121388384, 322, 0, 1865]);
        assert_eq!((t.gaps.min_ns, t.gaps.max_ns), (1000, 4_140_000));
        assert_eq!(t.iterations, 121388384 + 322 + 1865);
        // The last bucket holds the overflows: gaps there are only known to be ≥ 3 µs.
        let b = t.gaps.beyond.unwrap();
        assert_eq!((b.limit_ns, b.count), (3000, 1865));
        assert_eq!(t.gaps.unknown_above(99.9999), Some(3000));
        assert_eq!(t.gaps.unknown_above(99.0), None);
        // A row with a count missing for a core is an error naming the row.
        let bad_row = OSLAT_TEXT.replace("184 322", "184");
        let e = parse_rt_tests(&bad_row, "os.txt", 1000).unwrap_err();
        assert!(e.to_string().contains("002 (us)"), "{e}");
    }

    #[test]
    fn oslat_with_a_bias_keeps_its_labels_and_reads_percentiles_at_the_upper_edge() {
        // Real rt-tests 2.40 output of `oslat -D 2 -c 1 -b 8 -B`, as JSON and as text.
        let json = r#"{"file_version": 1, "cmdline:": "oslat -D 2 -c 1 -b 8 -B --json=o2.json -q",
            "rt_test_version:": "2.40", "num_threads": 1, "thread": {"0": {"cpu": 1, "freq": 2604, "min": 1,
            "avg": 2.001262, "max": 4814, "duration": 1.996,
            "histogram": {"2": 84516099, "3": 113, "4": 89, "5": 117, "9": 802}}}}"#;
        let text = "oslat V 2.40\nGlobal bias set to 1 (us)\n        Core:\t 1\nCounter Freq:\t 2604 (Mhz)\n\
            002 (us):\t 84516099\n003 (us):\t 113\n004 (us):\t 89\n005 (us):\t 117\n006 (us):\t 0\n\
            007 (us):\t 0\n008 (us):\t 0\n009 (us):\t 802 (including overflows)\n     Minimum:\t 1 (us)\n\
            Average:\t 2.001 (us)\n     Maximum:\t 4814 (us)\n     Max-Min:\t 4813 (us)\n    Duration:\t 1.996 (sec)\n";
        let (j, t) = (
            parse_rt_tests(json, "o2.json", 1000).unwrap(),
            parse_rt_tests(text, "o2.txt", 1000).unwrap(),
        );
        let thread = |d: &RunDocument| {
            d.probes[0]
                .downcast_ref::<rtgauge_model::oslat::OslatResult>()
                .expect("oslat")
                .threads[0]
                .clone()
        };
        let (a, b) = (thread(&j), thread(&t));
        for x in [&a, &b] {
            // 1 µs buckets (not 2: the first label is the bias plus one width), 8 of them, bias 1 µs.
            assert_eq!((x.buckets.width_ns, x.buckets.bias_ns), (1000, 1000));
            assert_eq!(x.buckets.counts, vec![84516099, 113, 89, 117, 0, 0, 0, 802]);
            // The body reads at its label, never below oslat's own min; the overflow bucket is unknown.
            assert_eq!(x.gaps.percentile(50.0), Some(2000));
            assert_eq!(
                x.gaps.beyond.map(|b| (b.limit_ns, b.count)),
                Some((8000, 802))
            );
            // Gaps ≥ 5 µs are counted (buckets from label 6 up); ≥ 10 and 20 µs lie in the overflow bucket.
            let over: Vec<(u64, u64)> = x
                .over_thresholds
                .iter()
                .map(|o| (o.threshold_ns, o.count))
                .collect();
            assert_eq!(over, vec![(1000, 84_517_220), (5000, 802)]);
            assert_eq!(x.availability_pct, None);
        }
        // The same stored result but for the text's 3-decimal average.
        assert_eq!(
            (&a.gaps.percentiles, &a.gaps.hdr),
            (&b.gaps.percentiles, &b.gaps.hdr)
        );
        // Exported as rt-tests JSON, the labels come back as oslat wrote them.
        let out = crate::rttests::render_rt_tests(&j).unwrap();
        let h = &out["thread"]["0"]["histogram"];
        assert_eq!(
            (h["2"].as_u64(), h["9"].as_u64()),
            (Some(84516099), Some(802))
        );
    }

    #[test]
    fn flags_are_found_in_any_spelling() {
        assert_eq!(
            flag_value("cyclictest -i200 -h 10", "-i", "--interval"),
            Some(200)
        );
        assert_eq!(
            flag_value("cyclictest --interval=300", "-i", "--interval"),
            Some(300)
        );
        assert_eq!(flag_value("cyclictest -h 7", "-h", "--histogram"), Some(7));
        assert_eq!(
            flag_value("cyclictest --histfile=x", "-h", "--histogram"),
            None
        );
    }

    #[test]
    fn hostile_inputs_are_errors_naming_the_field() {
        let cases = [
            ("{", "not JSON"),
            ("[]", "not a cyclictest"),
            (r#"{"thread": {"0": {"cycles": 1}}}"#, "thread.0.min"),
            (r#"{"thread": {"x": {"cycles": 1, "min": 1, "max": 1}}}"#, "thread.x"),
            (r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "histogram": {"1": 5}}}}"#, "holds 5 samples"),
            (r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "histogram": {"a": 1}}}}"#, "histogram.a"),
            (r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "histogram": {"99999999": 1}}}}"#, "bucket 99999999 lie outside"),
            (r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "histogram": {"1": 1, "18446744073709551615": 0}}}}"#, "histogram.18446744073709551615: bucket beyond"),
            (r#"{"thread": {"0": {"cycles": 1, "min": 1, "max": 99999999, "histogram": {"99999999": 1}}}}"#, "histogram.99999999: bucket beyond"),
            (r#"{"thread": {"0": {"cycles": 1, "min": 9, "max": 1}}}"#, "min 9 > max 1"),
            (r#"{"resolution_in_ns": 7, "thread": {"0": {"cycles": 1, "min": 1, "max": 1}}}"#, "resolution_in_ns"),
            (r#"{"thread": {"0": {"cpu": 1, "freq": 2000, "min": 1, "max": 1, "histogram": {"-3": 1}}}}"#, "out of range"),
            ("hello\n", "not a cyclictest"),
            ("# Histogram\n000001 x\n# Min Latencies: 00001\n", "line 2"),
            ("# Histogram\n000001 000001\n# Min Latencies: 00001\n", "# Avg Latencies"),
            ("# Histogram\n000001\n# Min Latencies: 00001\n# Avg Latencies: 1\n# Max Latencies: 1\n# Histogram Overflows: 0\n", "histogram bucket 1"),
        ];
        for (text, what) in cases {
            let e = parse_rt_tests(text, "f", 1000).unwrap_err().to_string();
            assert!(e.contains(what), "{what}: {e}");
        }
    }

    /// Figures no measurement gives are refused with the thread and what is wrong; real files and a thread
    /// that never completed a cycle (rt-tests prints its initial min) still import.
    #[test]
    fn impossible_figures_are_refused_naming_the_thread() {
        let ct = |t: &str| {
            format!(
                r#"{{"thread": {{"0": {{"cycles": 100, "min": 5, "max": 10, "avg": 7.5}}, "1": {t}}}}}"#
            )
        };
        let cases = [
            (
                ct(r#"{"cycles": 100, "min": 5, "max": 10, "avg": 50.0}"#),
                "thread.1: avg 50 > max 10",
            ),
            (
                ct(r#"{"cycles": 100, "min": 5, "max": 10, "avg": 4.0}"#),
                "thread.1: avg 4 < min 5",
            ),
            (
                ct(r#"{"cycles": 100, "min": 12, "max": 10, "avg": 11.0}"#),
                "thread.1: min 12 > max 10",
            ),
            (
                ct(r#"{"cycles": 100, "min": 5, "max": 10, "avg": -7.5}"#),
                "thread.1.avg: -7.5 is not a non-negative number",
            ),
            (
                ct(r#"{"cycles": 100, "min": -5, "max": 10, "avg": 7.5}"#),
                "thread.1.min: missing or not a non-negative integer",
            ),
            (
                ct(r#"{"cycles": 0, "min": 3, "max": 9, "avg": 4.0}"#),
                "thread.1: 0 cycles but min 3, avg 4, max 9",
            ),
            (
                ct(r#"{"cycles": 0, "min": 0, "max": 0, "avg": 4.0}"#),
                "thread.1: 0 cycles but",
            ),
            (
                ct(r#"{"cycles": 0, "min": 1000000, "max": 2, "avg": 0}"#),
                "thread.1: 0 cycles but",
            ),
            // Text: a T: line, and the histogram's summary lines.
            (
                "T: 0 ( 99) P:80 I:1000 C:   1000 Min:   25 Act:   30 Avg:   310 Max:   150\n"
                    .into(),
                "thread.0: avg 310 > max 150",
            ),
            (
                "T: 0 ( 99) P:80 I:1000 C:      0 Min:   25 Act:    0 Avg:     0 Max:     0\n"
                    .into(),
                "thread.0: 0 cycles but min 25",
            ),
            (
                TEXT_V24.replace(
                    "# Avg Latencies: 00002 00002",
                    "# Avg Latencies: 00002 00009",
                ),
                "thread.1: avg 9 > max 3",
            ),
            // oslat JSON and text.
            (
                OSLAT.replace(r#""avg": 1.001361"#, r#""avg": 90000.0"#),
                "thread.0 (CPU 1): avg 90000 > max 50038",
            ),
            (
                OSLAT.replace(r#""avg": 1.001361"#, r#""avg": -1.0"#),
                "thread.0.avg",
            ),
            (
                OSLAT.replace(r#""min": 1,"#, r#""min": 60000,"#),
                "thread.0 (CPU 1): min 60000 > max 50038",
            ),
            (
                OSLAT.replace(r#""1": 215793394, "2": 3506, "32": 472"#, ""),
                "thread.0 (CPU 1): 0 samples but min 1",
            ),
            (
                OSLAT_TEXT.replace("1.003 1.004", "1.003 9000.5"),
                "thread.1 (CPU 1): avg 9000.5 > max 4140",
            ),
        ];
        for (text, what) in &cases {
            let e = parse_rt_tests(text, "f", 1000).unwrap_err().to_string();
            assert!(e.contains(what), "{what}: {e}");
        }
        // Legitimate: all-zero figures of a thread without a cycle, and rt-tests' own initial min for one.
        for t in [
            r#"{"cycles": 0, "min": 0, "max": 0, "avg": 0}"#,
            r#"{"cycles": 0, "min": 1000000, "max": 0, "avg": 0.0}"#,
            r#"{"cycles": 0, "min": 0, "max": 0}"#,
        ] {
            let d = parse_rt_tests(&ct(t), "f", 1000).unwrap();
            let idle = &cyclic(&d).threads[1];
            assert_eq!(
                (idle.cycles, idle.latency.min_ns, idle.latency.max_ns),
                (0, 0, 0),
                "{t}"
            );
        }
        let idle =
            "T: 0 ( 99) P:80 I:1000 C:      0 Min: 1000000 Act:    0 Avg:     0 Max:       0\n";
        let d = parse_rt_tests(idle, "f", 1000).unwrap();
        assert_eq!(cyclic(&d).threads[0].latency.min_ns, 0);
        // The avg of a real file may sit at an extreme.
        let flat = ct(r#"{"cycles": 3, "min": 9, "max": 9, "avg": 9.0}"#);
        assert!(parse_rt_tests(&flat, "f", 1000).is_ok());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
        /// 500 mutated or truncated versions of each real file: never a panic.
        #[test]
        fn mutated_files_never_panic(which in 0usize..5, cut in 0usize..2000, pos in 0usize..2000, byte in proptest::num::u8::ANY) {
            let src = [SAMPLE, TEXT_V24, TEXT_V27, OSLAT, OSLAT_TEXT][which];
            let mut b = src.as_bytes().to_vec();
            let pos = pos % b.len();
            b[pos] = byte;
            b.truncate((cut % b.len()).max(1));
            let _ = parse_rt_tests(&String::from_utf8_lossy(&b), "f", 1000);
        }
    }
}
