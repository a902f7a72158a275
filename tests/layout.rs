//! Every integration test file runs. The tests live in the top-level `tests/`, outside the
//! `eventbus` package, so cargo does not find them by itself: each needs a `[[test]]` entry
//! in `eventbus/Cargo.toml`, and a file without one would never run, silently.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

#[test]
fn every_file_in_tests_has_a_test_entry() {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::read_to_string(package.join("Cargo.toml")).unwrap();
    let entries = test_entries(&manifest);

    // `tests/support/` is a module the tests share, and `tests/ui/` holds trybuild's cases:
    // only the files directly in `tests/` are test crates.
    let mut files = BTreeSet::new();
    for entry in fs::read_dir(package.join("../tests")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_name().unwrap().to_str().unwrap();
            files.insert(format!("../tests/{name}"));
        }
    }

    let missing: Vec<_> = files.difference(&entries).collect();
    assert!(
        missing.is_empty(),
        "these files in tests/ never run, because eventbus/Cargo.toml has no [[test]] entry \
         for them; add one each, like\n\n[[test]]\nname = \"NAME\"\npath = \"../tests/NAME.rs\"\n\n\
         missing: {missing:?}"
    );
    let dangling: Vec<_> = entries.difference(&files).collect();
    assert!(
        dangling.is_empty(),
        "[[test]] entries name files that are not in tests/: {dangling:?}"
    );
}

/// The `path` of every `[[test]]` table. A line-based reading is enough for this manifest:
/// one key per line, tables opened by `[...]` lines.
fn test_entries(manifest: &str) -> BTreeSet<String> {
    let mut entries = BTreeSet::new();
    let mut in_test = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_test = line == "[[test]]";
        } else if in_test {
            if let Some(value) = line.strip_prefix("path") {
                let value = value.trim_start().trim_start_matches('=').trim();
                entries.insert(value.trim_matches('"').to_owned());
            }
        }
    }
    entries
}

#[test]
fn the_manifest_reading_finds_test_paths_and_nothing_else() {
    let manifest = "[[example]]\nname = \"a\"\npath = \"../examples/a.rs\"\n\n\
                    [[test]]\nname = \"b\"\npath = \"../tests/b.rs\"\nrequired-features = [\"x\"]\n\n\
                    [[bench]]\nname = \"c\"\n";
    assert_eq!(
        test_entries(manifest),
        BTreeSet::from(["../tests/b.rs".to_owned()])
    );
}
