//! Every integration test runs. The tests live in the top-level `tests/`, outside the
//! `eventbus` package, so cargo finds none of them by itself: a test binary needs a `[[test]]`
//! table in `eventbus/Cargo.toml`. Most tests are modules of one binary, `it`
//! (`tests/it/main.rs`), so that the crate and its dependencies are linked once, not once
//! per file; a file in `tests/it/` that `main.rs` does not declare, or a file in `tests/`
//! without a table, would never run, silently.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The test binaries that stay files of their own, directly in `tests/`, and why each cannot
/// be a module of `it`. A new test goes into `tests/it/` unless it cannot either.
const SEPARATE: &[(&str, &str)] = &[
    (
        "allocations",
        "dhat's `#[global_allocator]` counts the allocations of every thread in the process",
    ),
    (
        "compile_fail",
        "trybuild compiles its cases, from `tests/ui/` or `tests/ui-tokio/` by feature",
    ),
    (
        "crate_path",
        "asserts on `Bus::registered()`, which lists every `#[subscriber]` in the binary",
    ),
    ("lints", "its lints are denied for the whole crate"),
    (
        "model",
        "a long proptest run, with a panic hook for the whole process",
    ),
    (
        "multi_crate",
        "its cargo build of a fixture workspace (minutes, the first time) would share the CPU \
         with every test of `it`",
    ),
    (
        "registered",
        "`Bus::new()` and `Bus::registered()` take every `#[subscriber]` in the binary",
    ),
    (
        "soak",
        "a long run that reads the resident set of the whole process",
    ),
    (
        "state",
        "its assertions name its types and subscribers by their paths, which start with the \
         crate's name",
    ),
    (
        "tracing",
        "installs the global default `tracing` subscriber",
    ),
];

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests")
}

#[test]
fn every_file_in_tests_is_a_test_binary_with_a_test_table() {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::read_to_string(package.join("Cargo.toml")).unwrap();
    let tables = test_tables(&manifest);

    let it: Vec<_> = tables.iter().filter(|t| t.name == "it").collect();
    assert!(
        it.len() == 1 && it[0].path == "../tests/it/main.rs",
        "eventbus/Cargo.toml needs one [[test]] table for `it`, like\n\n[[test]]\nname = \
         \"it\"\npath = \"../tests/it/main.rs\"\n\nfound: {it:?}"
    );
    assert_eq!(
        it[0].required_features, None,
        "`it` holds the tests of every feature: with `required-features` it would not run at \
         all without them. Gate the module instead, with `#[cfg(feature = \"...\")]` on its \
         `mod` in tests/it/main.rs"
    );

    // `tests/it/` is the `it` binary, and `tests/ui/` and `tests/ui-tokio/` hold trybuild's
    // cases: only the files directly in `tests/` are test binaries of their own.
    let mut files = BTreeSet::new();
    for entry in fs::read_dir(tests_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_name().unwrap().to_str().unwrap();
            files.insert(format!("../tests/{name}"));
        }
    }
    let entries: BTreeSet<String> = tables
        .iter()
        .filter(|t| t.name != "it")
        .map(|t| t.path.clone())
        .collect();
    let missing: Vec<_> = files.difference(&entries).collect();
    assert!(
        missing.is_empty(),
        "these files in tests/ never run, because eventbus/Cargo.toml has no [[test]] table \
         for them. A test belongs in tests/it/, as a module of tests/it/main.rs; one that \
         cannot share a binary (see SEPARATE in tests/it/layout.rs) needs a table, like\
         \n\n[[test]]\nname = \"NAME\"\npath = \"../tests/NAME.rs\"\n\nmissing: {missing:?}"
    );
    let dangling: Vec<_> = entries.difference(&files).collect();
    assert!(
        dangling.is_empty(),
        "[[test]] tables name files that are not directly in tests/ (the modules of \
         tests/it/ are `it`'s, and need no table): {dangling:?}"
    );

    let listed: BTreeSet<String> = SEPARATE
        .iter()
        .map(|(name, _)| format!("../tests/{name}.rs"))
        .collect();
    let unlisted: Vec<_> = files.difference(&listed).collect();
    let reasons: Vec<String> = SEPARATE
        .iter()
        .map(|(name, why)| format!("{name}: {why}"))
        .collect();
    let reasons = reasons.join("\n  ");
    assert!(
        unlisted.is_empty(),
        "these files directly in tests/ are test binaries of their own, but SEPARATE in \
         tests/it/layout.rs does not say why: {unlisted:?}. A test goes into tests/it/, with \
         a `mod` in tests/it/main.rs, unless it cannot share a binary, as these cannot:\
         \n  {reasons}"
    );
    let gone: Vec<_> = listed.difference(&files).collect();
    assert!(
        gone.is_empty(),
        "SEPARATE in tests/it/layout.rs lists files that are not in tests/: {gone:?}"
    );
}

