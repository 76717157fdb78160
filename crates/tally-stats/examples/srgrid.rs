use tally_stats::studentized_range::*;
fn main() {
    for k in [2usize, 3, 5, 10, 20, 50] {
        for df in [2.0, 3.0, 5.0, 10.0, 30.0, 100.0, 1000.0, 1e6, f64::INFINITY] {
            for q in [0.3, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 50.0, 80.0] {
                println!("{k} {df} {q} {:e} {:e}", studentized_range_cdf(q, k, df).unwrap(), studentized_range_sf(q, k, df).unwrap());
            }
        }
    }
}
