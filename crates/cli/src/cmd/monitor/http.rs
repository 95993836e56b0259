//! The monitor's read-only HTTP endpoint, as transport: `GET /metrics` (what is served, OpenMetrics or the
//! Prometheus 0.0.4 text format by what the scraper accepts, is `rtgauge_formats::openmetrics`') and `GET /`
//! (a pointer to it); `HEAD` of either. Nothing it serves changes state.
//!
//! Every scraper is answered within its deadline whatever other clients do: connections are served
//! concurrently by one thread (tokio's single-threaded runtime), at most [`CAP`] at once; a connection
//! must send its whole request head within [`HEAD_DEADLINE`] and take its answer within
//! [`WRITE_DEADLINE`]; at the cap, the oldest connection still sending its head is closed to make room (a
//! scraper sends its head at once, so the connections closed are the idle and the slow; only a flood of
//! more than [`CAP`] new connections within a scraper's own connect-to-request time can close a scraper's
//! connection before its request is read). How connections
//! ended is counted in `/metrics` itself, and drops are logged at most once per [`LOG_EVERY`].
//!
//! Over tokio (already in the binary for the PostgreSQL client) with httparse (already there for the net
//! probe) rather than an HTTP server crate: hyper would bound the head's time (`header_read_timeout`) but
//! not the connections, their eviction or the answer's time, which we would write around it anyway, and
//! it would add its own stack of crates for one path, one request per connection.

use rtgauge_analysis::monitor::{EndpointCounts, MonitorState};
use rtgauge_formats::openmetrics::{accepts_openmetrics, render_metrics};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

/// Largest request head accepted; scrapers send a few hundred bytes.
const MAX_REQUEST: usize = 8192;
/// The most connections held at once: a few scrapers (an HA pair, an agent, a person with curl) need a
/// handful; the rest of the room absorbs a burst of clients without closing any.
pub const CAP: usize = 64;
/// Time for a connection's whole request head, from its accept (Prometheus sends it at once).
pub const HEAD_DEADLINE: Duration = Duration::from_secs(2);
/// Time for the client to take the whole answer (a few tens of KB, within the socket's buffers).
pub const WRITE_DEADLINE: Duration = Duration::from_secs(2);
/// The shortest time between two log lines about dropped connections.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnEnd {
    /// Answered (200 or 404).
    Answered,
    /// A malformed or oversized request head, or not GET/HEAD: answered 400 or 405.
    Rejected,
    /// No whole request head within [`HEAD_DEADLINE`]: closed.
    HeadTimeout,
    /// The answer not taken within [`WRITE_DEADLINE`]: closed.
    WriteTimeout,
    /// Closed at the cap to make room, while still sending its head.
    Evicted,
    /// Over the cap with every held connection being answered: closed at once.
    Refused,
    /// The client closed or reset the connection before its answer.
    ClientClosed,
}

impl ConnEnd {
    const ALL: [ConnEnd; 7] = [
        ConnEnd::Answered,
        ConnEnd::Rejected,
        ConnEnd::HeadTimeout,
        ConnEnd::WriteTimeout,
        ConnEnd::Evicted,
        ConnEnd::Refused,
        ConnEnd::ClientClosed,
    ];

    fn as_str(self) -> &'static str {
        match self {
            ConnEnd::Answered => "answered",
            ConnEnd::Rejected => "rejected",
            ConnEnd::HeadTimeout => "head_timeout",
            ConnEnd::WriteTimeout => "write_timeout",
            ConnEnd::Evicted => "evicted",
            ConnEnd::Refused => "refused",
            ConnEnd::ClientClosed => "client_closed",
        }
    }

    /// Whether the endpoint cut the client off (what the log reports).
    fn dropped(self) -> bool {
        matches!(
            self,
            ConnEnd::HeadTimeout | ConnEnd::WriteTimeout | ConnEnd::Evicted | ConnEnd::Refused
        )
    }
}

/// The endpoint's counters as its tasks update them (atomics); [`EndpointCounts`] is their copy for a rendering.
#[derive(Default)]
struct EndpointCounters {
    open: AtomicU64,
    ended: [AtomicU64; ConnEnd::ALL.len()],
}

