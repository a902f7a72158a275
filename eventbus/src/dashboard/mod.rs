//! The live page (feature `dashboard`): a small HTTP/1.1 server on a thread of its own
//! (`std::net`, a thread per connection, at most [`MAX_CONNECTIONS`] at once) serving one
//! page that shows every topic and subscription, with rates, mailbox depth against
//! capacity, a chart of each one's last minutes (`history.rs`), drops and dead letters (with
//! their messages), updated by polling `GET /api/state` every second; and a button per dead
//! letter that redelivers it ([`Bus::redeliver`]) with `POST /api/redeliver`.
//!
//! The page, its script and its style are in the crate (`include_str!`): no build step, no
//! CDN, no request leaves the machine. The script and style are inlined into the page (with a
//! nonce its `Content-Security-Policy` names), and the script finds the API beside the page's
//! own path, so the same page works at `/` on its own server and under a prefix
//! (`/admin/bus`) inside an application's router ([`service`]).
//!
//! # Who may read, who may redeliver
//!
//! Reading is open to whoever can reach the address, with a `Host` naming this server:
//! `localhost`, or the IP address the connection reached, with the server's port as a
//! browser writes it (a page of another site whose name was made to resolve here, DNS
//! rebinding, names that site). A redelivery changes the bus, so `POST /api/redeliver` must
//! also come from the very address the connection reached (the machine itself: bind to
//! `127.0.0.1`, the default in the examples, and nothing else can reach it), with an
//! `Origin` (if sent) of this server, and the token embedded in the page (a random 128-bit
//! value made per server, sent back in an `X-Eventbus-Token` header, which a cross-site
//! form cannot set). Anything else gets a 403.
//! Requests the server does not understand get a 4xx with a JSON `{"error": ...}`; nothing a
//! client sends makes it panic.

mod history;
mod http;
mod service;

pub use self::service::{service, DashboardService};

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use serde_json::{json, Value};

use self::history::History;
use self::http::{Request, Response};
use crate::bus::Bus;
use crate::dead_letter::DeadLetter;
use crate::error::RedeliverError;

/// Connections served at once; more get a 503 at once.
pub const MAX_CONNECTIONS: usize = 32;

/// The dead letters the page shows: the newest ones (the store may hold thousands).
pub const SHOWN_DEAD_LETTERS: usize = 100;

const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("style.css");

/// Serves the live page of `bus` at `addr` (`"127.0.0.1:9000"`; port 0 picks a free one,
/// see [`Dashboard::addr`]), until the returned handle is dropped.
///
/// The server does not keep the bus open: once the last `Bus` handle is dropped (or `close`
/// is called), the page shows the closed bus's final numbers, and redeliveries are refused.
///
/// # Errors
///
/// If `addr` does not resolve or cannot be bound (in use, say), or the server's thread
/// cannot be started.
///
/// # Examples
///
/// ```
/// use eventbus::Bus;
///
/// let bus = Bus::new();
/// let dashboard = eventbus::dashboard::serve(&bus, "127.0.0.1:0")?;
/// println!("open {}", dashboard.url());
/// # drop(dashboard);
/// # bus.close();
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve(bus: &Bus, addr: impl ToSocketAddrs) -> std::io::Result<Dashboard> {
    let listener = TcpListener::bind(addr)?;
    let addr = listener.local_addr()?;
    let (sampling, stopped) = crossbeam_channel::bounded(0);
    let shared = Arc::new(Shared {
        history: History::new(&bus.stats()),
        bus: bus.worker_handle(),
        token: token(),
        port: addr.port(),
        connections: AtomicUsize::new(0),
        draining: AtomicUsize::new(0),
        _sampling: Some(sampling),
    });
    {
        let shared = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("eventbus-dashboard-samples".into())
            .spawn(move || sample(&shared, &stopped))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let accepting = {
        let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("eventbus-dashboard".into())
            .spawn(move || accept(&listener, &shared, &stop))?
    };
    Ok(Dashboard {
        addr,
        stop,
        accepting: Some(accepting),
    })
}

/// The server [`serve`] started; dropping it (or [`shutdown`](Dashboard::shutdown)) stops
/// it.
pub struct Dashboard {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accepting: Option<JoinHandle<()>>,
}

impl Dashboard {
    /// The address it listens on (with the port chosen, when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's address, `http://127.0.0.1:9000/` say (the loopback address for a server
    /// bound to all of them: `0.0.0.0` is no address to browse, nor one a `Host` may name).
    pub fn url(&self) -> String {
        format!("http://{}/", reachable(self.addr))
    }

    /// Stops accepting connections and waits for the accepting thread; requests under way
    /// finish on their own threads (each within its read and write timeouts).
    pub fn shutdown(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        let Some(accepting) = self.accepting.take() else {
            return;
        };
        self.stop.store(true, SeqCst);
        // Wakes the blocking `accept` so it sees the flag.
        let _ = TcpStream::connect_timeout(&reachable(self.addr), Duration::from_secs(1));
        let _ = accepting.join();
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.halt();
    }
}

impl fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dashboard")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// An address to connect to that reaches a listener bound to `addr` (which may be
/// `0.0.0.0`).
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, addr.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, addr.port()).into(),
        _ => addr,
    }
}

