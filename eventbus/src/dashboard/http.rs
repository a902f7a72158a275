//! Just enough HTTP/1.1 for the dashboard: one request per connection, read within a size
//! limit and a deadline, answered with `Connection: close`. Anything it does not understand
//! gets a 4xx with a message.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The most a request line and its headers may take, with the blank line that ends them.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// The most a request body may take (the dashboard's are a few bytes of JSON).
pub(crate) const MAX_BODY: usize = 4 * 1024;
/// How long a client has to send its whole request.
pub(crate) const READ_DEADLINE: Duration = Duration::from_secs(10);
/// How long, at most, the rest of a refused request is read and dropped after the response.
const LINGER: Duration = Duration::from_secs(1);
/// How long writing a response may take.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// A request, as far as the dashboard cares.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub(crate) version: String,
    /// The path, without the query.
    pub(crate) path: String,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Request {
    /// A request that came some other way than [`read_request`] (an application's router).
    pub(crate) fn new(
        method: String,
        version: String,
        path: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> Request {
        Request {
            method,
            version,
            path,
            headers,
            body,
        }
    }

    /// The value of header `name` (case-insensitive), if sent once; `Err` if sent twice.
    pub(crate) fn header(&self, name: &str) -> Result<Option<&str>, Response> {
        let mut found = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str());
        let first = found.next();
        if found.next().is_some() {
            return Err(Response::error(400, &format!("header `{name}` sent twice")));
        }
        Ok(first)
    }
}

/// A response: status, headers, body.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Vec<u8>,
    /// The answer to a HEAD: the head says how long the body is, and the body is not sent.
    pub(crate) head_only: bool,
}

impl Response {
    pub(crate) fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type", content_type.to_owned())],
            body: body.into(),
            head_only: false,
        }
    }

    /// This response as the answer to a HEAD (RFC 9110, 9.3.2): its head alone.
    pub(crate) fn head_only(mut self) -> Self {
        self.head_only = true;
        self
    }

    /// `{"error": message}` with a 4xx or 5xx status.
    pub(crate) fn error(status: u16, message: &str) -> Response {
        let body = serde_json::json!({ "error": message }).to_string();
        Response::new(status, "application/json", body)
    }

    pub(crate) fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Writes it, closes the connection's sending half, and drains what the client still
    /// sends (see [`linger`]).
    pub(crate) fn write_to(&self, stream: &mut TcpStream) -> io::Result<()> {
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        self.send(stream)?;
        linger(stream);
        Ok(())
    }

    /// Writes it, and closes the connection's sending half, without ever waiting on the
    /// client: a short response fits a fresh connection's send buffer, and one that does
    /// not fit is an error, not a wait. The caller drains the client's input, or not.
    pub(crate) fn write_at_once(&self, stream: &mut TcpStream) -> io::Result<()> {
        stream.set_nonblocking(true)?;
        let sent = self.send(stream);
        stream.set_nonblocking(false)?;
        sent
    }

    fn send(&self, stream: &mut TcpStream) -> io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Length: {}\r\nConnection: close\r\n\
             Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
             X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n",
            self.status,
            reason(self.status),
            self.body.len()
        );
        for (name, value) in &self.headers {
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        if !self.head_only {
            stream.write_all(&self.body)?;
        }
        stream.flush()?;
        stream.shutdown(std::net::Shutdown::Write)
    }
}

