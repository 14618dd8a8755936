//! PoRep C2 for a 2 KiB sector computed by this crate from the C1 output, checked with
//! filecoin-proofs' own `verify_seal` (issue 5).
//!
//! One process-wide fixture seals a sector through filecoin-proofs-api (PC1, PC2, C1:
//! milliseconds) and makes sure the 2 KiB PoRep parameters exist in the shared test parameter
//! cache (`target/filecoin-test-params`, generated once with the fast generator and a fixed seed,
//! so every test binary agrees on them). `FIL_PROOFS_PARAMETER_CACHE` points filecoin-proofs
//! there, so its verifier reads the `.vk` written beside the `.params` our prover reads.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use filecoin_proofs::{get_seal_inputs, SealCommitPhase1Output, SectorShape2KiB};
use kernels::filecoin::fixture::{seal_sector, SealedSector};
use kernels::filecoin::{
    self, detect_kind, open_job, FilecoinJob, ParamFiles, PoRepC2, ProofKind, RegisteredSealProof,
    PARTITION_PROOF_LEN,
};
use kernels::srs::SrsImage;
use kernels::synth::circuit_shape;
use kernels::{CpuBackend, ErrorKind};
use rand::SeedableRng;
use storage_proofs_core::sector::SectorId;

const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const SECTOR_ID: u64 = 4242;

/// The shared test parameter cache, `target/filecoin-test-params` of the checkout. The checkout
/// is found at run time (cargo sets `CARGO_MANIFEST_DIR` for tests too), so that the test binary
/// does not depend on where it is and stays fresh in a target dir shared by several checkouts.
fn param_dir() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("run by `cargo test`");
    Path::new(&manifest).join("../target/filecoin-test-params")
}

/// Points filecoin-proofs' settings (read once per process) at the test dirs before any call.
fn settings() {
    kernels::filecoin::fixture::use_test_dirs(
        &param_dir(),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-parents"),
    )
    .unwrap();
}

fn sealed() -> &'static SealedSector {
    static SEALED: OnceLock<SealedSector> = OnceLock::new();
    SEALED.get_or_init(|| {
        settings();
        let t = Instant::now();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-porep");
        let s = seal_sector(PROOF, &dir, SECTOR_ID, 11).unwrap();
        eprintln!(
            "sealed a 2 KiB sector (PC1, PC2, C1) in {:.2} s; C1 JSON {} bytes",
            t.elapsed().as_secs_f64(),
            s.c1_json.len()
        );
        s
    })
}

/// The 2 KiB PoRep parameters of the shared test cache.
fn params() -> &'static ParamFiles {
    static FILES: OnceLock<ParamFiles> = OnceLock::new();
    FILES.get_or_init(|| {
        settings();
        let files =
            kernels::filecoin::fixture::test_parameters(ProofKind::PoRep(PROOF), &param_dir())
                .unwrap();
        assert_eq!(
            files,
            ParamFiles::for_kind(ProofKind::PoRep(PROOF), param_dir()).unwrap()
        );
        files
    })
}

fn backend() -> CpuBackend {
    let files = params();
    let image = SrsImage::from_params_file(&files.params, files.circuit_id(), false).unwrap();
    CpuBackend::new(image).unwrap()
}

