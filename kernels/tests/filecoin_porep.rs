//! PoRep C2 for a 2 KiB sector computed by this crate from filecoin-proofs' C1 output, checked
//! with filecoin-proofs' own `verify_seal` (issue 5).
//!
//! One process-wide fixture seals a sector (PC1, PC2, C1: milliseconds) and generates the 2 KiB
//! PoRep parameters once with the fast generator into a parameter cache dir under the build's
//! temp dir (regenerated every run, overwritten in place so nothing piles up).
//! `FIL_PROOFS_PARAMETER_CACHE` points filecoin-proofs there, so its verifier reads the `.vk`
//! written beside the `.params` our prover reads.
#![cfg(feature = "filecoin")]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use filecoin_proofs::{
    add_piece, generate_piece_commitment, get_seal_inputs, seal_commit_phase1,
    seal_pre_commit_phase1, seal_pre_commit_phase2, verify_seal, PaddedBytesAmount,
    SealCommitPhase1Output, SectorShape2KiB, UnpaddedBytesAmount,
};
use kernels::filecoin::{
    generate_porep_parameters, parse_c1, porep_config, ApiVersion, ParamFiles, PoRepC2,
    PoRepConfig, PARTITION_PROOF_LEN,
};
use kernels::srs::SrsImage;
use kernels::synth::circuit_shape;
use kernels::{CpuBackend, ErrorKind};
use rand::{Rng, SeedableRng};
use storage_proofs_core::sector::SectorId;

const SECTOR_SIZE: u64 = 2048;
const POREP_ID: [u8; 32] = [5; 32];
/// A valid field element (the top byte is small).
const PROVER_ID: [u8; 32] = [9; 32];
const SECTOR_ID: u64 = 4242;

struct Sealed {
    config: PoRepConfig,
    c1_json: Vec<u8>,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    ticket: [u8; 32],
    seed: [u8; 32],
}

fn work_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-porep")
}

fn config() -> PoRepConfig {
    porep_config(SECTOR_SIZE, POREP_ID, ApiVersion::V1_2_0).unwrap()
}

/// Points filecoin-proofs' settings (read once per process) at the test dirs before any call.
fn settings() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = work_dir();
        std::fs::create_dir_all(dir.join("params")).unwrap();
        std::fs::create_dir_all(dir.join("parents")).unwrap();
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir.join("params"));
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir.join("parents"));
        std::env::remove_var("FIL_PROOFS_VERIFY_PRODUCTION_PARAMS");
        dir
    })
}

/// PC1, PC2 and C1 of a 2 KiB sector with seeded random data.
fn sealed() -> &'static Sealed {
    static SEALED: OnceLock<Sealed> = OnceLock::new();
    SEALED.get_or_init(|| {
        settings();
        let t = Instant::now();
        let config = config();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
        let dir = tempfile::tempdir().unwrap();
        let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(SECTOR_SIZE));
        let data: Vec<u8> = (0..u64::from(unpadded)).map(|_| rng.gen()).collect();
        let piece_info = generate_piece_commitment(&data[..], unpadded).unwrap();
        let staged = dir.path().join("staged");
        let sealed = dir.path().join("sealed");
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(&sealed, []).unwrap();
        let mut staged_file = std::fs::File::create(&staged).unwrap();
        add_piece(&data[..], &mut staged_file, unpadded, &[]).unwrap();
        drop(staged_file);
        let ticket: [u8; 32] = rng.gen();
        let seed: [u8; 32] = rng.gen();
        let pieces = [piece_info];
        let sector_id = SectorId::from(SECTOR_ID);
        let pc1 = seal_pre_commit_phase1::<_, _, _, SectorShape2KiB>(
            &config, &cache, &staged, &sealed, PROVER_ID, sector_id, ticket, &pieces,
        )
        .unwrap();
        let pc2 = seal_pre_commit_phase2(&config, pc1, &cache, &sealed).unwrap();
        let (comm_r, comm_d) = (pc2.comm_r, pc2.comm_d);
        let c1 = seal_commit_phase1::<_, SectorShape2KiB>(
            &config, &cache, &sealed, PROVER_ID, sector_id, ticket, seed, pc2, &pieces,
        )
        .unwrap();
        let c1_json = serde_json::to_vec(&c1).unwrap();
        eprintln!(
            "sealed a 2 KiB sector (PC1, PC2, C1) in {:.2} s; C1 JSON {} bytes",
            t.elapsed().as_secs_f64(),
            c1_json.len()
        );
        Sealed {
            config,
            c1_json,
            comm_r,
            comm_d,
            ticket,
            seed,
        }
    })
}

