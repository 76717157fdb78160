use tally_stats::studentized_range::*;
use std::time::Instant;
fn main() {
    let text = std::fs::read_to_string("/work/scratch/stats-ref/sr.txt").unwrap();
    let mut maxerr: f64 = 0.0;
    let t0 = Instant::now();
    let mut n = 0;
    for line in text.lines() {
        let v: Vec<&str> = line.split_whitespace().collect();
        if v.len() == 4 && !line.starts_with('#') && v[2].contains('.') && !v[0].contains('.') {
            let k: usize = v[0].parse().unwrap();
            let df: f64 = v[1].parse().unwrap();
            let q95: f64 = v[2].parse().unwrap();
            let q99: f64 = v[3].parse().unwrap();
            let a = studentized_range_quantile(0.95, k, df).unwrap();
            let b = studentized_range_quantile(0.99, k, df).unwrap();
            let c = studentized_range_cdf(q95, k, df).unwrap();
            n += 3;
            let e = ((a - q95) / q95).abs().max(((b - q99) / q99).abs());
            maxerr = maxerr.max(e);
            println!("{k} {df} {a} {q95} {:.2e} {:.2e} cdf-0.95 {:.2e}", (a - q95) / q95, (b - q99) / q99, c - 0.95);
        } else if v.len() == 5 && !line.starts_with('#') {
            let q: f64 = v[0].parse().unwrap();
            let k: usize = v[1].parse().unwrap();
            let df: f64 = v[2].parse().unwrap();
            let c: f64 = v[3].parse().unwrap();
            let s: f64 = v[4].parse().unwrap();
            let mc = studentized_range_cdf(q, k, df).unwrap();
            let ms = studentized_range_sf(q, k, df).unwrap();
            n += 2;
            println!("cdf {q} {k} {df}: {:.2e} sf rel {:.2e}", mc - c, (ms - s) / s);
        }
    }
    println!("max rel quantile err {maxerr:.2e}; {n} evals in {:?}", t0.elapsed());
}
