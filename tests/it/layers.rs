//! The runtime's layers: `eventbus/src/lib.rs` lists its modules top to bottom ("Layout"),
//! and every `crate::...` path in the runtime must point down that list, by module path,
//! never through the crate root's re-exports (which hide what depends on what).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The modules of lib.rs's "Layout" list, top first.
fn declared_order(lib: &str) -> Vec<String> {
    let mut order = Vec::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.trim();
        if doc.starts_with('#') {
            inside = doc.starts_with("# Layout");
            continue;
        }
        if !inside {
            continue;
        }
        // `12. `handler`: ...`
        let Some((number, rest)) = doc.split_once(". `") else {
            continue;
        };
        if number.chars().all(|c| c.is_ascii_digit()) && !number.is_empty() {
            let name = rest.split('`').next().unwrap_or_default();
            order.push(name.to_owned());
        }
    }
    order
}

/// The modules lib.rs declares (`mod x;`, `pub mod x;`, and `__private`'s folder).
fn declared_modules(lib: &str) -> BTreeSet<String> {
    let mut modules = BTreeSet::new();
    let mut path = None;
    for line in lib.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#[path = \"") {
            path = rest.split('/').next().map(str::to_owned);
            continue;
        }
        let rest = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "));
        if let Some(name) = rest.and_then(|rest| rest.strip_suffix(';')) {
            modules.insert(path.take().unwrap_or_else(|| name.to_owned()));
        }
    }
    modules
}

/// The items lib.rs re-exports at the root from its own modules (`pub use stats::{..}`).
fn reexports(lib: &str) -> BTreeSet<String> {
    let code: String = lib
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut items = BTreeSet::new();
    for statement in code.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        if path.starts_with("eventbus_macros") {
            continue;
        }
        let names = match path.split_once('{') {
            Some((_, group)) => group.trim_end_matches('}').to_owned(),
            None => path.rsplit("::").next().unwrap_or_default().to_owned(),
        };
        items.extend(
            names
                .split(',')
                .map(|name| {
                    name.split(" as ")
                        .last()
                        .unwrap_or_default()
                        .trim()
                        .to_owned()
                })
                .filter(|name| !name.is_empty()),
        );
    }
    items
}

/// A source file without its comments and its unit tests (as `import-cycles` reads it).
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segments of the `crate::` paths in `code`: `crate::options::Options` gives
/// `options`, `crate::{Bus, stats}` gives `Bus` and `stats`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        // `eventbus::__private` in a doc string, or `$crate::`, is not this crate's path.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let first = item.trim().split("::").next().unwrap_or_default();
                let first = first.split_whitespace().next().unwrap_or_default();
                if !first.is_empty() {
                    found.insert(first.to_owned());
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// Every import in `files` (module, code) that breaks the layers of `order`.
fn violations(
    order: &[String],
    reexported: &BTreeSet<String>,
    files: &BTreeMap<String, (String, String)>,
) -> Vec<String> {
    let rank = |module: &str| order.iter().position(|m| m == module);
    let mut found = Vec::new();
    for (file, (module, code)) in files {
        let Some(own) = rank(module) else {
            found.push(format!(
                "{file}: module `{module}` is not in lib.rs's Layout list"
            ));
            continue;
        };
        for name in crate_paths(code) {
            if reexported.contains(&name) {
                found.push(format!(
                    "{file}: `crate::{name}` goes through the crate root's re-export; \
                     import it by its module path"
                ));
            } else if let Some(theirs) = rank(&name) {
                if theirs < own {
                    found.push(format!(
                        "{file}: `{module}` (layer {}) imports `{name}` (layer {}), above it",
                        own + 1,
                        theirs + 1
                    ));
                }
            }
        }
    }
    found
}

/// Every runtime file but lib.rs, by its path under `src`, with its top-level module.
fn runtime_files() -> BTreeMap<String, (String, String)> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![src()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension() != Some(std::ffi::OsStr::new("rs")) {
                continue;
            }
            let relative = path.strip_prefix(src()).unwrap().to_owned();
            if relative == Path::new("lib.rs") {
                continue;
            }
            let first = relative.components().next().unwrap();
            let module = first.as_os_str().to_string_lossy();
            let module = module.trim_end_matches(".rs").to_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let mut code = code_of(&text);
            // In a file at the top (`stats.rs`, `engine/mod.rs`), `super::` is the root.
            let depth = relative.components().count();
            let top = depth == 1 || (depth == 2 && relative.ends_with("mod.rs"));
            if top {
                code = code.replace("super::", "crate::");
            }
            files.insert(relative.display().to_string(), (module, code));
        }
    }
    files
}

#[test]
fn the_layout_list_names_every_module_once() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let order = declared_order(&lib);
    let listed: BTreeSet<_> = order.iter().cloned().collect();
    assert_eq!(
        listed.len(),
        order.len(),
        "a module is listed twice: {order:?}"
    );
    assert_eq!(
        listed,
        declared_modules(&lib),
        "lib.rs's Layout list and its `mod` lines differ"
    );
}

#[test]
fn every_import_points_down_the_layers() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let order = declared_order(&lib);
    assert!(
        order.len() > 10,
        "no Layout list found in lib.rs: {order:?}"
    );
    let found = violations(&order, &reexports(&lib), &runtime_files());
    assert!(
        found.is_empty(),
        "imports against the layers:\n{}",
        found.join("\n")
    );
}

/// The check itself finds what it is for: an upward import and one through the root.
#[test]
fn a_planted_upward_import_is_found() {
    let order: Vec<String> = ["bus", "engine", "options"].map(String::from).to_vec();
    let reexported = BTreeSet::from(["Options".to_owned()]);
    let plant = |code: &str| {
        let files = BTreeMap::from([(
            "options/mod.rs".to_owned(),
            ("options".to_owned(), code_of(code)),
        )]);
        violations(&order, &reexported, &files)
    };
    assert!(plant("use crate::message::Message;\n// use crate::engine::Engine;").is_empty());
    assert_eq!(plant("use crate::engine::Engine;").len(), 1);
    assert_eq!(plant("use crate::{bus::Bus, options::filter};").len(), 1);
    assert_eq!(plant("fn f() -> crate::Options { todo!() }").len(), 1);
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    assert!(reexports(&lib).contains("Options") && reexports(&lib).contains("Bus"));
}