/// The 2 KiB PoRep parameters, generated once per run with the fast generator.
fn params() -> &'static ParamFiles {
    static FILES: OnceLock<ParamFiles> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = settings().join("params");
        let t = Instant::now();
        let (files, params) =
            generate_porep_parameters::<SectorShape2KiB>(&config(), &dir, 17, &|_| {}).unwrap();
        eprintln!(
            "generated 2 KiB PoRep parameters ({} h, {} l points) in {:.1} s",
            params.h.len(),
            params.l.len(),
            t.elapsed().as_secs_f64()
        );
        assert_eq!(
            files,
            ParamFiles::porep::<SectorShape2KiB>(&config(), &dir).unwrap()
        );
        files
    })
}

fn verify(s: &Sealed, sector_id: u64, comm_r: [u8; 32], proof: &[u8]) -> bool {
    verify_seal::<SectorShape2KiB>(
        &s.config,
        comm_r,
        s.comm_d,
        PROVER_ID,
        SectorId::from(sector_id),
        s.ticket,
        s.seed,
        proof,
    )
    .unwrap()
}

#[test]
fn c2_from_c1_verifies_with_filecoin_proofs() {
    let s = sealed();
    let job = PoRepC2::<SectorShape2KiB>::from_json(&s.config, &s.c1_json).unwrap();
    assert_eq!(job.partitions(), 1);

    // Our public inputs are the verifier's, partition by partition.
    let theirs = get_seal_inputs::<SectorShape2KiB>(
        &s.config,
        s.comm_r,
        s.comm_d,
        PROVER_ID,
        SectorId::from(SECTOR_ID),
        s.ticket,
        s.seed,
    )
    .unwrap();
    for (k, inputs) in theirs.iter().enumerate() {
        assert_eq!(&job.public_inputs(k).unwrap(), inputs, "partition {k}");
    }

    let files = params();
    let t = Instant::now();
    let image = SrsImage::from_params_file(&files.params, files.circuit_id(), false).unwrap();
    let backend = CpuBackend::new(image).unwrap();
    let load_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(99);
    let proof = job.prove(&backend, &mut rng).unwrap();
    eprintln!(
        "loaded .params in {load_s:.1} s; C2 (synthesis + CPU proof) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(proof.len(), PARTITION_PROOF_LEN * job.partitions());

    assert!(
        verify(s, SECTOR_ID, s.comm_r, &proof),
        "verify_seal refused our proof"
    );
    // The same proof must not pass for another sector.
    assert!(
        !verify(s, SECTOR_ID + 1, s.comm_r, &proof),
        "accepted for another sector id"
    );
    let mut other_comm_r = s.comm_r;
    other_comm_r[0] ^= 1;
    assert!(
        !verify(s, SECTOR_ID, other_comm_r, &proof),
        "accepted for another comm_r"
    );
    let mut damaged = proof.clone();
    damaged[PARTITION_PROOF_LEN - 1] ^= 1;
    assert!(
        !verify_seal::<SectorShape2KiB>(
            &s.config,
            s.comm_r,
            s.comm_d,
            PROVER_ID,
            SectorId::from(SECTOR_ID),
            s.ticket,
            s.seed,
            &damaged,
        )
        .unwrap_or(false),
        "accepted a damaged proof"
    );
}

#[test]
fn partition_circuit_has_the_known_shape() {
    let s = sealed();
    let job = PoRepC2::<SectorShape2KiB>::from_json(&s.config, &s.c1_json).unwrap();
    let shape = job.shape(0).unwrap();
    assert_eq!(shape, circuit_shape(job.circuit(0).unwrap()).unwrap());
    // 2,687,921 constraints and 1 + 39 inputs for the 2 KiB PoRep (issue 5).
    assert_eq!(shape.constraints, 2_687_921);
    assert_eq!(shape.inputs, 40);
    assert_eq!(job.public_inputs(0).unwrap().len(), 39);
    let e = job.circuit(1).err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::PoRepConfig(_)), "{e}");
}

