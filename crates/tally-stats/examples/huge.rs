use tally_stats::*;
fn main() {
    for df in [1e11, 1e13, 1e300] {
        println!("sr {df}: {:?} {:?}", studentized_range_quantile(0.95, 3, df), studentized_range_sf(3.5, 3, df));
        println!("t {df}: {:?} {:?}", t_quantile(0.95, df), t_sf(2.0, df));
        println!("f {df}: {:?} {:?}", f_quantile(0.95, 3.0, df), f_sf(2.0, 3.0, df));
        println!("f1 {df}: {:?} {:?}", f_quantile(0.95, df, 3.0), f_sf(2.0, df, 3.0));
    }
    println!("sr inf {:?}", studentized_range_quantile(0.95, 3, f64::INFINITY));
    println!("tiny df t {:?} {:?}", t_quantile(0.95, 1e-3), t_quantile(0.999999, 0.05));
    println!("tiny df f {:?}", f_quantile(0.95, 1e-3, 0.01));
    println!("extreme p {:?} {:?}", t_quantile(1e-300, 3.0), studentized_range_quantile(1.0 - 1e-15, 5, 10.0));
}
