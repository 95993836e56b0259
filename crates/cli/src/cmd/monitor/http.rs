//! The monitor's read-only HTTP endpoint, as transport: `GET /metrics` (what is served, OpenMetrics or the
//! Prometheus 0.0.4 text format by what the scraper accepts, is `rtgauge_formats::openmetrics`') and `GET /`
//! (a pointer to it). Nothing it serves changes state.
//!
//! Hand-written over std's TcpListener with httparse (already a dependency of the net probe) rather than an
//! HTTP server crate: the endpoint answers one path to a handful of scrapers, one request per connection,
//! and an async server stack would add more to the binary than the whole monitor.

use rtgauge_analysis::monitor::MonitorState;
use rtgauge_formats::openmetrics::{accepts_openmetrics, render_metrics};
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Largest request head accepted; scrapers send a few hundred bytes.
const MAX_REQUEST: usize = 8192;

/// Serve `state` on `listener` until the process ends, one connection at a time (a slow client is cut off
/// after 2 s, so it cannot hold the endpoint).
pub fn serve(listener: TcpListener, state: Arc<Mutex<MonitorState>>) {
    for stream in listener.incoming().flatten() {
        let _ = answer(stream, &state);
    }
}

fn answer(mut stream: TcpStream, state: &Mutex<MonitorState>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = vec![0u8; MAX_REQUEST];
    let mut len = 0;
    let (method, path, openmetrics) = loop {
        let n = stream.read(&mut buf[len..])?;
        if n == 0 {
            return Ok(());
        }
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => {
                let accepts_om = req.headers.iter().any(|h| {
                    h.name.eq_ignore_ascii_case("accept")
                        && accepts_openmetrics(&String::from_utf8_lossy(h.value))
                });
                break (
                    req.method.unwrap_or("").to_string(),
                    req.path.unwrap_or("").to_string(),
                    accepts_om,
                );
            }
            Ok(httparse::Status::Partial) if len < buf.len() => continue,
            _ => {
                return respond(
                    &mut stream,
                    "400 Bad Request",
                    "text/plain",
                    "bad request\n",
                )
            }
        }
    };
    if method != "GET" && method != "HEAD" {
        return respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            "only GET: this endpoint changes nothing\n",
        );
    }
    match path.split('?').next().unwrap_or("") {
        "/metrics" => {
            let snapshot = match state.lock() {
                Ok(g) => g.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            };
            let (body, kind) = render_metrics(&snapshot, openmetrics);
            respond(&mut stream, "200 OK", kind, &body)
        }
        "/" => respond(
            &mut stream,
            "200 OK",
            "text/plain",
            "rtgauge monitor: latency and tuning series at /metrics\n",
        ),
        _ => respond(&mut stream, "404 Not Found", "text/plain", "not found\n"),
    }
}

fn respond(stream: &mut TcpStream, status: &str, kind: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}
