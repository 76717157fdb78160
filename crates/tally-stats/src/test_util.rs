//! Helpers shared by the unit tests.

/// Fails unless `got` is within `rel` (relative) of the reference value `want`.
pub(crate) fn assert_close(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        (got - want).abs() <= rel * want.abs(),
        "{what}: got {got}, want {want} (rel err {:.2e})",
        (got - want) / want
    );
}