impl EndpointCounters {
    fn count(&self, o: ConnEnd) {
        self.ended[o as usize].fetch_add(1, Relaxed);
    }

    fn ended(&self) -> [u64; ConnEnd::ALL.len()] {
        std::array::from_fn(|i| self.ended[i].load(Relaxed))
    }

    fn snapshot(&self) -> EndpointCounts {
        let ended = self.ended();
        EndpointCounts {
            open: self.open.load(Relaxed),
            cap: CAP as u64,
            ended: ConnEnd::ALL
                .iter()
                .map(|o| (o.as_str(), ended[*o as usize]))
                .collect(),
        }
    }
}

/// One open connection as the accept loop holds it.
struct Held {
    task: tokio::task::AbortHandle,
    /// Set once its head is whole: it is being answered and is not evicted.
    answering: Arc<AtomicBool>,
}

/// The endpoint, set up: its runtime and its listener registered with it.
pub struct Endpoint {
    rt: tokio::runtime::Runtime,
    listener: TcpListener,
}

impl Endpoint {
    /// Set up on the caller's thread, so that a failure is the monitor's error at its start.
    pub fn new(listener: std::net::TcpListener) -> std::io::Result<Endpoint> {
        listener.set_nonblocking(true)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let listener = {
            let _in = rt.enter();
            TcpListener::from_std(listener)?
        };
        Ok(Endpoint { rt, listener })
    }

    /// Serve `state` until the process ends.
    pub fn serve(self, state: Arc<Mutex<MonitorState>>) {
        let Endpoint { rt, listener } = self;
        rt.block_on(async move {
            let counters = Arc::new(EndpointCounters::default());
            tokio::spawn(log_drops(Arc::clone(&counters)));
            accept_loop(&listener, &state, &counters).await;
        });
    }
}

async fn accept_loop(
    listener: &TcpListener,
    state: &Arc<Mutex<MonitorState>>,
    counters: &Arc<EndpointCounters>,
) {
    let mut held: VecDeque<Held> = VecDeque::with_capacity(CAP);
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // Out of file descriptors or a connection reset before its accept: the held connections
                // end within their deadlines and free descriptors; try again shortly.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        held.retain(|h| !h.task.is_finished());
        if held.len() >= CAP {
            match held.iter().position(|h| !h.answering.load(Relaxed)) {
                Some(i) => {
                    if let Some(old) = held.remove(i) {
                        old.task.abort();
                        counters.count(ConnEnd::Evicted);
                    }
                }
                None => {
                    counters.count(ConnEnd::Refused);
                    continue;
                }
            }
        }
        let answering = Arc::new(AtomicBool::new(false));
        let conn = Connection {
            state: Arc::clone(state),
            counters: Arc::clone(counters),
            answering: Arc::clone(&answering),
        };
        // Counted open until the task's future is dropped: done, or aborted (also before its first poll).
        let open = OpenGuard::new(counters);
        let task = tokio::spawn(async move {
            let outcome = conn.serve(stream).await;
            open.0.count(outcome);
        });
        held.push_back(Held {
            task: task.abort_handle(),
            answering,
        });
        // Let the new connection read what it was sent before the next accept: a scraper's head, read,
        // marks it answering. (A flood of more than CAP new connections between a scraper's connect and
        // the arrival of its head can still evict it: the scrape fails, and is counted and logged.)
        tokio::task::yield_now().await;
    }
}

/// Counts a connection open from its accept until its task's future is dropped.
struct OpenGuard(Arc<EndpointCounters>);

impl OpenGuard {
    fn new(counters: &Arc<EndpointCounters>) -> OpenGuard {
        counters.open.fetch_add(1, Relaxed);
        OpenGuard(Arc::clone(counters))
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Relaxed);
    }
}

