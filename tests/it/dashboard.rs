//! Feature `dashboard`: the live page in a real browser (headless Chromium driven through
//! chromedriver, over W3C WebDriver), and the server's answers to bad requests.
//!
//! Needs `/usr/bin/chromium` and `chromedriver` (Debian's `chromium` and `chromium-driver`);
//! fails, never skips, without them. `EVENTBUS_DASHBOARD_SCREENSHOT=path.png` keeps a
//! screenshot of the page.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eventbus::{AnyMessage, Bus, Message, Options, Overflow, Topic};
use serde_json::{json, Value};

use crate::support;
use support::net::{free_port, http, outside_the_ephemeral_range};

#[derive(Topic, Debug)]
#[topic(name = "orders.placed")]
struct OrderPlaced {
    id: u32,
}

#[derive(Topic, Debug)]
#[topic(name = "prices.tick")]
struct PriceTick(u32);

#[derive(Topic, Debug)]
#[topic(name = "shop.a")]
struct ShopA;

#[derive(Topic, Debug)]
#[topic(name = "shop.b")]
struct ShopB;

fn request(method: &str, addr: SocketAddr, path: &str, body: Option<&Value>) -> (u16, Value) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let raw = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, _, body) = http(addr, raw.as_bytes());
    let value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into()))
    };
    (status, value)
}

/// chromedriver, stopped when dropped.
pub(crate) struct Driver {
    child: Child,
    addr: SocketAddr,
    session: Option<String>,
    _profile: TempDir,
}

struct TempDir(std::path::PathBuf);