/// A sector sealed once is read back from its record, also where only the record was carried
/// (no replica), and proves and verifies the same; another seed seals again; a damaged record
/// is an error naming it.
#[test]
fn a_sealed_sectors_record_stands_in_for_sealing_it_again() {
    use kernels::filecoin::fixture::{seal_sector_once, sector_record_path};
    settings();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("filecoin-porep-record");
    let _ = std::fs::remove_dir_all(&dir);
    let (first, sealed) = seal_sector_once(PROOF, &dir, 7, 3).unwrap();
    assert!(sealed);
    // the record alone, as carried to another machine
    let carried = dir.join("carried");
    std::fs::create_dir_all(&carried).unwrap();
    std::fs::copy(sector_record_path(&dir, 7), sector_record_path(&carried, 7)).unwrap();
    let (again, sealed) = seal_sector_once(PROOF, &carried, 7, 3).unwrap();
    assert!(!sealed);
    assert_eq!(
        (
            again.c1_json.as_slice(),
            again.comm_r,
            again.comm_d,
            again.ticket,
            again.seed
        ),
        (
            first.c1_json.as_slice(),
            first.comm_r,
            first.comm_d,
            first.ticket,
            first.seed
        )
    );
    assert!(again.files.is_none());
    let job = open_job(again.kind(), &again.c1_json).unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
    let proof = filecoin::prove_job(&*job, &backend(), &mut rng).unwrap();
    assert!(again.verify(&proof, None).unwrap());
    assert!(first.verify(&proof, None).unwrap());
    // another seed is another sector: sealed again, its record replaced
    let (other, sealed) = seal_sector_once(PROOF, &dir, 7, 4).unwrap();
    assert!(sealed);
    assert_ne!(other.comm_r, first.comm_r);
    assert!(!seal_sector_once(PROOF, &dir, 7, 4).unwrap().1);
    std::fs::write(sector_record_path(&dir, 7), b"{ not a record").unwrap();
    let e = seal_sector_once(PROOF, &dir, 7, 4).unwrap_err().to_string();
    assert!(
        e.contains("sector-7.json") && e.contains("delete it"),
        "{e}"
    );
}