/// What every connection's thread (or every call of a [`DashboardService`]) shares.
pub(crate) struct Shared {
    /// A handle that does not keep the bus open.
    bus: Bus,
    /// Embedded in the page; a redelivery must send it back.
    token: String,
    port: u16,
    /// Connections being served now.
    connections: AtomicUsize,
    /// Connections refused with a 503 whose input is being drained now.
    draining: AtomicUsize,
    /// The bus's recent counters: rates and charts.
    history: History,
    /// Held for the standalone server's sampling thread, which ends once this is dropped
    /// (with the last connection, after the server stops).
    _sampling: Option<Sender<()>>,
}

/// The standalone server's sampling thread: a sample of the stats every [`history::PERIOD`],
/// until the server's shared state is gone.
fn sample(shared: &Weak<Shared>, stopped: &Receiver<()>) {
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(history::PERIOD) {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let stats = shared.bus.stats();
        shared.history.record(Instant::now(), &stats);
    }
}

fn accept(listener: &TcpListener, shared: &Arc<Shared>, stop: &AtomicBool) {
    for stream in listener.incoming() {
        if stop.load(SeqCst) {
            return;
        }
        let Ok(stream) = stream else {
            // Out of descriptors, say: give the connections under way a moment to end.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if shared.connections.fetch_add(1, SeqCst) >= MAX_CONNECTIONS {
            shared.connections.fetch_sub(1, SeqCst);
            refuse_busy(shared, stream);
            continue;
        }
        let connection = {
            let shared = Arc::clone(shared);
            move || {
                serve_one(&shared, stream);
                shared.connections.fetch_sub(1, SeqCst);
            }
        };
        if std::thread::Builder::new()
            .name("eventbus-dashboard-conn".into())
            .spawn(connection)
            .is_err()
        {
            shared.connections.fetch_sub(1, SeqCst);
        }
    }
}

/// Answers a connection over the limit with a 503 written at once: this is the accepting
/// thread, which must never wait on a client (the connection after this one may be a
/// request it can serve). The client's input, if it sends any, is drained on a thread of
/// its own, as many at once as there are connection slots; past that the connection is
/// closed undrained, and its client may see a reset in place of the 503.
fn refuse_busy(shared: &Arc<Shared>, mut stream: TcpStream) {
    let busy = Response::error(503, "too many connections; try again");
    if busy.write_at_once(&mut stream).is_err() {
        return;
    }
    if shared.draining.fetch_add(1, SeqCst) >= MAX_CONNECTIONS {
        shared.draining.fetch_sub(1, SeqCst);
        return;
    }
    let drain = {
        let shared = Arc::clone(shared);
        move || {
            http::linger(&mut stream);
            shared.draining.fetch_sub(1, SeqCst);
        }
    };
    if std::thread::Builder::new()
        .name("eventbus-dashboard-busy".into())
        .spawn(drain)
        .is_err()
    {
        shared.draining.fetch_sub(1, SeqCst);
    }
}