#[test]
fn every_file_in_tests_it_is_a_module_of_main() {
    let it = tests_dir().join("it");
    let main = fs::read_to_string(it.join("main.rs")).unwrap();
    let declared = declared_modules(&main);

    // A module is a file `name.rs` or a folder `name/` (with its `mod.rs`, like `support/`).
    let mut files = BTreeSet::new();
    for entry in fs::read_dir(&it).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        if path.is_dir() || (path.extension().is_some_and(|e| e == "rs") && name != "main") {
            files.insert(name);
        }
    }

    let missing: Vec<_> = files.difference(&declared).collect();
    assert!(
        missing.is_empty(),
        "these modules in tests/it/ never run, because tests/it/main.rs does not declare \
         them; add `mod NAME;` (with `#[cfg(feature = \"...\")]` if it needs a feature): \
         {missing:?}"
    );
    let dangling: Vec<_> = declared.difference(&files).collect();
    assert!(
        dangling.is_empty(),
        "tests/it/main.rs declares modules that have no file in tests/it/: {dangling:?}"
    );
}

/// A `[[test]]` table of the manifest.
#[derive(Debug, Default, PartialEq)]
struct TestTable {
    name: String,
    path: String,
    /// The value of `required-features`, if it has one.
    required_features: Option<String>,
}

/// The `[[test]]` tables, in order. A line-based reading is enough for this manifest: one
/// key per line, tables opened by `[...]` lines.
fn test_tables(manifest: &str) -> Vec<TestTable> {
    let mut tables = Vec::new();
    let mut in_test = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_test = line == "[[test]]";
            if in_test {
                tables.push(TestTable::default());
            }
        } else if in_test {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let table = tables.last_mut().unwrap();
            let value = value.trim().trim_matches('"').to_owned();
            match key.trim() {
                "name" => table.name = value,
                "path" => table.path = value,
                "required-features" => table.required_features = Some(value),
                _ => {}
            }
        }
    }
    tables
}

/// The modules a file declares by `mod name;` lines (`pub` or not; attributes such as
/// `#[cfg(...)]` on lines of their own).
fn declared_modules(main: &str) -> BTreeSet<String> {
    main.lines()
        .map(str::trim)
        .filter_map(|line| {
            let line = line.strip_prefix("pub ").unwrap_or(line);
            line.strip_prefix("mod ")?.strip_suffix(';')
        })
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
fn the_manifest_reading_finds_test_tables_and_nothing_else() {
    let manifest = "[[example]]\nname = \"a\"\npath = \"../examples/a.rs\"\n\n\
                    [[test]]\nname = \"b\"\npath = \"../tests/b.rs\"\nrequired-features = [\"x\"]\n\n\
                    [[bench]]\nname = \"c\"\n\n\
                    [[test]]\nname = \"it\"\npath = \"../tests/it/main.rs\"\n";
    assert_eq!(
        test_tables(manifest),
        [
            TestTable {
                name: "b".to_owned(),
                path: "../tests/b.rs".to_owned(),
                required_features: Some("[\"x\"]".to_owned()),
            },
            TestTable {
                name: "it".to_owned(),
                path: "../tests/it/main.rs".to_owned(),
                required_features: None,
            },
        ]
    );
}

#[test]
fn the_module_reading_finds_declarations_gated_or_not() {
    let main = "//! Docs that mention mod x;\n\n#[cfg(feature = \"tokio\")]\npub mod a;\nmod b;\n\
                pub mod c {\n}\nuse crate::d;\n";
    assert_eq!(
        declared_modules(main),
        BTreeSet::from(["a".to_owned(), "b".to_owned()])
    );
}