#[test]
fn c2_from_c1_verifies_with_filecoin_proofs() {
    let s = sealed();
    assert_eq!(detect_kind(&s.c1_json).unwrap(), ProofKind::PoRep(PROOF));
    let job = open_job(s.kind(), &s.c1_json).unwrap();
    assert_eq!(job.partitions(), 1);

    // Our public inputs are the verifier's, partition by partition.
    let theirs = get_seal_inputs::<SectorShape2KiB>(
        &PROOF.as_v1_config(),
        s.comm_r,
        s.comm_d,
        s.prover_id,
        SectorId::from(SECTOR_ID),
        s.ticket,
        s.seed,
    )
    .unwrap();
    for (k, inputs) in theirs.iter().enumerate() {
        assert_eq!(&job.public_inputs(k).unwrap(), inputs, "partition {k}");
    }

    let backend = backend();
    let t = Instant::now();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(99);
    let proof = filecoin::prove_job(&*job, &backend, &mut rng).unwrap();
    eprintln!(
        "C2 (synthesis + CPU proof) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(proof.len(), PARTITION_PROOF_LEN * job.partitions());

    assert!(
        s.verify(&proof, None).unwrap(),
        "verify_seal refused our proof"
    );
    // The same proof must not pass for another sector.
    assert!(
        !s.verify(&proof, Some(SECTOR_ID + 1)).unwrap(),
        "accepted for another sector id"
    );
    let mut other = s.clone();
    other.comm_r[0] ^= 1;
    assert!(
        !other.verify(&proof, None).unwrap_or(false),
        "accepted for another comm_r"
    );
    let mut damaged = proof.clone();
    damaged[PARTITION_PROOF_LEN - 1] ^= 1;
    assert!(
        !s.verify(&damaged, None).unwrap_or(false),
        "accepted a damaged proof"
    );
}

#[test]
fn every_c1_form_gives_the_same_circuits() {
    let s = sealed();
    let api = open_job(s.kind(), &s.c1_json).unwrap();
    // lotus-bench's Commit2In wrapper: the kind is read from the inner C1 output.
    let wrapped = s.commit2in_json();
    assert_eq!(detect_kind(&wrapped).unwrap(), s.kind());
    let bench = open_job(s.kind(), &wrapped).unwrap();
    // filecoin-proofs' own form (no proof type inside): the kind must be given.
    let api_c1: filecoin_proofs_api::seal::SealCommitPhase1Output =
        serde_json::from_slice(&s.c1_json).unwrap();
    let raw = SealCommitPhase1Output::<SectorShape2KiB> {
        vanilla_proofs: api_c1.vanilla_proofs.try_into().unwrap(),
        comm_r: api_c1.comm_r,
        comm_d: api_c1.comm_d,
        replica_id: {
            let f: blstrs::Scalar = api_c1.replica_id.into();
            f.into()
        },
        seed: api_c1.seed,
        ticket: api_c1.ticket,
    };
    let raw_json = serde_json::to_vec(&raw).unwrap();
    let e = detect_kind(&raw_json).unwrap_err();
    assert!(e.to_string().contains("without its proof type"), "{e}");
    let own = open_job(s.kind(), &raw_json).unwrap();
    for job in [&bench, &own] {
        assert_eq!(job.partitions(), api.partitions());
        assert_eq!(job.public_inputs(0).unwrap(), api.public_inputs(0).unwrap());
    }
    let typed = FilecoinJob::new(PoRepC2::<SectorShape2KiB>::from_json(PROOF, &raw_json).unwrap());
    assert_eq!(
        kernels::job::Job::public_inputs(&typed, 0).unwrap(),
        api.public_inputs(0).unwrap()
    );
}

#[test]
fn the_precompiled_synthesis_writes_the_full_synthesis_bytes() {
    let s = sealed();
    let job = open_job(s.kind(), &s.c1_json).unwrap();
    let t = Instant::now();
    let r1cs = job.circuit().compile().unwrap();
    eprintln!(
        "2 KiB PoRep matrices: {} MiB, nnz {:?}, {} coefficients, recorded in {:.1} s",
        r1cs.bytes() >> 20,
        r1cs.nnz(),
        r1cs.coefficients(),
        t.elapsed().as_secs_f64()
    );
    kernels::job::check_compiled(&*job, &r1cs).unwrap();
}

/// Issue 31: the partition's witness pass packed into a witness-only assignment (its 0/1 aux
/// variables one bit each) expands back to the full synthesis byte for byte, and proves to the
/// full synthesis's proof bytes for the same `r` and `s`, which `verify_seal` accepts.
#[test]
fn a_witness_only_partition_expands_to_the_full_synthesis_and_proves_the_same() {
    use kernels::synth::{Synthesis, VecSink};
    use kernels::witness::{expand, PackedWitness, WitnessLayout};
    use kernels::Backend;
    let s = sealed();
    let job = open_job(s.kind(), &s.c1_json).unwrap();
    let r1cs = job.circuit().compile().unwrap();
    let t = Instant::now();
    let layout = WitnessLayout::of(&r1cs);
    let layout_s = t.elapsed().as_secs_f64();
    let measured = job.circuit().measure().unwrap();
    assert_eq!(
        measured.bit_aux,
        layout.bits(),
        "`measure` counts the same bits"
    );
    let mut full = VecSink::new();
    job.synthesize_partition(0, &mut full).unwrap();
    let full = full.finish();
    let t = Instant::now();
    let packed = PackedWitness::fill(&layout, |sink| {
        job.synthesize_partition_with(0, sink, Synthesis::Witness(r1cs.shape()))
    })
    .unwrap();
    let witness_s = t.elapsed().as_secs_f64();
    let zero_one = full
        .aux
        .iter()
        .filter(|v| **v == blstrs::Scalar::from(0u64) || **v == blstrs::Scalar::from(1u64))
        .count();
    let packed_bytes =
        32 * (packed.input.len() + packed.non_bits.len()) + 8 * packed.bit_values.len();
    eprintln!(
        "2 KiB PoRep: {} of {} aux are bit variables ({zero_one} aux values are 0 or 1), layout in \
         {layout_s:.2} s; witness {packed_bytes} bytes (packed in {witness_s:.2} s) against {} \
         for a, b, c, input and aux",
        layout.bits(),
        layout.aux(),
        32 * (3 * full.a.len() + full.input.len() + full.aux.len())
    );
    let t = Instant::now();
    let e = expand(
        &r1cs,
        &layout,
        &packed.input,
        &packed.bit_values,
        &packed.non_bits,
    )
    .unwrap();
    eprintln!("expanded on the host in {:.2} s", t.elapsed().as_secs_f64());
    assert_eq!(packed.input, full.input);
    assert!(e.aux == full.aux, "aux differs");
    assert!(
        e.a == full.a && e.b == full.b && e.c == full.c,
        "a, b or c differs"
    );

    let backend = backend();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(31);
    let theirs = filecoin::prove_job(&*job, &backend, &mut rng).unwrap();
    // prove_job draws r, then s, per partition.
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(31);
    use ff::Field;
    let (r, s_) = (
        blstrs::Scalar::random(&mut rng),
        blstrs::Scalar::random(&mut rng),
    );
    let ours = backend
        .prove_batch(&[e.assignment(&packed.input, &r1cs)], &[r], &[s_])
        .unwrap();
    let mut bytes = Vec::new();
    ours[0].write(&mut bytes).unwrap();
    assert_eq!(bytes, theirs, "the witness path's proof bytes");
    assert!(s.verify(&bytes, None).unwrap(), "verify_seal refused");
}

#[test]
fn partition_circuit_has_the_known_shape() {
    let s = sealed();
    let job = FilecoinJob::new(
        PoRepC2::<SectorShape2KiB>::from_json(PROOF, &serde_json::to_vec(&raw_of(s)).unwrap())
            .unwrap(),
    );
    let shape = job.shape(0).unwrap();
    assert_eq!(shape, circuit_shape(job.circuit(0).unwrap()).unwrap());
    // 2,687,921 constraints and 1 + 39 inputs for the 2 KiB PoRep (issue 5); the blank circuit
    // has the same shape.
    assert_eq!(shape.constraints, 2_687_921);
    assert_eq!(shape.inputs, 40);
    assert_eq!(s.kind().shape().unwrap(), shape);
    assert_eq!(job.public_inputs(0).unwrap().len(), 39);
    let e = job.circuit(1).err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::PoRepConfig(_)), "{e}");
}

