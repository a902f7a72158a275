//! The importer's heartbeat watchdog, through a TCP proxy this test controls: between the
//! importing bridge and a real `nats-server`, it forwards everything until told to stall,
//! then drops what the server sends to the pull subscriptions that existed at that moment
//! (their deliveries and heartbeats), while the connection and every other subscription
//! (the answers to requests) keep working. A subscription made afterwards is heard again.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use super::*;

#[derive(Default)]
struct Sids {
    /// Subscriptions (by sid) that have received a JetStream delivery (`$JS.ACK.` reply).
    pulls: HashSet<String>,
    /// Once stalled: the pull subscriptions whose messages are dropped.
    stalled: Option<HashSet<String>>,
    /// Messages dropped.
    dropped: u64,
}

/// A proxy in front of a NATS server, for one test.
struct Proxy {
    port: u16,
    sids: Arc<Mutex<Sids>>,
}

impl Proxy {
    fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let sids = Arc::new(Mutex::new(Sids::default()));
        let shared = Arc::clone(&sids);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let (mut up_from, mut up_to) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut up_from, &mut up_to);
                    let _ = up_to.shutdown(std::net::Shutdown::Both);
                });
                let sids = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let _ = down(server, client, &sids);
                });
            }
        });
        Proxy { port, sids }
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// From now on, drops what the server sends to the pull subscriptions known now.
    fn stall(&self) {
        let mut sids = self.sids.lock().unwrap();
        assert!(!sids.pulls.is_empty(), "no pull subscription seen yet");
        sids.stalled = Some(sids.pulls.clone());
    }

    fn dropped(&self) -> u64 {
        self.sids.lock().unwrap().dropped
    }
}

/// Copies the server's side to the client, message by message (`MSG`/`HMSG` with their
/// payloads, other protocol lines as they are), dropping the stalled subscriptions' ones.
fn down(server: TcpStream, mut client: TcpStream, sids: &Mutex<Sids>) -> std::io::Result<()> {
    let mut from = BufReader::new(server);
    let mut line = Vec::new();
    loop {
        line.clear();
        if from.read_until(b'\n', &mut line)? == 0 {
            let _ = client.shutdown(std::net::Shutdown::Both);
            return Ok(());
        }
        let text = String::from_utf8_lossy(&line).into_owned();
        let words: Vec<&str> = text.split_whitespace().collect();
        // MSG <subject> <sid> [reply] <size>; HMSG <subject> <sid> [reply] <header size> <size>
        let (sid, reply, size) = match words.first().copied() {
            Some("MSG") => (
                words[2],
                (words.len() == 5).then(|| words[3]),
                words[words.len() - 1],
            ),
            Some("HMSG") => (
                words[2],
                (words.len() == 6).then(|| words[3]),
                words[words.len() - 1],
            ),
            _ => {
                client.write_all(&line)?;
                continue;
            }
        };
        let mut payload = vec![0; size.parse::<usize>().unwrap() + 2];
        from.read_exact(&mut payload)?;
        let drop = {
            let mut sids = sids.lock().unwrap();
            if reply.is_some_and(|r| r.starts_with("$JS.ACK.")) {
                sids.pulls.insert(sid.to_string());
            }
            let drop = sids.stalled.as_ref().is_some_and(|s| s.contains(sid));
            sids.dropped += u64::from(drop);
            drop
        };
        if !drop {
            client.write_all(&line)?;
            client.write_all(&payload)?;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_importer_that_stops_hearing_the_server_makes_its_subscription_again() {
    let server = Server::start();
    let proxy = Proxy::start(server.port);
    let (shop, warehouse) = (bus(), bus());
    let exporter = Bridge::connect(&shop, &server.url()).await.unwrap();
    let importer = Bridge::connect(&warehouse, &proxy.url()).await.unwrap();
    exporter.export::<OrderPlaced>().await.unwrap();
    importer.import::<OrderPlaced>("warehouse").await.unwrap();
    let mut rx = receive(&warehouse);
    for id in 0..10 {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    assert_eq!(next_ids(&mut rx, 10).await, (0..10).collect::<Vec<_>>());

    // The pull subscription goes deaf; the connection and the server stay up.
    proxy.stall();
    for id in 10..20 {
        shop.publish_async(OrderPlaced { id }).await.unwrap();
    }
    // The watchdog notices the missing heartbeats, finds the server answering, and makes
    // its subscription again; the ten come (again, after the ack wait), in order.
    assert_eq!(next_ids(&mut rx, 10).await, (10..20).collect::<Vec<_>>());
    let import = &importer.stats().imports[0];
    assert!(import.recreated >= 1, "{import:?}");
    assert!(proxy.dropped() > 0, "the proxy never dropped anything");
    nothing_more(&mut rx, &shop, 20).await;
    exporter.close().await.unwrap();
    importer.close().await.unwrap();
}
