//! The network side of the tests that start a server (the dashboard's, a Prometheus
//! exporter, `nats-server`): a free port on 127.0.0.1, and one plain HTTP/1.1 exchange.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::time::Duration;

/// Runs `bind` on ports below the kernel's ephemeral range until one is free, and returns
/// what it bound. Port 0 (and every outgoing connection) takes ports from the ephemeral
/// range, so a port below it that a test lets go of stays free: nothing else in the suite
/// asks for it by number. A test that checks a closed port refuses connections needs that,
/// or another test's bind to port 0 may take the port and answer in its place.
pub fn outside_the_ephemeral_range<T>(mut bind: impl FnMut(u16) -> std::io::Result<T>) -> T {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768);
    let floor = 10_000.min(low / 2);
    let span = u32::from(low - floor);
    // Each call starts one port further on, so two tests in one process that each let
    // their port go (to hand it to a server they start) are not given the same one; and the
    // process id spares binaries run side by side a string of ports in use.
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let start = (std::process::id() + CALLS.fetch_add(1, Relaxed)) % span;
    for step in 0..span {
        let port = floor + u16::try_from((start + step) % span).unwrap();
        if let Ok(bound) = bind(port) {
            return bound;
        }
    }
    panic!("no free port in {floor}..{low}");
}

/// A port no one listens on now, for a server a test starts. It is below the ephemeral
/// range: a port from there could be taken, between this call and the server's bind (or
/// between a server's kill and its restart on the same port), by another test's bind to
/// port 0.
pub fn free_port() -> u16 {
    outside_the_ephemeral_range(|port| TcpListener::bind(("127.0.0.1", port)).map(|_| port))
}

/// One HTTP/1.1 exchange: status, head (lower-cased) and body, or the error of connecting,
/// writing or reading (a server not yet listening is refused). The body is read as far as
/// its `Content-Length` says (chromedriver may keep the connection open), else to the end.
pub fn try_http(addr: SocketAddr, raw: &[u8]) -> std::io::Result<(u16, String, Vec<u8>)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.write_all(raw)?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = stream.read(&mut chunk)?;
        assert!(n > 0, "no head in {:?}", String::from_utf8_lossy(&response));
        response.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(response[..end].to_vec())
        .unwrap()
        .to_ascii_lowercase();
    let status = head[9..12].parse().unwrap();
    let header = |name: &str| {
        head.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let mut body = response[end + 4..].to_vec();
    if let Some(length) = header("content-length") {
        let length: usize = length.parse().unwrap();
        while body.len() < length {
            let n = stream.read(&mut chunk)?;
            assert!(n > 0, "the body ended early");
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        stream.read_to_end(&mut body)?;
        if header("transfer-encoding") == Some("chunked") {
            body = unchunk(&body);
        }
    }
    Ok((status, head, body))
}

/// [`try_http`], failing the test on an error.
pub fn http(addr: SocketAddr, raw: &[u8]) -> (u16, String, Vec<u8>) {
    try_http(addr, raw).unwrap()
}

/// `GET path` with `Connection: close`: status and body as text.
pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let (status, _, body) = try_http(addr, raw.as_bytes())?;
    Ok((status, String::from_utf8(body).unwrap()))
}

fn unchunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line = chunked.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = std::str::from_utf8(&chunked[..line]).unwrap();
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&chunked[line + 2..line + 2 + size]);
        chunked = &chunked[line + 2 + size + 2..];
    }
}