/// Reads and discards what the client still sends (the rest of a request refused early),
/// for a moment: closing a socket with unread input resets the connection, and the client
/// could lose the response before reading it.
pub(crate) fn linger(stream: &mut TcpStream) {
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    while left > 0 {
        let Some(wait) = deadline.checked_duration_since(Instant::now()) else {
            return;
        };
        if wait.is_zero() || stream.set_read_timeout(Some(wait)).is_err() {
            return;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Reads one request within [`MAX_HEAD`], [`MAX_BODY`] and [`READ_DEADLINE`]; a request it
/// will not take comes back as the response to send.
pub(crate) fn read_request(stream: &mut TcpStream) -> Result<Request, Response> {
    let deadline = Instant::now() + READ_DEADLINE;
    let mut buffer = Vec::with_capacity(1024);
    // Never more than `MAX_HEAD` read before the head's end is found: whether it ends
    // within the limit is then the same question however its bytes arrive.
    let head_end = loop {
        if let Some(at) = find(&buffer, b"\r\n\r\n") {
            break at;
        }
        if buffer.len() >= MAX_HEAD {
            return Err(Response::error(
                431,
                &format!("the request line and headers exceed {MAX_HEAD} bytes"),
            ));
        }
        let most = MAX_HEAD - buffer.len();
        read_some(stream, &mut buffer, most, deadline)?;
    };
    let head = std::str::from_utf8(&buffer[..head_end])
        .map_err(|_| Response::error(400, "the request head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Response::error(
            400,
            "a request line is `METHOD /path HTTP/1.1`",
        ));
    };
    // A 400, not 505: a request line of another version (HTTP/2's preface, `PRI *
    // HTTP/2.0`, say) is one this server cannot read, and GUARANTEES.md promises a 4xx.
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(Response::error(
            400,
            "only HTTP/1.0 and HTTP/1.1 are served",
        ));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(Response::error(400, "the method is not a method"));
    }
    if !target.starts_with('/') {
        return Err(Response::error(
            400,
            "the target must be a path starting with `/`",
        ));
    }
    let path = target
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(Response::error(400, "a header line has no `:`"));
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(Response::error(400, "a header name is empty or has spaces"));
        }
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    let mut request = Request {
        method: method.to_owned(),
        version: version.to_owned(),
        path,
        headers,
        body: Vec::new(),
    };
    // Any transfer coding, chunked included, with or without a Content-Length (which it
    // would override): 411 Length Required, the 4xx that says what to send instead.
    if request.header("Transfer-Encoding")?.is_some() {
        return Err(Response::error(
            411,
            "a chunked body is not accepted: send Content-Length",
        ));
    }
    let length = match request.header("Content-Length")? {
        None => 0,
        // Digits alone (`parse` would take a sign); too many of them is too long a body.
        Some(length) if !length.is_empty() && length.bytes().all(|b| b.is_ascii_digit()) => {
            length.parse::<usize>().unwrap_or(usize::MAX)
        }
        Some(_) => return Err(Response::error(400, "Content-Length is not a number")),
    };
    if length > MAX_BODY {
        return Err(Response::error(
            413,
            &format!("a body of {length} bytes is more than the {MAX_BODY} taken"),
        ));
    }
    let mut body = buffer.split_off(head_end + 4);
    while body.len() < length {
        let most = length - body.len();
        read_some(stream, &mut body, most, deadline)?;
    }
    if body.len() > length {
        return Err(Response::error(
            400,
            "more bytes than Content-Length said, or a second request: one request per \
             connection",
        ));
    }
    request.body = body;
    Ok(request)
}

/// Reads at most `most` more bytes into `buffer`, before `deadline`.
fn read_some(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    most: usize,
    deadline: Instant,
) -> Result<(), Response> {
    let timed_out = || Response::error(408, "the request did not arrive in time");
    let left = deadline
        .checked_duration_since(Instant::now())
        .filter(|left| !left.is_zero())
        .ok_or_else(timed_out)?;
    stream
        .set_read_timeout(Some(left))
        .map_err(|_| timed_out())?;
    let mut chunk = [0u8; 1024];
    let want = most.clamp(1, chunk.len());
    match stream.read(&mut chunk[..want]) {
        Ok(0) => Err(Response::error(400, "the connection closed mid-request")),
        Ok(n) => {
            buffer.extend_from_slice(&chunk[..n]);
            Ok(())
        }
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Err(timed_out())
        }
        Err(_) => Err(Response::error(400, "the connection failed mid-request")),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
