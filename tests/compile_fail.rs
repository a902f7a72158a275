//! Misuse of the macros fails to compile, with one message that says what is allowed.
//! Each case in `tests/ui/` is one error; its `.stderr` is the reviewed message. The cases
//! in `tests/ui-tokio/` need feature `tokio` (`async fn` subscribers), and those in
//! `tests/ui/` its absence (one says to enable it).

#[cfg(not(feature = "tokio"))]
#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("../tests/ui/*.rs");
}

#[cfg(feature = "tokio")]
#[test]
fn ui_tokio() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("../tests/ui-tokio/*.rs");
}
