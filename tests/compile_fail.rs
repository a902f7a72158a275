//! Misuse of the macros fails to compile, with one message that says what is allowed.
//! Each case in `tests/ui/` is one error; its `.stderr` is the reviewed message.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("../tests/ui/*.rs");
}
