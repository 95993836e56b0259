//! CSV: one row per probe thread (per net measurement) — samples, min, mean, percentiles, max (ns), missed
//! deadlines, overflows — for spreadsheets.

use crate::{ExportError, Exporter};
use rtgauge_analysis::kind::ProbeData;
use rtgauge_model::run::RunDocument;

/// `export --format csv`.
#[derive(Debug, Clone, Copy)]
pub struct Csv;

impl Exporter for Csv {
    fn export(&self, document: &RunDocument) -> Result<Vec<u8>, ExportError> {
        Ok(render_csv(document).into_bytes())
    }
}

/// CSV, one row per probe thread.
pub fn render_csv(document: &RunDocument) -> String {
    let ps = rtgauge_model::latency::DEFAULT_PERCENTILES;
    let mut s = String::from("probe,thread,cpu,samples,min_ns,mean_ns");
    for p in ps {
        s.push_str(&format!(",p{p}_ns"));
    }
    s.push_str(",max_ns,missed_deadlines,overflows\n");
    let row = |s: &mut String,
               probe: &str,
               idx: u32,
               cpu: Option<u32>,
               l: &rtgauge_model::latency::LatencyStats,
               missed: Option<u64>,
               over: Option<u64>| {
        s.push_str(&format!(
            "{probe},{idx},{},{},{},{:.1}",
            cpu.map_or(String::new(), |c| c.to_string()),
            l.count,
            l.min_ns,
            l.mean_ns
        ));
        for p in ps {
            // A percentile beyond an imported histogram's limit is unknown: left empty, never the limit.
            let v = match l.unknown_above(*p) {
                Some(_) => None,
                None => l.percentile(*p),
            };
            s.push_str(&format!(",{}", v.map_or(String::new(), |v| v.to_string())));
        }
        s.push_str(&format!(
            ",{},{},{}\n",
            l.max_ns,
            missed.map_or(String::new(), |m| m.to_string()),
            over.map_or(String::new(), |o| o.to_string())
        ));
    };
    let facts = document.facts();
    for p in &document.probes {
        for r in p.data().export_rows(&facts) {
            row(&mut s, &r.probe, r.index, r.cpu, r.stats, r.missed, r.over);
        }
    }
    s
}