/// Every [`LOG_EVERY`], one line for the connections cut off since the last line, if any.
async fn log_drops(counters: Arc<EndpointCounters>) {
    let mut last = counters.ended();
    let mut tick = tokio::time::interval(LOG_EVERY);
    loop {
        tick.tick().await;
        let now = counters.ended();
        let parts: Vec<String> = ConnEnd::ALL
            .iter()
            .filter(|o| o.dropped())
            .filter_map(|o| {
                let n = now[*o as usize] - last[*o as usize];
                (n > 0).then(|| format!("{n} {}", o.as_str().replace('_', " ")))
            })
            .collect();
        if !parts.is_empty() {
            eprintln!(
                "rtgauge monitor: /metrics dropped connections in the last {} s: {} (cap {CAP} connections, {} s for a request head, {} s for an answer)",
                LOG_EVERY.as_secs(),
                parts.join(", "),
                HEAD_DEADLINE.as_secs(),
                WRITE_DEADLINE.as_secs()
            );
        }
        last = now;
    }
}

/// What one connection's task needs.
struct Connection {
    state: Arc<Mutex<MonitorState>>,
    counters: Arc<EndpointCounters>,
    answering: Arc<AtomicBool>,
}

/// A request head as far as the endpoint cares.
enum Head {
    Get {
        path: String,
        openmetrics: bool,
        /// HEAD: the answer's head without its body.
        head_only: bool,
    },
    NotGet,
    Bad,
}

impl Connection {
    async fn serve(&self, mut stream: TcpStream) -> ConnEnd {
        let head = match timeout(HEAD_DEADLINE, read_head(&mut stream)).await {
            Err(_) => return ConnEnd::HeadTimeout,
            Ok(None) => return ConnEnd::ClientClosed,
            Ok(Some(h)) => h,
        };
        self.answering.store(true, Relaxed);
        let head_only = matches!(
            head,
            Head::Get {
                head_only: true,
                ..
            }
        );
        let (status, kind, body, outcome) = self.reply(head);
        let answer = async {
            let allow = if status.starts_with("405") {
                "Allow: GET, HEAD\r\n"
            } else {
                ""
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).await?;
            if !head_only {
                stream.write_all(body.as_bytes()).await?;
            }
            // Written whole: a client gone before our FIN does not make it unanswered.
            let _ = stream.shutdown().await;
            Ok::<(), std::io::Error>(())
        };
        match timeout(WRITE_DEADLINE, answer).await {
            Err(_) => ConnEnd::WriteTimeout,
            Ok(Err(_)) => ConnEnd::ClientClosed,
            Ok(Ok(())) => outcome,
        }
    }

    fn reply(&self, head: Head) -> (&'static str, &'static str, String, ConnEnd) {
        let text = "text/plain";
        match head {
            Head::Bad => (
                "400 Bad Request",
                text,
                "bad request\n".into(),
                ConnEnd::Rejected,
            ),
            Head::NotGet => (
                "405 Method Not Allowed",
                text,
                "only GET and HEAD: this endpoint changes nothing\n".into(),
                ConnEnd::Rejected,
            ),
            Head::Get {
                path, openmetrics, ..
            } => match path.split('?').next().unwrap_or("") {
                "/metrics" => {
                    // The copy is taken under the lock; the rendering is done outside it.
                    let mut snapshot = super::lock(&self.state).clone();
                    snapshot.endpoint = Some(self.counters.snapshot());
                    let (body, kind) = render_metrics(&snapshot, openmetrics);
                    ("200 OK", kind, body, ConnEnd::Answered)
                }
                "/" => (
                    "200 OK",
                    text,
                    "rtgauge monitor: latency and tuning series at /metrics\n".into(),
                    ConnEnd::Answered,
                ),
                _ => (
                    "404 Not Found",
                    text,
                    "not found\n".into(),
                    ConnEnd::Answered,
                ),
            },
        }
    }
}

/// Read until the request head is whole; `None` when the client closes or errs first.
async fn read_head(stream: &mut TcpStream) -> Option<Head> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                let method = req.method.unwrap_or("");
                if method != "GET" && method != "HEAD" {
                    return Some(Head::NotGet);
                }
                let openmetrics = req.headers.iter().any(|h| {
                    h.name.eq_ignore_ascii_case("accept")
                        && accepts_openmetrics(&String::from_utf8_lossy(h.value))
                });
                return Some(Head::Get {
                    path: req.path.unwrap_or("").to_string(),
                    openmetrics,
                    head_only: method == "HEAD",
                });
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_REQUEST => continue,
            _ => return Some(Head::Bad),
        }
    }
}