/// Reads one request, answers it, closes the connection.
fn serve_one(shared: &Shared, mut stream: TcpStream) {
    let response = match http::read_request(&mut stream) {
        Err(response) => response,
        Ok(request) => {
            let reached = Reached::Connection {
                stream: &stream,
                port: shared.port,
            };
            let response = catch_unwind(AssertUnwindSafe(|| route(shared, &reached, &request)))
                .unwrap_or_else(|_| Response::error(500, "the server failed on this request"));
            // Whatever the answer to a HEAD, it goes without its body.
            if request.method == "HEAD" {
                response.head_only()
            } else {
                response
            }
        }
    };
    let _ = response.write_to(&mut stream);
}

/// How a request reached the page: over a connection of the dashboard's own server, or
/// through an application's router, which does not say where the connection came from.
pub(crate) enum Reached<'a> {
    Connection {
        stream: &'a TcpStream,
        port: u16,
    },
    /// Through [`DashboardService`]; `hosts` are the names it was told to answer to, beside
    /// `localhost` and IP addresses.
    Mounted {
        hosts: &'a [String],
    },
}

pub(crate) fn route(shared: &Shared, reached: &Reached<'_>, request: &Request) -> Response {
    let allow = |methods: &str| {
        Response::error(405, &format!("{} takes {methods}", request.path))
            .with_header("Allow", methods)
    };
    // A browser names the host it thinks it reached: a page of another site that made its
    // name resolve here (DNS rebinding) names that site, and must not read the page (its
    // token) or the state.
    match request.header("Host") {
        Err(refused) => return refused,
        Ok(Some(host)) if !is_this_server(host, reached) => {
            return Response::error(403, "the Host header does not name this server")
        }
        // RFC 9112, 3.2: an HTTP/1.1 request without Host is a 400.
        Ok(None) if request.version == "HTTP/1.1" => {
            return Response::error(400, "an HTTP/1.1 request needs a Host header")
        }
        Ok(_) => {}
    }
    // HEAD is GET without the body (RFC 9110 requires it of a server's GET resources);
    // `serve_one` leaves the body out.
    let method = match request.method.as_str() {
        "HEAD" => "GET",
        method => method,
    };
    match (request.path.as_str(), method) {
        ("/", "GET") => {
            // A new nonce per page: the inlined script and style are the only ones it runs.
            let nonce = token();
            let policy = format!(
                "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
                 connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
                 frame-ancestors 'none'"
            );
            Response::new(200, "text/html; charset=utf-8", page(&shared.token, &nonce))
                .with_header("Content-Security-Policy", policy)
        }
        ("/app.js", "GET") => Response::new(200, "text/javascript; charset=utf-8", SCRIPT),
        ("/style.css", "GET") => Response::new(200, "text/css; charset=utf-8", STYLE),
        ("/api/state", "GET") => Response::new(200, "application/json", state(shared).to_string()),
        ("/api/redeliver", "POST") => match allowed(shared, reached, request) {
            Err(refused) => refused,
            Ok(()) => redeliver(&shared.bus, &request.body),
        },
        ("/" | "/app.js" | "/style.css" | "/api/state", _) => allow("GET, HEAD"),
        ("/api/redeliver", _) => allow("POST"),
        _ => Response::error(404, &format!("nothing at {}", request.path)),
    }
}

/// The page, with this server's token, and its script and style inlined under `nonce`.
fn page(token: &str, nonce: &str) -> String {
    PAGE.replace("{{TOKEN}}", token)
        .replace("{{NONCE}}", nonce)
        .replace("{{STYLE}}", STYLE)
        .replace("{{SCRIPT}}", SCRIPT)
}

