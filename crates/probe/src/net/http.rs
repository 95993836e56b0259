//! Just enough HTTP/1.x for a load generator and a reference server: the response side reads the status,
//! whether the connection stays open and where the body ends (Content-Length, chunked, or end of stream);
//! the request side builds the one request a run sends. Headers are parsed by `httparse`; the head is
//! accumulated in a buffer owned by the connection slot (allocated once), bodies are only counted.

/// Why a response was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpError {
    /// Not an HTTP/1.x response, or a malformed chunked body.
    Malformed,
    /// The head did not fit the buffer.
    TooLarge,
    /// The peer closed before the end of the body.
    Truncated,
}

/// Result of feeding bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseProgress {
    /// The response is not complete yet: feed more bytes.
    More,
    /// The response is complete.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Size { value: u64, digits: u8, ext: bool },
    SizeLf { value: u64 },
    Data(u64),
    DataCr,
    DataLf,
    Trailer { line: usize },
    TrailerLf { line: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParsePhase {
    Head,
    Length(u64),
    Chunked(Chunk),
    UntilClose,
    Done,
}

/// Reads one response at a time; `reset` before the next.
#[derive(Debug)]
pub struct ResponseReader {
    head: Box<[u8]>,
    head_len: usize,
    phase: ParsePhase,
    /// Status code, once the head is read.
    pub status: u16,
    /// Whether the server keeps the connection open after this response.
    pub keep_alive: bool,
    /// The request was HEAD: no body whatever the headers say.
    pub head_request: bool,
}

/// Largest response head accepted.
pub const HEAD_MAX: usize = 8192;

impl ResponseReader {
    /// A reader with its head buffer allocated; `head_request`: the response has no body.
    pub fn new(head_request: bool) -> ResponseReader {
        ResponseReader {
            head: vec![0u8; HEAD_MAX].into_boxed_slice(),
            head_len: 0,
            phase: ParsePhase::Head,
            status: 0,
            keep_alive: false,
            head_request,
        }
    }

    /// Ready for the next response on the same connection (nothing is freed or allocated).
    #[inline]
    pub fn reset(&mut self) {
        self.head_len = 0;
        self.phase = ParsePhase::Head;
        self.status = 0;
        self.keep_alive = false;
    }

    /// Feed received bytes. Bytes after the end of the response are ignored (requests are not pipelined).
    #[inline]
    pub fn feed(&mut self, data: &[u8]) -> Result<ParseProgress, HttpError> {
        let body = if self.phase == ParsePhase::Head {
            let prev = self.head_len;
            let take = data.len().min(self.head.len() - prev);
            self.head[prev..prev + take].copy_from_slice(&data[..take]);
            self.head_len += take;
            match self.parse_head()? {
                None if self.head_len == self.head.len() => return Err(HttpError::TooLarge),
                None => return Ok(ParseProgress::More),
                Some(n) => &data[n - prev..],
            }
        } else {
            data
        };
        self.feed_body(body)
    }

    /// The peer closed the connection.
    pub fn eof(&mut self) -> Result<ParseProgress, HttpError> {
        match self.phase {
            ParsePhase::UntilClose | ParsePhase::Done => {
                self.phase = ParsePhase::Done;
                Ok(ParseProgress::Done)
            }
            _ => Err(HttpError::Truncated),
        }
    }

    /// Parse the accumulated head; `Some(length of the head)` when complete, and the body phase set.
    fn parse_head(&mut self) -> Result<Option<usize>, HttpError> {
        let mut headers = [httparse::EMPTY_HEADER; 48];
        let mut r = httparse::Response::new(&mut headers);
        let n = match r.parse(&self.head[..self.head_len]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(HttpError::TooLarge),
            Err(_) => return Err(HttpError::Malformed),
        };
        let status = r.code.unwrap_or(0);
        let mut keep_alive = r.version == Some(1);
        let mut length = None;
        let mut chunked = false;
        for h in r.headers.iter() {
            if h.name.eq_ignore_ascii_case("connection") {
                keep_alive = connection_keep_alive(h.value, keep_alive);
            } else if h.name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .ok_or(HttpError::Malformed)?;
                length = Some(v);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = h
                    .value
                    .split(|&b| b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            }
        }
        if (100..200).contains(&status) {
            // An interim response: drop it and read the final one.
            self.head.copy_within(n..self.head_len, 0);
            self.head_len -= n;
            return match self.parse_head()? {
                Some(m) => Ok(Some(n + m)),
                None => Ok(None),
            };
        }
        self.status = status;
        self.phase = if self.head_request || status == 204 || status == 304 {
            ParsePhase::Length(0)
        } else if chunked {
            ParsePhase::Chunked(Chunk::Size {
                value: 0,
                digits: 0,
                ext: false,
            })
        } else if let Some(l) = length {
            ParsePhase::Length(l)
        } else {
            keep_alive = false;
            ParsePhase::UntilClose
        };
        self.keep_alive = keep_alive;
        Ok(Some(n))
    }

    #[inline]
    fn feed_body(&mut self, mut data: &[u8]) -> Result<ParseProgress, HttpError> {
        loop {
            match self.phase {
                ParsePhase::Head => return Ok(ParseProgress::More),
                ParsePhase::Done => return Ok(ParseProgress::Done),
                ParsePhase::UntilClose => return Ok(ParseProgress::More),
                ParsePhase::Length(left) => {
                    let take = (data.len() as u64).min(left);
                    if left - take == 0 {
                        self.phase = ParsePhase::Done;
                        return Ok(ParseProgress::Done);
                    }
                    self.phase = ParsePhase::Length(left - take);
                    return Ok(ParseProgress::More);
                }
                ParsePhase::Chunked(Chunk::Data(left)) => {
                    let take = (data.len() as u64).min(left);
                    data = &data[take as usize..];
                    self.phase = ParsePhase::Chunked(if left == take {
                        Chunk::DataCr
                    } else {
                        Chunk::Data(left - take)
                    });
                    if data.is_empty() {
                        return Ok(ParseProgress::More);
                    }
                }
                ParsePhase::Chunked(c) => {
                    let Some((&b, rest)) = data.split_first() else {
                        return Ok(ParseProgress::More);
                    };
                    data = rest;
                    self.phase = step_chunk(c, b)?;
                }
            }
        }
    }
}

/// One byte of the chunked framing outside chunk data (RFC 9112 §7.1).
fn step_chunk(c: Chunk, b: u8) -> Result<ParsePhase, HttpError> {
    let next = match c {
        Chunk::Size { value, digits, ext } => match b {
            b'\r' if digits > 0 => Chunk::SizeLf { value },
            _ if ext => Chunk::Size { value, digits, ext },
            b';' | b' ' | b'\t' if digits > 0 => Chunk::Size {
                value,
                digits,
                ext: true,
            },
            _ => {
                let d = (b as char).to_digit(16).ok_or(HttpError::Malformed)?;
                if digits >= 15 {
                    return Err(HttpError::Malformed);
                }
                Chunk::Size {
                    value: value * 16 + d as u64,
                    digits: digits + 1,
                    ext: false,
                }
            }
        },
        Chunk::SizeLf { value } if b == b'\n' => {
            if value == 0 {
                Chunk::Trailer { line: 0 }
            } else {
                Chunk::Data(value)
            }
        }
        Chunk::DataCr if b == b'\r' => Chunk::DataLf,
        Chunk::DataLf if b == b'\n' => Chunk::Size {
            value: 0,
            digits: 0,
            ext: false,
        },
        Chunk::Trailer { line } if b == b'\r' => Chunk::TrailerLf { line },
        Chunk::Trailer { line } => Chunk::Trailer { line: line + 1 },
        Chunk::TrailerLf { line } if b == b'\n' => {
            if line == 0 {
                return Ok(ParsePhase::Done);
            }
            Chunk::Trailer { line: 0 }
        }
        _ => return Err(HttpError::Malformed),
    };
    Ok(ParsePhase::Chunked(next))
}

/// The request a run sends, built once: `GET PATH HTTP/1.1`, Host, and `Connection: close` when asked.
pub fn build_request(path: &str, host: &str, close: bool) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: rtgauge\r\nAccept: */*\r\n{}\r\n",
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes()
}

/// The keep-alive decision after one `Connection:` header value: `close` ends the connection,
/// `keep-alive` keeps it, other tokens (e.g. `Upgrade`) leave `current` as it was.
pub(super) fn connection_keep_alive(value: &[u8], current: bool) -> bool {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .fold(current, |keep, t| {
            if t.eq_ignore_ascii_case(b"close") {
                false
            } else if t.eq_ignore_ascii_case(b"keep-alive") {
                true
            } else {
                keep
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(
        r: &mut ResponseReader,
        text: &[u8],
        step: usize,
    ) -> Result<ParseProgress, HttpError> {
        let mut last = ParseProgress::More;
        for part in text.chunks(step) {
            last = r.feed(part)?;
        }
        Ok(last)
    }

    #[test]
    fn content_length_in_any_split() {
        let text = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        for step in 1..text.len() {
            let mut r = ResponseReader::new(false);
            assert_eq!(
                feed_all(&mut r, text, step),
                Ok(ParseProgress::Done),
                "{step}"
            );
            assert_eq!(r.status, 200);
            assert!(r.keep_alive);
        }
        let mut r = ResponseReader::new(false);
        assert_eq!(r.feed(&text[..text.len() - 1]), Ok(ParseProgress::More));
        assert_eq!(r.eof(), Err(HttpError::Truncated));
    }

    #[test]
    fn connection_close_and_http10() {
        let mut r = ResponseReader::new(false);
        r.feed(b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert!(!r.keep_alive);
        r.reset();
        r.feed(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert!(!r.keep_alive);
        r.reset();
        r.feed(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert!(r.keep_alive);
    }

    #[test]
    fn chunked_in_any_split() {
        let text = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\n";
        for step in 1..text.len() {
            let mut r = ResponseReader::new(false);
            assert_eq!(
                feed_all(&mut r, text, step),
                Ok(ParseProgress::Done),
                "{step}"
            );
            assert_eq!(r.status, 404);
        }
    }

    #[test]
    fn until_close_and_no_body_statuses() {
        let mut r = ResponseReader::new(false);
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\n\r\nabc"),
            Ok(ParseProgress::More)
        );
        assert!(!r.keep_alive);
        assert_eq!(r.eof(), Ok(ParseProgress::Done));
        let mut r = ResponseReader::new(false);
        assert_eq!(
            r.feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"),
            Ok(ParseProgress::Done)
        );
        assert_eq!(r.status, 204);
        let mut r = ResponseReader::new(true);
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"),
            Ok(ParseProgress::Done)
        );
    }

    #[test]
    fn hostile_input_is_an_error_not_a_panic() {
        let cases: &[&[u8]] = &[
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
        ];
        for c in cases {
            let mut r = ResponseReader::new(false);
            assert_eq!(
                r.feed(c),
                Err(HttpError::Malformed),
                "{}",
                String::from_utf8_lossy(c)
            );
        }
        let mut r = ResponseReader::new(false);
        let big = vec![b'a'; HEAD_MAX + 10];
        assert!(r.feed(b"HTTP/1.1 200 OK\r\nX: ").is_ok());
        assert_eq!(r.feed(&big), Err(HttpError::TooLarge));
    }

    #[test]
    fn request_is_well_formed() {
        let req = build_request("/2b", "127.0.0.1:80", true);
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let mut r = httparse::Request::new(&mut headers);
        assert_eq!(
            r.parse(&req).unwrap(),
            httparse::Status::Complete(req.len())
        );
        assert_eq!(r.path, Some("/2b"));
        assert!(r
            .headers
            .iter()
            .any(|h| h.name == "Connection" && h.value == b"close"));
    }
}
