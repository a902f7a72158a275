//! An application of several crates, built with cargo and run: where its `#[subscriber]`s
//! come from (issue 18).
//!
//! `events` holds a topic, `handlers` a subscriber to it, and `app` builds the bus. A
//! `#[subscriber]` registers itself through `inventory`, and the linker keeps a library crate
//! only if the program refers to it; so a binary that depends on `handlers` but never names
//! it starts none of its subscribers. The three binaries of `app` show the three cases:
//! naming an item of `handlers` (its subscriber runs), naming nothing (it does not, and
//! `BusBuilder::require` says why), and the documented fix, `use handlers as _;` (it runs).
//!
//! The fixture is written under cargo's temporary directory for integration tests, with
//! `eventbus` as a path dependency and this workspace's `Cargo.lock`, and built with a target
//! directory of its own that stays: only the first run builds `eventbus` and its
//! dependencies. It builds `--offline` (the dependencies are those of this workspace, so
//! they are already downloaded) and tries again online only if that fails.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The fixture's files; `{eventbus}` stands for the path of this workspace's `eventbus`.
const FILES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        r#"[workspace]
resolver = "2"
members = ["events", "handlers", "app"]

[workspace.dependencies]
eventbus = { path = '{eventbus}' }
events = { path = "events" }
handlers = { path = "handlers" }
"#,
    ),
    (
        "events/Cargo.toml",
        r#"[package]
name = "events"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
eventbus.workspace = true
"#,
    ),
    (
        "events/src/lib.rs",
        r#"//! The topics.
use eventbus::Topic;

#[derive(Topic, Debug)]
pub struct OrderPlaced {
    pub id: u64,
}
"#,
    ),
    (
        "handlers/Cargo.toml",
        r#"[package]
name = "handlers"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
eventbus.workspace = true
events.workspace = true
"#,
    ),
    (
        "handlers/src/lib.rs",
        r#"//! The subscribers.
use events::OrderPlaced;

/// Something for an application to name.
pub const NAME: &str = "handlers";

#[eventbus::subscriber]
fn send_receipt(order: &OrderPlaced) {
    println!("receipt for order {}", order.id);
}
"#,
    ),
    (
        "app/Cargo.toml",
        r#"[package]
name = "app"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
eventbus.workspace = true
events.workspace = true
handlers.workspace = true
"#,
    ),
    (
        "app/src/lib.rs",
        r#"//! What every binary runs. It never names `handlers`: each binary decides.
use eventbus::Bus;
use events::OrderPlaced;

pub fn run() {
    for subscriber in Bus::registered() {
        println!("registered: {} on {}", subscriber.name, subscriber.topic);
    }
    let built = Bus::builder()
        .registered()
        .require("handlers::send_receipt")
        .try_build();
    match built {
        Ok(bus) => {
            bus.publish(OrderPlaced { id: 7 }).unwrap();
            bus.close();
        }
        Err(error) => println!("error: {error}"),
    }
}
"#,
    ),
    (
        "app/src/bin/names_an_item.rs",
        r#"#![deny(warnings)]
fn main() {
    println!("using {}", handlers::NAME);
    app::run();
}
"#,
    ),
    (
        "app/src/bin/unreferenced.rs",
        r#"#![deny(warnings)]
fn main() {
    app::run();
}
"#,
    ),
    (
        "app/src/bin/linked.rs",
        r#"#![deny(warnings)]
use handlers as _; // links the crate, and so its #[subscriber]s

fn main() {
    app::run();
}
"#,
    ),
];

#[test]
fn subscribers_of_another_crate_register_when_the_binary_refers_to_that_crate() {
    let fixture = Path::new(env!("CARGO_TARGET_TMPDIR")).join("multi-crate");
    let eventbus = Path::new(env!("CARGO_MANIFEST_DIR"));
    write_fixture(&fixture, eventbus);
    let target = build(&fixture);

    // Naming any item of `handlers` links it in.
    assert_eq!(
        run(&target, "names_an_item"),
        "using handlers\n\
         registered: handlers::send_receipt on OrderPlaced\n\
         receipt for order 7\n"
    );

    // Depending on `handlers` without naming it: nothing registers, and `require` says why.
    let unreferenced = run(&target, "unreferenced");
    assert!(
        !unreferenced.contains("registered:") && !unreferenced.contains("receipt for"),
        "{unreferenced}"
    );
    assert!(
        unreferenced.starts_with(
            "error: no `#[subscriber]` named `handlers::send_receipt` is in this program"
        ) && unreferenced.contains("add `use handlers as _;` to the binary"),
        "{unreferenced}"
    );

    // The documented fix: one line, and no warning (the binaries deny them).
    assert_eq!(
        run(&target, "linked"),
        "registered: handlers::send_receipt on OrderPlaced\n\
         receipt for order 7\n"
    );
}

/// Writes the fixture, leaving alone the files that have not changed, so that cargo finds
/// nothing to rebuild on a second run.
fn write_fixture(fixture: &Path, eventbus: &Path) {
    let eventbus = eventbus.canonicalize().unwrap();
    let eventbus = eventbus.to_str().unwrap();
    assert!(
        !eventbus.contains('\''),
        "a TOML literal string cannot hold {eventbus}"
    );
    for (path, contents) in FILES {
        let contents = contents.replace("{eventbus}", eventbus);
        write_if_changed(&fixture.join(path), &contents);
    }
    // The same versions as this workspace, which are downloaded already.
    let lock = fixture.join("Cargo.lock");
    if !lock.exists() {
        fs::copy(eventbus_workspace().join("Cargo.lock"), lock).unwrap();
    }
}

fn write_if_changed(path: &Path, contents: &str) {
    if fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return;
    }
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, contents).unwrap();
}

fn eventbus_workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Builds the fixture's binaries; returns the directory that holds them.
fn build(fixture: &Path) -> PathBuf {
    let target = fixture.join("target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let attempt = |offline: bool| {
        let mut command = Command::new(&cargo);
        command
            .current_dir(fixture)
            .args(["build", "--quiet", "--package", "app", "--bins"])
            .arg("--target-dir")
            .arg(&target)
            // The outer `cargo test`'s target directory is not this build's.
            .env_remove("CARGO_TARGET_DIR");
        if offline {
            command.arg("--offline");
        }
        command.output().unwrap()
    };
    let mut output = attempt(true);
    if !output.status.success() {
        eprintln!(
            "the offline build failed; trying online:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        output = attempt(false);
    }
    assert!(
        output.status.success(),
        "the fixture does not build:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    target.join("debug")
}

/// Runs one of the fixture's binaries; returns what it printed.
fn run(target: &Path, binary: &str) -> String {
    let path = target.join(format!("{binary}{}", std::env::consts::EXE_SUFFIX));
    let output = Command::new(&path).output().unwrap();
    assert!(
        output.status.success(),
        "{binary} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}
