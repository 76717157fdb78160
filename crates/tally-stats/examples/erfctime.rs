use std::time::Instant;
fn main() {
    let t0 = Instant::now();
    let mut s = 0.0;
    for i in 0..1_000_000 { s += statrs::function::erf::erfc(-6.0 + i as f64 * 1.2e-5); }
    println!("erfc {:?}/call {s}", t0.elapsed() / 1_000_000);
    let t0 = Instant::now();
    for i in 0..1_000_000 { s += (-6.0 + i as f64 * 1.2e-5f64).exp(); }
    println!("exp {:?}/call {s}", t0.elapsed() / 1_000_000);
}
