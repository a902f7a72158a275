use eventbus::{Bus, Topic};
#[derive(Topic)]
struct M(u64);
fn main() {
    let bus = Bus::builder().build();
    let t = std::time::Instant::now();
    for i in 0..20_000_000u64 {
        std::hint::black_box(bus.publish(M(i)).map_err(|_| ()).unwrap());
    }
    println!("{:.1} ns/publish", t.elapsed().as_nanos() as f64 / 2e7);
}
