use tally_stats::studentized_range::*;
use std::time::Instant;
fn main() {
    for (q, k, df) in [(3.0, 3, 10.0), (6.0, 50, 5.0), (4.0, 10, f64::INFINITY), (45.0, 50, 2.0)] {
        let t0 = Instant::now();
        let mut x = 0.0;
        for _ in 0..20 { x += studentized_range_sf(q, k, df).unwrap(); }
        println!("sf {q} {k} {df}: {:?} per call ({x})", t0.elapsed() / 20);
    }
    let t0 = Instant::now();
    let q = studentized_range_quantile(0.95, 4, 20.0).unwrap();
    println!("quantile {q} {:?}", t0.elapsed());
}