fn raw_of(s: &SealedSector) -> SealCommitPhase1Output<SectorShape2KiB> {
    let api_c1: filecoin_proofs_api::seal::SealCommitPhase1Output =
        serde_json::from_slice(&s.c1_json).unwrap();
    let f: blstrs::Scalar = api_c1.replica_id.into();
    SealCommitPhase1Output {
        vanilla_proofs: api_c1.vanilla_proofs.try_into().unwrap(),
        comm_r: api_c1.comm_r,
        comm_d: api_c1.comm_d,
        replica_id: f.into(),
        seed: api_c1.seed,
        ticket: api_c1.ticket,
    }
}

#[test]
fn bad_c1_gives_clear_errors() {
    let s = sealed();
    let json = &s.c1_json;

    let e = open_job(s.kind(), &json[..json.len() / 2]).err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::InvalidC1(_)), "{e}");
    assert!(e.to_string().contains("truncated JSON"), "{e}");
    let e = open_job(s.kind(), b"not json").err().unwrap();
    assert!(e.to_string().contains("malformed JSON"), "{e}");

    // Files: the error names the file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c1.json");
    let e = filecoin::open_job_file(None, &path).err().unwrap();
    assert!(e.to_string().contains("c1.json"), "{e}");
    std::fs::write(&path, &json[..json.len() - 1]).unwrap();
    let e = filecoin::open_job_file(None, &path).err().unwrap();
    assert!(
        e.to_string().contains("c1.json") && e.to_string().contains("truncated"),
        "{e}"
    );
    std::fs::write(&path, json).unwrap();
    assert_eq!(
        filecoin::open_job_file(None, &path).unwrap().partitions(),
        1
    );

    // The C1 output says it is a V1_1 2 KiB proof: opening it as another type is refused.
    for other in [
        "porep:StackedDrg2KiBV1",
        "porep:StackedDrg8MiBV1_1",
        "porep:StackedDrg32GiBV1_1",
    ] {
        let e = open_job(other.parse().unwrap(), json).err().unwrap();
        assert!(matches!(e.kind(), ErrorKind::InvalidC1(_)), "{other}: {e}");
        eprintln!("{other}: {e}");
    }
    // filecoin-proofs' own form opened as another proof type of the same tree shape: its vanilla
    // proofs are for another graph (porep id) or sector size.
    let raw_json = serde_json::to_vec(&raw_of(s)).unwrap();
    for other in ["porep:StackedDrg2KiBV1", "porep:StackedDrg8MiBV1_1"] {
        let e = open_job(other.parse().unwrap(), &raw_json).err().unwrap();
        assert!(
            matches!(e.kind(), ErrorKind::InvalidC1(_) | ErrorKind::Filecoin(_)),
            "{other}: {e}"
        );
        eprintln!("{other}: {e}");
    }
    // Another tree shape.
    let e = open_job("porep:StackedDrg32GiBV1_1".parse().unwrap(), &raw_json)
        .err()
        .unwrap();
    assert!(matches!(e.kind(), ErrorKind::InvalidC1(_)), "{e}");

    // A damaged seed.
    let mut c1 = raw_of(s);
    c1.seed[0] ^= 1;
    let e = PoRepC2::new(PROOF, c1).err().unwrap();
    assert!(e.to_string().contains("do not verify"), "{e}");
    // A zero comm_r.
    let mut c1 = raw_of(s);
    c1.comm_r = [0; 32];
    let e = PoRepC2::new(PROOF, c1).err().unwrap();
    assert!(e.to_string().contains("comm_r"), "{e}");
    // Non-interactive PoRep is refused by name.
    let e = open_job(
        ProofKind::PoRep(RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep),
        json,
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("non-interactive"), "{e}");
}