#[test]
fn bad_c1_gives_clear_errors() {
    let s = sealed();
    let json = &s.c1_json;

    let e = PoRepC2::<SectorShape2KiB>::from_json(&s.config, &json[..json.len() / 2])
        .err()
        .unwrap();
    assert!(matches!(e.kind(), ErrorKind::InvalidC1(_)), "{e}");
    assert!(e.to_string().contains("truncated JSON"), "{e}");

    let e = PoRepC2::<SectorShape2KiB>::from_json(&s.config, b"not json")
        .err()
        .unwrap();
    assert!(e.to_string().contains("malformed JSON"), "{e}");
    eprintln!("{e}");

    // Files: the error names the file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c1.json");
    let e = PoRepC2::<SectorShape2KiB>::from_c1_file(&s.config, &path)
        .err()
        .unwrap();
    assert!(e.to_string().contains("c1.json"), "{e}");
    std::fs::write(&path, &json[..json.len() - 1]).unwrap();
    let e = PoRepC2::<SectorShape2KiB>::from_c1_file(&s.config, &path)
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("c1.json") && e.to_string().contains("truncated"),
        "{e}"
    );
    eprintln!("{e}");
    std::fs::write(&path, json).unwrap();
    assert_eq!(
        PoRepC2::<SectorShape2KiB>::from_c1_file(&s.config, &path)
            .unwrap()
            .partitions(),
        1
    );

    // Another porep id (another proof type): the vanilla proofs are for another graph.
    let other = porep_config(SECTOR_SIZE, [6; 32], ApiVersion::V1_2_0).unwrap();
    let e = PoRepC2::<SectorShape2KiB>::from_json(&other, json)
        .err()
        .unwrap();
    assert!(e.to_string().contains("do not verify"), "{e}");
    eprintln!("{e}");

    // Another sector size with the same tree shape.
    let big = porep_config(8 << 20, POREP_ID, ApiVersion::V1_2_0).unwrap();
    let e = PoRepC2::<SectorShape2KiB>::from_json(&big, json)
        .err()
        .unwrap();
    assert!(
        matches!(e.kind(), ErrorKind::InvalidC1(_) | ErrorKind::Filecoin(_)),
        "{e}"
    );
    eprintln!("{e}");

    // Another proof type: a 32 GiB sector (another tree shape, 10 partitions).
    let huge = porep_config(32 << 30, POREP_ID, ApiVersion::V1_2_0).unwrap();
    let e = PoRepC2::<kernels::filecoin::SectorShapeSub8>::from_json(&huge, json)
        .err()
        .unwrap();
    eprintln!("{e}");
    assert!(matches!(e.kind(), ErrorKind::InvalidC1(_)), "{e}");
    // The 2 KiB tree shape with a 32 GiB config.
    let e = PoRepC2::<SectorShape2KiB>::from_json(&huge, json)
        .err()
        .unwrap();
    eprintln!("{e}");
    assert!(matches!(e.kind(), ErrorKind::PoRepConfig(_)), "{e}");

    // A damaged seed.
    let mut c1: SealCommitPhase1Output<SectorShape2KiB> = parse_c1(json).unwrap();
    c1.seed[0] ^= 1;
    let e = PoRepC2::new(&s.config, c1).err().unwrap();
    assert!(e.to_string().contains("do not verify"), "{e}");

    // A zero comm_r.
    let mut c1: SealCommitPhase1Output<SectorShape2KiB> = parse_c1(json).unwrap();
    c1.comm_r = [0; 32];
    let e = PoRepC2::new(&s.config, c1).err().unwrap();
    assert!(e.to_string().contains("comm_r"), "{e}");
}
