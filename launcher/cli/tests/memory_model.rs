//! The host memory model at start (issue 14): a configuration that cannot fit is refused before
//! anything large is allocated, with the sizes; one that fits starts.

mod common;
use common::{cli, pipeline_settings, serial};

use std::time::Duration;

use launcher::pipeline::{Pipeline, PipelineError};

#[test]
fn a_ring_larger_than_the_host_is_refused_at_start_with_the_sizes() {
    let _g = serial();
    let mut s = pipeline_settings("sha-chain:1");
    // 4 slots of 16 TiB: no host has that.
    s.slot_bytes = Some(16 << 40);
    let t = std::time::Instant::now();
    let e = match Pipeline::start(s) {
        Err(e) => e,
        Ok(p) => {
            p.shutdown();
            panic!("a 64 TiB ring was accepted");
        }
    };
    assert!(matches!(e, PipelineError::Memory(_)), "{e}");
    let text = e.to_string();
    for needle in [
        "the configuration needs",
        "is available",
        "ring: 4 slots x 16384.00 GiB",
        "SRS image of sha-chain:1",
        "synthesis: ",
        "hint: fewer ring slots",
    ] {
        assert!(text.contains(needle), "`{needle}` not in:\n{text}");
    }
    // Refused before the ring or the SRS was made (no 64 TiB prefault was tried).
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

#[test]
fn the_service_refuses_a_config_that_cannot_fit_and_names_the_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let srs = common::srs_for("sha-chain:1");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "cache_dir = {:?}\nsocket = {:?}\n[ring]\nslots = 3\nslot_bytes = \"8192GiB\"\n\
             [synthesis]\nworker_memory = \"1GiB\"\n[[circuit]]\nspec = \"sha-chain:1\"\nsrs = {:?}\n",
            dir.path().join("cache"),
            dir.path().join("sp.sock"),
            srs
        ),
    )
    .unwrap();
    let (code, _out, err) = cli(&["run", "--config", config.to_str().unwrap()], &[]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("the configuration needs"), "{err}");
    assert!(err.contains("ring: 3 slots x 8192.00 GiB"), "{err}");
    assert!(err.contains("workers x 1.00 GiB"), "{err}");
}

#[test]
fn a_configuration_that_fits_starts_and_proves() {
    let _g = serial();
    let p = Pipeline::start(pipeline_settings("sha-chain:1")).unwrap();
    p.wait_ready(Duration::from_secs(60)).unwrap();
    let o = p.submit("sha-chain:1", 3, 1).unwrap().wait().unwrap();
    assert!(o.result.is_ok(), "{:?}", o.result.err());
    p.shutdown();
}