/// Our GPU prover on a 2 KiB PoRep partition: the same 192 bytes per partition as the CPU
/// backend for the same `r` and `s` (the same rng), and filecoin-proofs' `verify_seal` accepts
/// them. Without a GPU it says so and returns; `SPLITPROVER_TEST_REQUIRE_GPU=1` makes that a
/// failure.
#[cfg(feature = "cuda")]
#[test]
fn the_gpu_backend_proves_the_cpu_backends_bytes() {
    use kernels::backend::gpu::GpuBackend;
    use kernels::srs::SrsView;
    if !kernels::backend::cuda::gpu_for_test("the_gpu_backend_proves_the_cpu_backends_bytes") {
        return;
    }
    let s = sealed();
    let files = params();
    let image = SrsImage::from_params_file(&files.params, files.circuit_id(), false).unwrap();
    let gpu = GpuBackend::new(&SrsView::new(image.as_ref()).unwrap()).unwrap();
    let cpu = CpuBackend::new(image).unwrap();
    let job = open_job(s.kind(), &s.c1_json).unwrap();
    for seed in [1u64, 2, 3] {
        // The same rng, so the same r and s, for both backends.
        let prove = |backend: &dyn kernels::Backend| {
            let t = Instant::now();
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
            let bytes = filecoin::prove_job(&*job, backend, &mut rng).unwrap();
            (bytes, t.elapsed().as_secs_f64())
        };
        let (theirs, cpu_s) = prove(&cpu);
        let (ours, gpu_s) = prove(&gpu);
        eprintln!("seed {seed}: CPU {cpu_s:.2} s, GPU {gpu_s:.2} s (synthesis included)");
        assert_eq!(
            ours, theirs,
            "seed {seed}: GPU bytes differ from the CPU backend's"
        );
        assert!(
            s.verify(&ours, None).unwrap(),
            "seed {seed}: verify_seal refused"
        );
    }
}
