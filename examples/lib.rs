//! Nothing: this package exists for its examples (`cargo run --example orders`), which live
//! beside this file.