impl TempDir {
    /// A directory of this process's own, and of this call's: two browsers started by two
    /// tests at once must not share (nor remove) one profile.
    fn new(name: &str) -> TempDir {
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MADE.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("eventbus-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Driver {
    /// Starts chromedriver on a free port and a headless Chromium session.
    pub(crate) fn start() -> Driver {
        for binary in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            assert!(
                std::path::Path::new(binary).exists(),
                "{binary} is missing: `apt-get install -y chromium chromium-driver` (.ci/run does)"
            );
        }
        let port = free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts (Debian's chromium-driver)");
        let profile = TempDir::new("chromium-profile");
        let mut driver = Driver {
            child,
            addr: ([127, 0, 0, 1], port).into(),
            session: None,
            _profile: profile,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if TcpStream::connect(driver.addr).is_ok() {
                let (status, value) = request("GET", driver.addr, "/status", None);
                if status == 200 && value["value"]["ready"] == json!(true) {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "chromedriver did not get ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1400,1000",
                    format!("--user-data-dir={}", driver._profile.0.display()),
                ],
            },
        }}});
        let (status, value) = request("POST", driver.addr, "/session", Some(&capabilities));
        assert_eq!(status, 200, "new session: {value}");
        driver.session = Some(value["value"]["sessionId"].as_str().unwrap().to_owned());
        driver
    }

    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let session = self.session.as_deref().unwrap();
        let path = format!("/session/{session}{path}");
        let body = body.or_else(|| (method == "POST").then(|| json!({})));
        let (status, value) = request(method, self.addr, &path, body.as_ref());
        assert_eq!(status, 200, "{method} {path}: {value}");
        value["value"].clone()
    }

    pub(crate) fn go(&self, url: &str) {
        self.command("POST", "/url", Some(json!({ "url": url })));
    }

    /// The text of each element `css` matches now, read in one step in the page (the page
    /// redraws every second, so element references go stale).
    pub(crate) fn texts(&self, css: &str) -> Vec<String> {
        let script =
            "return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent)";
        let found = self.command(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": [css]})),
        );
        found
            .as_array()
            .unwrap()
            .iter()
            .map(|text| text.as_str().unwrap().to_owned())
            .collect()
    }

    /// Waits (the page polls every second) until the elements `css` matches read `want`.
    pub(crate) fn wait_for(&self, css: &str, want: &[&str]) {
        self.wait_until(css, |texts| texts == want);
    }

    /// Waits until the texts of the elements `css` matches pass `done`, and returns them.
    pub(crate) fn wait_until(&self, css: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let texts = self.texts(css);
            if done(&texts) {
                return texts;
            }
            assert!(Instant::now() < deadline, "`{css}` reads {texts:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Clicks the first element `css` matches, as a user would (found again if the page
    /// redrew it in between).
    fn click(&self, css: &str) {
        self.click_using("css selector", css);
    }

    /// [`Driver::click`] with another WebDriver locator strategy (`"xpath"`, say).
    fn click_using(&self, using: &str, css: &str) {
        let session = self.session.as_deref().unwrap();
        for _ in 0..20 {
            let found = self.command(
                "POST",
                "/element",
                Some(json!({"using": using, "value": css})),
            );
            let id = found.as_object().unwrap().values().next().unwrap();
            let path = format!("/session/{session}/element/{}/click", id.as_str().unwrap());
            let (status, value) = request("POST", self.addr, &path, Some(&json!({})));
            match status {
                200 => return,
                404 if value["value"]["error"] == "stale element reference" => continue,
                _ => panic!("click on `{css}`: {value}"),
            }
        }
        panic!("`{css}` went stale every time");
    }

    fn screenshot(&self) -> Vec<u8> {
        let encoded = self.command("GET", "/screenshot", None);
        base64(encoded.as_str().unwrap())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = std::panic::catch_unwind(|| {
                request("DELETE", self.addr, &format!("/session/{session}"), None)
            });
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Standard base64, as WebDriver sends screenshots.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let clean: Vec<u8> = text.bytes().filter(|&c| c != b'=' && c != b'\n').collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &c)| n | u32::from(value(c)) << (18 - 6 * i));
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

#[test]
fn the_page_shows_the_bus_live_and_its_button_redelivers_a_dead_letter() {
    let bus = Bus::builder().build();
    let fixed = Arc::new(AtomicBool::new(false));
    let (billed_tx, billed) = mpsc::channel();
    {
        let fixed = Arc::clone(&fixed);
        bus.subscribe::<OrderPlaced>(
            Options::default()
                .name("billing")
                .retries(1)
                .backoff(Duration::ZERO),
            move |m: &Message<OrderPlaced>| {
                if m.id == 3 && !fixed.load(Ordering::SeqCst) {
                    return Err(format!("card declined for order {}", m.id));
                }
                billed_tx.send((m.seq(), m.id)).unwrap();
                Ok(())
            },
        );
    }
    let (hold, wait) = mpsc::channel::<()>();
    let (started, busy) = mpsc::channel();
    bus.subscribe::<PriceTick>(
        Options::default()
            .name("ticker")
            .capacity(4)
            .overflow(Overflow::DropNewest),
        move |m: &Message<PriceTick>| {
            if m.0 == 0 {
                started.send(()).unwrap();
                let _ = wait.recv();
            }
        },
    );
    for id in 1..=5 {
        bus.publish(OrderPlaced { id }).unwrap();
    }
    bus.publish(PriceTick(0)).unwrap();
    busy.recv().unwrap(); // ticker holds tick 0; its mailbox of 4 takes 1..=4, drops 5 and 6
    for tick in 1..=6 {
        bus.publish(PriceTick(tick)).unwrap();
    }
    let billed_first: Vec<_> = (0..4).map(|_| billed.recv().unwrap()).collect();
    assert_eq!(billed_first, [(0, 1), (1, 2), (3, 4), (4, 5)]);

    let dashboard = eventbus::dashboard::serve(&bus, "127.0.0.1:0").unwrap();
    let driver = Driver::start();
    driver.go(&dashboard.url());

    driver.wait_for(
        "#topics tbody tr td.name",
        &["orders.placed", "prices.tick"],
    );
    driver.wait_for("#topics tbody tr td.published", &["5", "7"]);
    driver.wait_for("#subscriptions tbody tr td.name", &["billing", "ticker"]);
    driver.wait_for("#subscriptions tbody tr td.received", &["5", "7"]);
    driver.wait_for("#subscriptions tbody tr td.delivered", &["4", "0"]);
    driver.wait_for("#subscriptions tbody tr td.dead", &["1", "0"]);
    driver.wait_for("#subscriptions tbody tr td.dropped", &["0", "2"]);
    driver.wait_for("#subscriptions tbody tr td.failed", &["2", "0"]);
    driver.wait_for("#subscriptions tbody tr td.mailbox", &["0 / 1024", "4 / 4"]);
    driver.wait_for(
        "#dead-letters tbody tr td.error",
        &["card declined for order 3"],
    );
    driver.wait_for("#dead-letters tbody tr td.seq", &["2"]);
    driver.wait_for("#dead-letters tbody tr td.subscriber", &["billing"]);

    if let Ok(path) = std::env::var("EVENTBUS_DASHBOARD_SCREENSHOT") {
        std::fs::write(&path, driver.screenshot()).unwrap();
    }
    let png = driver.screenshot();
    assert_eq!(
        &png[..8],
        b"\x89PNG\r\n\x1a\n",
        "a screenshot of the page is a PNG"
    );

    fixed.store(true, Ordering::SeqCst);
    driver.click("#dead-letters tbody tr button.republish");
    assert_eq!(
        billed.recv_timeout(Duration::from_secs(20)).unwrap(),
        (2, 3),
        "the button redelivered order 3, its seq kept, to billing"
    );
    driver.wait_for("#status", &["orders.placed #2 redelivered to billing"]);
    driver.wait_for("#dead-letters tbody tr", &[]);
    driver.wait_for("#subscriptions tbody tr td.delivered", &["5", "0"]);
    driver.wait_for("#subscriptions tbody tr td.received", &["6", "7"]);
    assert!(bus.dead_letters().is_empty());
    assert_eq!(
        bus.stats().topics[0].published,
        5,
        "a redelivery publishes nothing"
    );

    drop(hold);
    bus.close();
    driver.wait_for("#bus-state", &["closed"]);
    driver.wait_for("#subscriptions tbody tr td.mailbox", &["0 / 1024", "0 / 4"]);
}

/// A small bus with one dead letter, and its dashboard.
fn served() -> (Bus, eventbus::dashboard::Dashboard, String) {
    let bus = Bus::builder().build();
    bus.subscribe::<OrderPlaced>(
        Options::default().name("billing"),
        |_: &Message<OrderPlaced>| Err::<(), _>("no"),
    );
    bus.publish(OrderPlaced { id: 1 }).unwrap();
    while bus.dead_letters().is_empty() {
        std::thread::yield_now();
    }
    let dashboard = eventbus::dashboard::serve(&bus, "127.0.0.1:0").unwrap();
    let token = token_of(dashboard.addr());
    (bus, dashboard, token)
}

/// The token embedded in the page the dashboard at `addr` serves.
fn token_of(addr: SocketAddr) -> String {
    let (status, head, page) = http(
        addr,
        format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html"), "{head}");
    let page = String::from_utf8(page).unwrap();
    let token = page
        .split("name=\"eventbus-token\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 32, "a 128-bit token in hex");
    token
}

fn post(addr: SocketAddr, host: &str, headers: &str, body: &str) -> (u16, Value) {
    let raw = format!(
        "POST /api/redeliver HTTP/1.1\r\nHost: {host}\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, _, body) = http(addr, raw.as_bytes());
    (status, serde_json::from_slice(&body).unwrap())
}

#[test]
fn a_redelivery_needs_the_token_this_host_and_a_well_formed_body() {
    let (bus, dashboard, token) = served();
    let addr = dashboard.addr();
    let host = addr.to_string();
    let body = r#"{"subscription": 1, "seq": 0}"#;
    let with_token = format!("X-Eventbus-Token: {token}\r\n");

    let refusals = [
        (post(addr, &host, "", body), 403, "X-Eventbus-Token"),
        (
            post(addr, &host, "X-Eventbus-Token: 00\r\n", body),
            403,
            "X-Eventbus-Token",
        ),
        (
            post(addr, "evil.example:80", &with_token, body),
            403,
            "Host",
        ),
        (
            post(
                addr,
                &format!("evil.example:{}", addr.port()),
                &with_token,
                body,
            ),
            403,
            "Host",
        ),
        (
            post(
                addr,
                &host,
                &format!("{with_token}Origin: http://evil.example\r\n"),
                body,
            ),
            403,
            "page",
        ),
        (post(addr, &host, &with_token, "not json"), 400, "JSON"),
        (
            post(addr, &host, &with_token, r#"{"seq": 0}"#),
            400,
            "subscription",
        ),
        (
            post(
                addr,
                &host,
                &with_token,
                r#"{"subscription": -1, "seq": 0}"#,
            ),
            400,
            "whole",
        ),
        (
            post(addr, &host, &with_token, r#"{"subscription": 1, "seq": 9}"#),
            404,
            "no longer kept",
        ),
    ];
    for ((status, answer), want, says) in refusals {
        assert_eq!(status, want, "{answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(says), "{error:?} should say {says:?}");
    }
    assert_eq!(bus.dead_letters().len(), 1, "nothing was redelivered");

    let origin = format!("{with_token}Origin: http://{host}\r\n");
    let (status, answer) = post(addr, &host, &origin, body);
    assert_eq!(
        (status, answer["ok"].as_str()),
        (200, Some("orders.placed #0 redelivered to billing"))
    );
    // It fails again ("no"): a new dead letter, once the worker is done with it.
    let (status, answer) = post(addr, &host, &with_token, body);
    assert!(status == 200 || status == 404, "{status} {answer}");

    bus.close();
    let letters = bus.dead_letters();
    let body = format!(r#"{{"subscription": 1, "seq": {}}}"#, letters[0].seq());
    let (status, answer) = post(addr, &host, &with_token, &body);
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("closed"),
        "{answer}"
    );
}

#[test]
fn bad_requests_get_a_4xx_with_a_message() {
    let (_bus, dashboard, _token) = served();
    let addr = dashboard.addr();
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (
            format!("GET /nothing HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes(),
            404,
        ),
        (
            format!("DELETE / HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes(),
            405,
        ),
        (
            format!("GET /api/redeliver HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes(),
            405,
        ),
        // Another site's name (DNS rebinding): neither the page (its token) nor the state.
        (
            b"GET / HTTP/1.1\r\nHost: attacker.example\r\n\r\n".to_vec(),
            403,
        ),
        (
            b"GET /api/state HTTP/1.1\r\nHost: attacker.example:80\r\n\r\n".to_vec(),
            403,
        ),
        (b"GARBAGE\r\n\r\n".to_vec(), 400),
        // Not HTTP/1.x, nor a 5xx: the client's request is what is wrong.
        (b"GET / HTTP/2.0\r\n\r\n".to_vec(), 400),
        // HTTP/2's connection preface, from a client that assumed HTTP/2.
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(), 400),
        (b"GET noslash HTTP/1.1\r\n\r\n".to_vec(), 400),
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n".to_vec(), 400),
        (b"GET / HTTP/1.1\r\n\xff\xfe: x\r\n\r\n".to_vec(), 400),
        (
            b"POST /api/redeliver HTTP/1.1\r\nContent-Length: x\r\n\r\n".to_vec(),
            400,
        ),
        (
            b"POST /api/redeliver HTTP/1.1\r\nContent-Length: 99999\r\n\r\n".to_vec(),
            413,
        ),
        // A body is taken only with its length given: 411 Length Required.
        (
            b"POST /api/redeliver HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
            411,
        ),
        (
            b"POST /api/redeliver HTTP/1.1\r\nTransfer-Encoding: x\r\nContent-Length: 2\r\n\r\n{}"
                .to_vec(),
            411,
        ),
        (
            b"POST /api/redeliver HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
                .to_vec(),
            400,
        ),
        (
            format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(9000)).into_bytes(),
            431,
        ),
        (
            format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\nGET / HTTP/1.1\r\n\r\n").into_bytes(),
            400,
        ),
    ];
    for (raw, want) in cases {
        let (status, _, body) = http(addr, &raw);
        let shown = String::from_utf8_lossy(&raw[..raw.len().min(60)]).into_owned();
        assert_eq!(
            status,
            want,
            "{shown:?}: {}",
            String::from_utf8_lossy(&body)
        );
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert!(!answer["error"].as_str().unwrap().is_empty(), "{shown:?}");
    }

    // A client that hangs up mid-request gets nothing, and the server goes on.
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(b"GET / HTTP/1.1\r\nHost").unwrap();
    drop(half);
    let (status, _, _) = http(
        addr,
        format!("GET /api/state HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
    );
    assert_eq!(status, 200);

    let (status, state) = request("GET", addr, "/api/state", None);
    assert_eq!(status, 200);
    assert_eq!(state["stats"]["subscriptions"][0]["name"], "billing");
    assert_eq!(state["dead_letters"][0]["error"], "no");
    assert_eq!(state["dead_letters"][0]["subscription"], 1);
    for asset in ["/app.js", "/style.css"] {
        let raw = format!("GET {asset} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let (status, _, body) = http(addr, raw.as_bytes());
        assert_eq!(status, 200, "{asset}");
        assert!(!body.is_empty());
    }
}

#[test]
fn dropping_the_dashboard_stops_the_server() {
    let bus = Bus::builder().build();
    // Not port 0: a port the kernel hands out could go, once let go of, to a bind to port 0
    // in another test (`free_port`, say), and that listener would accept the connections
    // below in this one's place.
    let dashboard =
        outside_the_ephemeral_range(|port| eventbus::dashboard::serve(&bus, ("127.0.0.1", port)));
    let addr = dashboard.addr();
    assert_eq!(request("GET", addr, "/api/state", None).0, 200);
    drop(dashboard);
    // The listener is closed when `drop` returns, but a process that another test spawns at
    // that moment (chromedriver) holds a copy of every descriptor from its fork until its
    // exec, so a connection may still land in the socket's backlog, unanswered, and be reset
    // when the copy closes. What the test holds to: nothing answers, and soon nothing accepts.
    support::until("a dropped dashboard's address refuses connections", || {
        let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
            return true;
        };
        let _ = stream.write_all(b"GET /api/state HTTP/1.1\r\n\r\n");
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        assert!(answer.is_empty(), "a dropped dashboard answered");
        false
    });
    let error = eventbus::dashboard::serve(&bus, "not an address").unwrap_err();
    assert!(!error.to_string().is_empty());
}

/// Reads what the server sends until it closes: status and everything after the status line.
fn answer(stream: &mut TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let status = raw.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, raw)
}

#[test]
fn over_the_connection_limit_a_503_comes_at_once_whatever_the_others_send() {
    use eventbus::dashboard::MAX_CONNECTIONS;
    let bus = Bus::builder().build();
    // No connection before these (`served` makes one, which could still hold its slot
    // for a moment after its answer): every slot goes to a client that sends nothing (each
    // would hold it for the 10 s read deadline). The server accepts in the order of
    // connecting, so the connections made after these are the ones over the limit.
    let dashboard = eventbus::dashboard::serve(&bus, "127.0.0.1:0").unwrap();
    let addr = dashboard.addr();
    let mut holders: Vec<TcpStream> = (0..MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    // Over the limit and silent too: before the fix, the accept thread waited on each for
    // the rest of a request (a second, to drain its input) before it accepted the next.
    const SILENT: usize = 8;
    let mut silent: Vec<TcpStream> = (0..SILENT)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let asked = Instant::now();
    let (status, _, body) = http(
        addr,
        format!("GET /api/state HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
    );
    let waited = asked.elapsed();
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
    // No event marks "answered without waiting on the silent ones" (the old server got
    // there too, only late), so this compares against time: waiting on each silent
    // connection took a second apiece, 8 s for these; a 503 written at once takes
    // milliseconds. Half the old wait leaves room for the slowest machine.
    assert!(
        waited < Duration::from_secs(4),
        "the 503 took {waited:?}: the accept thread waited on the silent connections"
    );
    // Each silent connection has its 503 already, without having sent a byte.
    for stream in &mut silent {
        let (status, raw) = answer(stream);
        assert_eq!(status, 503, "{raw}");
    }
    // A slot freed is a slot served: the next request gets the state.
    drop(holders.pop());
    support::until("a freed slot serves a request", || {
        let (status, _, _) = http(
            addr,
            format!("GET /api/state HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
        );
        assert!(status == 503 || status == 200, "{status}");
        status == 200
    });
}

/// `GET /api/state` whose head (request line, headers and the blank line that ends them) is
/// `len` bytes long.
fn head_of(addr: SocketAddr, len: usize) -> Vec<u8> {
    let start = format!("GET /api/state HTTP/1.1\r\nHost: {addr}\r\nX-Pad: ");
    let pad = len - start.len() - "\r\n\r\n".len();
    format!("{start}{}\r\n\r\n", "a".repeat(pad)).into_bytes()
}

#[test]
fn the_head_limit_gives_one_answer_however_the_head_arrives() {
    // README: 8 KiB heads, the blank line that ends them included.
    const MAX_HEAD: usize = 8 * 1024;
    let (_bus, dashboard, _token) = served();
    let addr = dashboard.addr();
    for len in MAX_HEAD - 2..=MAX_HEAD + 4 {
        let raw = head_of(addr, len);
        let want = if len <= MAX_HEAD { 200 } else { 431 };
        let (status, _, _) = http(addr, &raw);
        assert_eq!(status, want, "a head of {len} bytes in one write");

        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        stream.write_all(&raw[..8000]).unwrap();
        // Not a synchronisation: nothing the server does can be seen before it answers, and
        // the answer must not depend on how the head arrives. The pause only gives the
        // server time to read the first part alone (as a slow client's head arrives); if it
        // has not, this case is the one-write case again, and passes either way.
        std::thread::sleep(Duration::from_millis(100));
        stream.write_all(&raw[8000..]).unwrap();
        let (status, raw) = answer(&mut stream);
        assert_eq!(status, want, "a head of {len} bytes in two writes: {raw}");
    }
}

#[test]
fn only_a_host_naming_this_server_exactly_is_served_and_http_1_1_must_name_one() {
    let (bus, dashboard, token) = served();
    let addr = dashboard.addr();
    assert_eq!(addr.ip().to_string(), "127.0.0.1");
    let port = addr.port();
    // `extra`: more headers, then the blank line and a body.
    let get = |version: &str, host: Option<&str>, extra: &str| {
        let host = host
            .map(|host| format!("Host: {host}\r\n"))
            .unwrap_or_default();
        let extra = if extra.is_empty() { "\r\n" } else { extra };
        let raw = format!("GET /api/state {version}\r\n{host}{extra}");
        let (status, _, body) = http(addr, raw.as_bytes());
        (status, String::from_utf8_lossy(&body).into_owned())
    };
    let cases = [
        // The address the connection reached, or localhost, with the port as a browser
        // writes it.
        ((Some(format!("127.0.0.1:{port}")), "HTTP/1.1", ""), 200),
        ((Some(format!("localhost:{port}")), "HTTP/1.1", ""), 200),
        ((Some(format!("LocalHost:{port}")), "HTTP/1.1", ""), 200),
        // HTTP/1.0 had no Host; HTTP/1.1 requires it (RFC 9112, 3.2: a 400 without).
        ((None, "HTTP/1.0", ""), 200),
        ((None, "HTTP/1.1", ""), 400),
        // The port with a sign or leading zeros is not this server's port as written.
        ((Some(format!("127.0.0.1:+{port}")), "HTTP/1.1", ""), 403),
        ((Some(format!("127.0.0.1:0{port}")), "HTTP/1.1", ""), 403),
        ((Some(format!("localhost:00{port}")), "HTTP/1.1", ""), 403),
        // An IP address names this server only if it is the one the connection reached.
        ((Some(format!("10.1.2.3:{port}")), "HTTP/1.1", ""), 403),
        ((Some(format!("127.0.0.2:{port}")), "HTTP/1.1", ""), 403),
        ((Some(format!("[::1]:{port}")), "HTTP/1.1", ""), 403),
        (
            (Some(format!("[::ffff:10.1.2.3]:{port}")), "HTTP/1.1", ""),
            403,
        ),
        (
            (Some(format!("[::ffff:127.0.0.1]:{port}")), "HTTP/1.1", ""),
            200,
        ),
        // Content-Length is digits alone.
        (
            (
                Some(format!("127.0.0.1:{port}")),
                "HTTP/1.1",
                "Content-Length: +2\r\n\r\nab",
            ),
            400,
        ),
    ];
    let mut wrong = Vec::new();
    for ((host, version, extra), want) in cases {
        let (status, body) = get(version, host.as_deref(), extra);
        if status != want {
            wrong.push(format!(
                "{version} Host {host:?} {extra:?}: {status}, not {want} ({:.80})",
                body
            ));
        }
    }
    // The same rule guards a redelivery, Host and Origin alike.
    let body = r#"{"subscription": 1, "seq": 0}"#;
    let with_token = format!("X-Eventbus-Token: {token}\r\n");
    for (host, origin) in [
        (format!("127.0.0.1:+{port}"), String::new()),
        (format!("10.1.2.3:{port}"), String::new()),
        (
            format!("127.0.0.1:{port}"),
            format!("Origin: http://10.1.2.3:{port}\r\n"),
        ),
    ] {
        let (status, answer) = post(addr, &host, &format!("{with_token}{origin}"), body);
        if status != 403 {
            wrong.push(format!("POST, Host {host} {origin:?}: {status} {answer}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");

    // Bound to every address, it is reached at one: `url` names that one, which is served.
    let everywhere = eventbus::dashboard::serve(&bus, "0.0.0.0:0").unwrap();
    let url = everywhere.url();
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    assert_eq!(host, format!("127.0.0.1:{}", everywhere.addr().port()));
    let raw = format!("GET /api/state HTTP/1.1\r\nHost: {host}\r\n\r\n");
    assert_eq!(http(host.parse().unwrap(), raw.as_bytes()).0, 200, "{url}");
}

/// One exchange read to the end (a HEAD answer has a Content-Length but no body, which
/// `http` would wait for): status, head (lower-cased) and whatever came after it.
fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(raw).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    (head[9..12].parse().unwrap(), head, answer.split_off(end))
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

#[test]
fn head_answers_like_get_without_the_body() {
    let (_bus, dashboard, _token) = served();
    let addr = dashboard.addr();
    for path in ["/", "/app.js", "/style.css", "/api/state", "/nothing"] {
        let ask = |method: &str| {
            let raw = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
            exchange(addr, raw.as_bytes())
        };
        let (get_status, get_head, get_body) = ask("GET");
        let (status, head, body) = ask("HEAD");
        assert_eq!(status, get_status, "HEAD {path}: {head}");
        assert!(body.is_empty(), "HEAD {path} sent a body: {body:?}");
        assert_eq!(
            header(&head, "content-type"),
            header(&get_head, "content-type"),
            "HEAD {path}"
        );
        // The state changes between two requests; the rest is the same bytes.
        let length: usize = header(&head, "content-length").unwrap().parse().unwrap();
        if path == "/api/state" {
            assert!(length > 0, "HEAD {path}: {head}");
        } else {
            assert_eq!(length, get_body.len(), "HEAD {path}: {head}");
        }
    }
    let raw = format!("DELETE / HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let (status, head, _) = exchange(addr, raw.as_bytes());
    assert_eq!(status, 405);
    assert_eq!(header(&head, "allow"), Some("get, head"), "{head}");
}

#[test]
fn each_of_an_observers_dead_letters_is_reached_by_its_own_button() {
    let bus = Bus::builder().build();
    let fixed = Arc::new(AtomicBool::new(false));
    let (handled_tx, handled) = mpsc::channel();
    let _audit = {
        let fixed = Arc::clone(&fixed);
        bus.observe(
            "shop.*",
            Options::default().name("audit"),
            move |m: &AnyMessage| {
                if !fixed.load(Ordering::SeqCst) {
                    return Err("down");
                }
                handled_tx.send((m.topic(), m.seq())).unwrap();
                Ok(())
            },
        )
        .unwrap()
    };
    bus.publish(ShopA).unwrap();
    bus.publish(ShopB).unwrap();
    support::until("both messages are dead letters", || {
        bus.dead_letters().len() == 2
    });
    // One subscription, one seq: (subscription, seq) alone does not tell them apart.
    let letters = bus.dead_letters();
    let shown: Vec<_> = letters
        .iter()
        .map(|l| (l.topic(), l.seq(), l.subscriber()))
        .collect();
    assert_eq!(shown, [("shop.a", 0, "audit"), ("shop.b", 0, "audit")]);
    let dashboard = eventbus::dashboard::serve(&bus, "127.0.0.1:0").unwrap();
    let addr = dashboard.addr();
    let host = addr.to_string();
    let state = request("GET", addr, "/api/state", None).1;
    let subscription = state["dead_letters"][0]["subscription"].as_u64().unwrap();
    assert_eq!(state["dead_letters"][1]["subscription"], subscription);

    // Over the wire: a body that names no topic matches both, and is refused, not taken
    // as the first; a topic with no such letter is a 404.
    let with_token = format!("X-Eventbus-Token: {}\r\n", token_of(addr));
    let untold = format!(r#"{{"subscription": {subscription}, "seq": 0}}"#);
    let (status, answer) = post(addr, &host, &with_token, &untold);
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("topic"),
        "{answer}"
    );
    let elsewhere = format!(r#"{{"subscription": {subscription}, "topic": "shop.c", "seq": 0}}"#);
    let (status, answer) = post(addr, &host, &with_token, &elsewhere);
    assert_eq!(status, 404, "{answer}");
    assert_eq!(bus.dead_letters().len(), 2, "nothing was redelivered");

    // In the browser: the second letter's own button.
    let driver = Driver::start();
    driver.go(&dashboard.url());
    driver.wait_for("#dead-letters tbody tr td.topic", &["shop.b", "shop.a"]);
    fixed.store(true, Ordering::SeqCst);
    driver.click_using(
        "xpath",
        "//table[@id='dead-letters']//tr[td[@class='topic' and .='shop.b']]//button",
    );
    let status = driver.wait_until("#status", |texts| !texts[0].is_empty());
    let left: Vec<_> = bus.dead_letters().iter().map(|l| l.topic()).collect();
    // Redelivering an observer's letter may be refused (the bus did so once: "no longer
    // subscribed"); redelivered or refused, it is shop.b's letter that was acted on.
    if status[0] == "shop.b #0 redelivered to audit" {
        let got = handled.recv_timeout(support::PATIENCE).unwrap();
        assert_eq!(got, ("shop.b", 0));
        assert_eq!(left, ["shop.a"], "shop.b's letter went, shop.a's stayed");
    } else {
        assert!(
            status[0].starts_with("refused: shop.b #0 not redelivered to audit"),
            "{status:?}"
        );
        assert!(!status[0].contains("shop.a"), "{status:?}");
        assert_eq!(left, ["shop.a", "shop.b"], "a refusal keeps both letters");
    }
    assert!(handled.try_recv().is_err(), "shop.a was not redelivered");
}

/// The page as a `tower::Service` in an axum app's router (issue 32, item 7): mounted under
/// `/admin/bus` beside the app's own routes, browsed at the mount point without its slash,
/// it shows the bus and its button redelivers; the Host and token checks hold there too.
#[test]
fn the_page_mounted_in_an_axum_router_shows_the_bus_and_redelivers() {
    let bus = Bus::builder().build();
    let fixed = Arc::new(AtomicBool::new(false));
    let (billed_tx, billed) = mpsc::channel();
    {
        let fixed = Arc::clone(&fixed);
        bus.subscribe::<OrderPlaced>(
            Options::default().name("billing").backoff(Duration::ZERO),
            move |m: &Message<OrderPlaced>| {
                if !fixed.load(Ordering::SeqCst) {
                    return Err(format!("card declined for order {}", m.id));
                }
                billed_tx.send((m.seq(), m.id)).unwrap();
                Ok(())
            },
        );
    }
    bus.publish(OrderPlaced { id: 7 }).unwrap();
    support::until("order 7 is a dead letter", || bus.dead_letters().len() == 1);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "the shop" }))
        .nest_service(
            "/admin/bus",
            eventbus::dashboard::service(&bus).allow_host("shop.test"),
        );
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move { axum::serve(listener, app).await });

    // Over the wire: the app's own route, and the page's API under the prefix.
    let get = |path: &str, host: &str| {
        let raw = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let (status, _, body) = http(addr, raw.as_bytes());
        (status, String::from_utf8_lossy(&body).into_owned())
    };
    assert_eq!(get("/", &addr.to_string()), (200, "the shop".into()));
    let (status, state) = get("/admin/bus/api/state", &addr.to_string());
    assert_eq!(status, 200, "{state}");
    let state: Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["dead_letters"][0]["seq"], 0, "{state}");
    assert_eq!(get("/admin/bus/api/state", "shop.test:443").0, 200);
    let (status, refused) = get("/admin/bus/api/state", "rebound.example:80");
    assert_eq!(status, 403, "{refused}");
    let (status, page) = get("/admin/bus", &addr.to_string());
    assert_eq!(status, 200);
    let token = page
        .split("name=\"eventbus-token\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let redeliver = |headers: &str| {
        let body = r#"{"subscription": 0, "seq": 0}"#;
        let raw = format!(
            "POST /admin/bus/api/redeliver HTTP/1.1\r\nHost: {addr}\r\n{headers}\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        http(addr, raw.as_bytes()).0
    };
    assert_eq!(redeliver(""), 403, "no token");
    let cross_site = format!("X-Eventbus-Token: {token}\r\nOrigin: http://evil.example\r\n");
    assert_eq!(redeliver(&cross_site), 403, "another site's page");
    assert_eq!(bus.dead_letters().len(), 1, "nothing was redelivered");

    // In the browser, at the mount point as a user types it: no trailing slash.
    let driver = Driver::start();
    driver.go(&format!("http://{addr}/admin/bus"));
    driver.wait_for("#topics tbody tr td.name", &["orders.placed"]);
    driver.wait_for("#subscriptions tbody tr td.name", &["billing"]);
    driver.wait_for(
        "#dead-letters tbody tr td.error",
        &["card declined for order 7"],
    );
    fixed.store(true, Ordering::SeqCst);
    driver.click("#dead-letters tbody tr button.republish");
    assert_eq!(
        billed.recv_timeout(support::PATIENCE).unwrap(),
        (0, 7),
        "the button redelivered order 7 to billing"
    );
    driver.wait_for("#status", &["orders.placed #0 redelivered to billing"]);
    driver.wait_for("#dead-letters tbody tr", &[]);
    // And with the slash, the same page.
    driver.go(&format!("http://{addr}/admin/bus/"));
    driver.wait_for("#subscriptions tbody tr td.delivered", &["1"]);
    bus.close();
    drop(driver);
    drop(runtime);
}

#[derive(Topic, Debug)]
#[topic(name = "audit.log", retain = 10)]
struct Audited(#[allow(dead_code)] u64);

#[derive(Topic, Debug, serde::Serialize)]
#[topic(name = "refunds")]
struct Refund {
    id: u32,
    reason: &'static str,
}

/// The texts `css` matches, each read as a number.
fn numbers(texts: &[String]) -> Option<Vec<f64>> {
    texts.iter().map(|t| t.parse::<f64>().ok()).collect()
}

/// The classes of the elements `css` matches, read in one step in the page.
fn classes(driver: &Driver, css: &str) -> Vec<String> {
    let script = "return Array.from(document.querySelectorAll(arguments[0]), e => e.className)";
    let found = driver.command(
        "POST",
        "/execute/sync",
        Some(json!({"script": script, "args": [css]})),
    );
    found
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

/// Waits until `script` (run in the page with `args`) returns `true`.
fn wait_in_page(driver: &Driver, script: &str, args: Value) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let done = driver.command(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        );
        if done == json!(true) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never true in the page: {script}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn rates_show_at_the_first_poll_charts_fill_the_log_shows_lag_and_drops_are_styled_by_policy() {
    let bus = Bus::builder().build();
    // A Block reader of a log topic, started at a seq the log no longer keeps: the gap is
    // dropped (an alarm for a Block subscriber); it holds its first message, 10 behind.
    for i in 0..25 {
        bus.publish(Audited(i)).unwrap();
    }
    let (hold_log, wait_log) = mpsc::channel::<()>();
    let (log_started, log_busy) = mpsc::channel();
    bus.subscribe::<Audited>(
        Options::default()
            .name("replay")
            .start(eventbus::Start::Seq(5)),
        move |_: &Message<Audited>| {
            let _ = log_started.send(());
            let _ = wait_log.recv();
        },
    );
    log_busy.recv().unwrap();
    // A DropOldest subscriber of 2 that holds tick 0 and drops 2 of the 4 behind it: by
    // design, no alarm.
    let (hold, wait) = mpsc::channel::<()>();
    let (started, busy) = mpsc::channel();
    bus.subscribe::<PriceTick>(
        Options::default()
            .name("ticker")
            .capacity(2)
            .overflow(Overflow::DropOldest),
        move |m: &Message<PriceTick>| {
            if m.0 == 0 {
                started.send(()).unwrap();
                let _ = wait.recv();
            }
        },
    );
    bus.publish(PriceTick(0)).unwrap();
    busy.recv().unwrap();
    for tick in 1..=4 {
        bus.publish(PriceTick(tick)).unwrap();
    }

    let dashboard = eventbus::dashboard::serve(&bus, "127.0.0.1:0").unwrap();
    // The server's first answer has every rate as a number already.
    let (status, state) = request("GET", dashboard.addr(), "/api/state", None);
    assert_eq!(status, 200);
    for topic in state["stats"]["topics"].as_array().unwrap() {
        assert!(topic["rate"].is_number(), "{topic}");
    }
    for s in state["stats"]["subscriptions"].as_array().unwrap() {
        assert!(s["rate_in"].is_number() && s["rate_out"].is_number(), "{s}");
    }

    let driver = Driver::start();
    driver.go(&dashboard.url());
    // The first drawing (the page's first poll) shows numbers, not "–".
    let rates = driver.wait_until("#topics tbody tr td.rate", |t| !t.is_empty());
    assert!(
        numbers(&rates).is_some(),
        "rates at the first poll: {rates:?}"
    );
    let rates =
        driver.texts("#subscriptions tbody tr td.rate-in, #subscriptions tbody tr td.rate-out");
    assert!(
        numbers(&rates).is_some(),
        "rates at the first poll: {rates:?}"
    );

    driver.wait_for("#topics tbody tr td.name", &["audit.log", "prices.tick"]);
    driver.wait_for(
        "#topics tbody tr[data-topic='audit.log'] td.log .retained",
        &["10 kept"],
    );
    driver.wait_for(
        "#topics tbody tr[data-topic='audit.log'] td.log .oldest",
        &[" from #15"],
    );
    driver.wait_for(
        "#topics tbody tr[data-topic='audit.log'] td.log .lag[data-subscriber='replay']",
        &["replay: 10 behind"],
    );
    driver.wait_for("#topics tbody tr[data-topic='prices.tick'] td.log", &[""]);

    driver.wait_for("#subscriptions tbody tr td.name", &["replay", "ticker"]);
    driver.wait_for("#subscriptions tbody tr td.dropped", &["10", "2"]);
    assert_eq!(
        classes(&driver, "#subscriptions tbody tr td.dropped"),
        ["num dropped alert", "num dropped expected"],
        "the Block subscriber's drops are an alarm, the DropOldest one's are not"
    );

    // Every row has a chart; after a few samples each has a line of several points.
    driver.wait_until("#topics tbody tr td.trend svg.chart", |t| t.len() == 2);
    driver.wait_until("#subscriptions tbody tr td.trend svg.chart", |t| {
        t.len() == 2
    });
    wait_in_page(
        &driver,
        "const lines = document.querySelectorAll(arguments[0]); \
         return lines.length === 6 && Array.from(lines).every(l => \
           l.getAttribute('points').trim().split(/\\s+/).length >= 3);",
        json!(["#topics svg.chart polyline.rate, #subscriptions svg.chart polyline"]),
    );
    wait_in_page(
        &driver,
        "const d = document.querySelector(arguments[0]); \
         return d !== null && Number(d.dataset.points) >= 3;",
        json!(["#subscriptions tbody tr[data-subscriber='ticker'] svg.chart"]),
    );

    drop(hold);
    drop(hold_log);
    bus.close();
    driver.wait_for("#bus-state", &["closed"]);
    // At rest every subscription's out (delivered + dead + dropped) caught up with its in.
    let stats = bus.stats();
    for s in &stats.subscriptions {
        assert_eq!(
            s.received,
            s.delivered + s.dead_lettered + s.dropped,
            "{s:?}"
        );
    }
}

#[test]
fn a_dead_letter_shows_its_message_and_the_letters_past_the_newest_100_are_counted() {
    let bus = Bus::builder().build();
    bus.subscribe::<Refund>(Options::default().name("refunds"), |_: &Message<Refund>| {
        Err::<(), _>("bank offline")
    });
    bus.subscribe::<PriceTick>(
        Options::default().name("ticker"),
        |_: &Message<PriceTick>| Err::<(), _>("stale price"),
    );
    for id in 0..104 {
        bus.publish(Refund { id, reason: "late" }).unwrap();
    }
    // The tick's letter after every refund's: the newest.
    while bus.dead_letters().len() < 104 {
        std::thread::yield_now();
    }
    bus.publish(PriceTick(9)).unwrap();
    while bus.dead_letters().len() < 105 {
        std::thread::yield_now();
    }
    let dashboard = eventbus::dashboard::serve(&bus, "127.0.0.1:0").unwrap();
    let driver = Driver::start();
    driver.go(&dashboard.url());

    let messages = driver.wait_until("#dead-letters tbody tr td.message", |t| t.len() == 100);
    // Newest first: the tick (no Serialize: its Debug), then the refunds (JSON).
    assert_eq!(messages[0], "PriceTick(9)");
    assert_eq!(messages[1], r#"{"id":103,"reason":"late"}"#);
    assert_eq!(messages[99], r#"{"id":5,"reason":"late"}"#);
    driver.wait_for("#dead-older", &["and 5 older not shown"]);
    wait_in_page(
        &driver,
        "return !document.getElementById('dead-older').hidden;",
        json!([]),
    );
    bus.close();
}

#[test]
fn with_every_letter_shown_the_not_shown_line_is_hidden() {
    let (bus, dashboard, _) = served();
    let driver = Driver::start();
    driver.go(&dashboard.url());
    driver.wait_for(
        "#dead-letters tbody tr td.message",
        &[r#"OrderPlaced { id: 1 }"#],
    );
    wait_in_page(
        &driver,
        "const older = document.getElementById('dead-older'); \
         return older.hidden && older.textContent === 'and 0 older not shown';",
        json!([]),
    );
    bus.close();
}

/// The orders demo's shop (`examples/shop.rs`), compiled into this binary so the README's
/// screenshot is taken of the demo itself.
#[allow(dead_code)] // the demo's printing needs what the page does not
#[path = "../../examples/shop.rs"]
mod shop;

/// What the README's screenshot (`eventbus/docs/dashboard.png`) shows, as text: the rows of
/// the orders demo's live page. The test fails when the demo's page no longer matches it.
const SCREENSHOT_ROWS: &str = include_str!("../../eventbus/docs/dashboard.txt");

/// The README's screenshot is the orders demo's page in this browser. The test compares the
/// rows the page shows with `eventbus/docs/dashboard.txt`, the rows of the screenshot; a
/// change to the demo or the page that the screenshot does not show fails here.
/// `EVENTBUS_README_SCREENSHOT=1` takes the screenshot again and writes both files.
#[test]
fn the_readmes_screenshot_is_the_demos_page_as_it_is() {
    let bus = Bus::builder()
        .registered_in(concat!(module_path!(), "::shop"))
        .build();
    let dashboard = eventbus::dashboard::serve(&bus, "127.0.0.1:0").unwrap();
    // The demo trades at its own pace (an order and 20 ticks every 25 ms) until the page has
    // drawn a few seconds of it.
    let trading = Arc::new(AtomicBool::new(true));
    let trader = {
        let (bus, trading) = (bus.clone(), Arc::clone(&trading));
        std::thread::spawn(move || {
            let mut n = 0;
            while trading.load(Ordering::SeqCst) {
                shop::trade(&bus, n);
                n += 1;
                std::thread::sleep(Duration::from_millis(25));
            }
        })
    };
    let driver = Driver::start();
    driver.go(&dashboard.url());
    let topics = driver.wait_until("#topics tbody tr td.name", |t| t.len() == 3);
    let subscriptions = driver.wait_until("#subscriptions tbody tr td.name", |t| t.len() >= 5);
    driver.wait_until("#dead-letters tbody tr td.subscriber", |t| !t.is_empty());
    wait_in_page(
        &driver,
        "const lines = document.querySelectorAll(arguments[0]); \
         return lines.length > 0 && Array.from(lines).every(l => \
           l.getAttribute('points').trim().split(/\\s+/).length >= 5);",
        json!(["#topics svg.chart polyline.rate"]),
    );
    let rows = format!(
        "topics: {}\nsubscriptions: {}\n",
        topics.join(", "),
        subscriptions.join(", ")
    );
    if std::env::var_os("EVENTBUS_README_SCREENSHOT").is_some() {
        let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/docs");
        std::fs::write(format!("{docs}/dashboard.png"), driver.screenshot()).unwrap();
        std::fs::write(format!("{docs}/dashboard.txt"), &rows).unwrap();
    } else {
        assert_eq!(
            rows, SCREENSHOT_ROWS,
            "the orders demo's page no longer shows what the README's screenshot shows: take \
             it again with EVENTBUS_README_SCREENSHOT=1 cargo test -p eventbus --all-features \
             --test it -- dashboard::the_readmes_screenshot"
        );
    }
    trading.store(false, Ordering::SeqCst);
    trader.join().unwrap();
    bus.close();
}