/// A token no one can guess from outside the process: two hashes with `RandomState`'s keys,
/// which std seeds from the operating system's randomness.
fn token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (0..2u8)
        .map(|half| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(nanos);
            hasher.write_u32(std::process::id());
            hasher.write_u8(half);
            format!("{:016x}", hasher.finish())
        })
        .collect()
}

/// Whether a request may change the bus: from the address it reached (on the dashboard's own
/// server), to this server by name, from this server's page, with its token.
///
/// Through an application's router the connection's addresses are not known: there the
/// token (which only a page this service served carries), a `Host` naming the application
/// and an `Origin` (if sent) of that same host decide; the application's own
/// authentication, in front of the mount point, decides who reaches the page at all.
fn allowed(shared: &Shared, reached: &Reached<'_>, request: &Request) -> Result<(), Response> {
    let forbidden = |why: &str| Err(Response::error(403, why));
    if let Reached::Connection { stream, .. } = reached {
        match (stream.peer_addr(), stream.local_addr()) {
            (Ok(peer), Ok(local)) if same_ip(peer.ip(), local.ip()) => {}
            _ => {
                return forbidden(
                    "changes are taken only from the address the dashboard is bound to",
                )
            }
        }
    }
    let Some(host) = request.header("Host")? else {
        return forbidden("a Host header is required");
    };
    if !is_this_server(host, reached) {
        return forbidden("the Host header does not name this server");
    }
    if let Some(origin) = request.header("Origin")? {
        let this = match reached {
            Reached::Connection { .. } => origin
                .strip_prefix("http://")
                .is_some_and(|rest| is_this_server(rest, reached)),
            // The page's own origin: the host the request names, by either scheme (a proxy in
            // front may end TLS).
            Reached::Mounted { .. } => origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .is_some_and(|rest| rest.eq_ignore_ascii_case(host)),
        };
        if !this {
            return forbidden("the request does not come from this dashboard's page");
        }
    }
    let token = request.header("X-Eventbus-Token")?.unwrap_or_default();
    if !same_token(token.as_bytes(), shared.token.as_bytes()) {
        return forbidden("a missing or wrong X-Eventbus-Token: reload the page");
    }
    Ok(())
}

/// The same address, an IPv4 one mapped into IPv6 or not.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    let canonical = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    };
    canonical(a) == canonical(b)
}

/// Whether `host` (`name:port`, from a `Host` or an `Origin`) names this server.
///
/// On the dashboard's own server, as `stream` reached it: `localhost`, or the IP address the
/// connection reached, with this server's port written as a browser writes it (digits, no
/// sign, no leading zero; no port is 80). Any other name could be an attacker's, made to
/// resolve here (DNS rebinding); any other address is another machine's.
///
/// Through an application's router, whose port and addresses the page does not know:
/// `localhost`, an IP address, or a name the application listed
/// ([`DashboardService::allow_host`]), on any port.
fn is_this_server(host: &str, reached: &Reached<'_>) -> bool {
    let (name, given) = match host.rsplit_once(':') {
        // Not the colon of a bracketed IPv6 address without a port.
        Some((name, given)) if !host.ends_with(']') => (name, given),
        _ => (host, "80"),
    };
    let ip = match name
        .strip_prefix('[')
        .and_then(|name| name.strip_suffix(']'))
    {
        Some(v6) => v6.parse::<Ipv6Addr>().map(IpAddr::V6),
        None => name.parse::<Ipv4Addr>().map(IpAddr::V4),
    };
    match reached {
        Reached::Connection { stream, port } => {
            if given != port.to_string() {
                return false;
            }
            if name.eq_ignore_ascii_case("localhost") {
                return true;
            }
            match (ip, stream.local_addr()) {
                (Ok(ip), Ok(reached)) => same_ip(ip, reached.ip()),
                _ => false,
            }
        }
        Reached::Mounted { hosts } => {
            let port_ok = given.parse::<u16>().is_ok_and(|p| p.to_string() == given);
            port_ok
                && (name.eq_ignore_ascii_case("localhost")
                    || ip.is_ok()
                    || hosts.iter().any(|h| h.eq_ignore_ascii_case(name)))
        }
    }
}

