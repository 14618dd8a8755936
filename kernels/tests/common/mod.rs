//! What the property tests standing in for fuzz targets share.

use proptest::test_runner::Config;

/// `cases` per property, times `SPLITPROVER_FUZZ_SCALE` (default 1) for a longer hunt outside
/// CI; failures are not persisted (the seed is printed).
pub fn fuzz_config(cases: u32) -> Config {
    let scale = std::env::var("SPLITPROVER_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    Config {
        cases: cases.saturating_mul(scale),
        failure_persistence: None,
        ..Config::default()
    }
}