/// Compares without stopping at the first difference.
fn same_token(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

/// What the page shows: the stats with rates and charts (see `history.rs`), and the newest
/// dead letters, each with the id of the subscription it is for and its message as text;
/// and how many older letters are not shown.
fn state(shared: &Shared) -> Value {
    let bus = &shared.bus;
    let stats = bus.stats();
    let at = Instant::now();
    // Rates from the samples before this one; then this one is kept, if one is due.
    let annotated = shared.history.annotate(at, &stats);
    shared.history.record(at, &stats);
    let letters = bus.dead_letters();
    let shown: Vec<Value> = letters
        .iter()
        .rev()
        .take(SHOWN_DEAD_LETTERS)
        .map(|letter| {
            let mut value = serde_json::to_value(letter).unwrap_or(Value::Null);
            if let Value::Object(fields) = &mut value {
                fields.insert("subscription".into(), letter.subscription().into());
                fields.insert("message".into(), json!(message_text(bus, letter)));
            }
            value
        })
        .collect();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    json!({
        "now_ms": now,
        "closed": bus.is_closed(),
        "stats": annotated,
        "dead_letters": shown,
        "dead_letters_not_shown": letters.len() - shown.len(),
    })
}

/// A letter's message as text: its JSON when its topic's type is `Serialize`, else its
/// `Debug`; the bytes of an import that could not be decoded (feature `nats`), as text.
fn message_text(bus: &Bus, letter: &DeadLetter) -> Option<String> {
    bus.show_dead_letter(letter).or_else(|| {
        let bytes = letter.payload::<Vec<u8>>()?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    })
}

/// `POST /api/redeliver` with `{"subscription": id, "topic": name, "seq": n}`, as
/// `/api/state` shows each letter. One subscription (an observer) may hold letters of
/// several topics with one seq, so the topic is part of a letter's identity; a body without
/// it (as the page sent before) is taken when it matches one letter alone.
fn redeliver(bus: &Bus, body: &[u8]) -> Response {
    let bad = |why: &str| Response::error(400, why);
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
        return bad(
            r#"the body must be JSON: {"subscription": <id>, "topic": <name>, "seq": <n>}"#,
        );
    };
    let (Some(subscription), Some(seq)) = (
        fields.get("subscription").and_then(Value::as_u64),
        fields.get("seq").and_then(Value::as_u64),
    ) else {
        return bad(r#"the body needs "subscription" and "seq", whole numbers"#);
    };
    let topic = match fields.get("topic") {
        None => None,
        Some(Value::String(topic)) => Some(topic.as_str()),
        Some(_) => return bad(r#""topic" must be a topic's name"#),
    };
    let mut matching: Vec<_> = bus
        .dead_letters()
        .into_iter()
        .filter(|l| l.subscription() == subscription && l.seq() == seq)
        .filter(|l| topic.map_or(true, |topic| l.topic() == topic))
        .collect();
    if matching.len() > 1 {
        return bad(
            r#"letters of several topics have this "subscription" and "seq": send its "topic" too"#,
        );
    }
    let Some(letter) = matching.pop() else {
        return Response::error(404, &RedeliverError::NotFound.to_string());
    };
    let which = format!("{} #{}", letter.topic(), letter.seq());
    match bus.redeliver(&letter) {
        Ok(()) => {
            let message = format!("{which} redelivered to {}", letter.subscriber());
            Response::new(
                200,
                "application/json",
                json!({ "ok": message }).to_string(),
            )
        }
        Err(RedeliverError::NotFound) => {
            Response::error(404, &RedeliverError::NotFound.to_string())
        }
        // Named, so the page's status says which letter it was about.
        Err(error) => Response::error(
            409,
            &format!(
                "{which} not redelivered to {}: {error}",
                letter.subscriber()
            ),
        ),
    }
}
