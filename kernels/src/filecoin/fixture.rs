//! Real sealed sectors and real proof requests for tests and benchmarks, all made through
//! filecoin-proofs-api exactly as a lotus or Curio worker makes them, so every request is in the
//! production format:
//! - [`seal_sector`]: PC1, PC2 and C1 of a sector filled with seeded random data (the C1 output
//!   is a PoRep C2 request); [`seal_cc_sector`]: the same for a committed-capacity sector (zero
//!   data), the sector a SnapDeals update starts from. Milliseconds for 2 KiB; about a minute of
//!   CPU for 512 MiB. A sealed sector keeps its replica and cache dir, so it can serve PoSt.
//! - [`post_request`]: a WinningPoSt or WindowPoSt request ([`PoStRequest`]) over sealed sectors
//!   (challenges and vanilla proofs by `generate_winning_post_sector_challenge`,
//!   `generate_fallback_sector_challenges`, `generate_single_vanilla_proof`), with its verifier
//!   (`verify_winning_post`, `verify_window_post`): [`PoStFixture`].
//! - [`snap_request`]: a SnapDeals request ([`SnapRequest`]) updating a CC sector with seeded random
//!   data (`empty_sector_update_encode_into`, `generate_partition_proofs`), with its verifier
//!   (`verify_empty_sector_update_proof`): [`SnapFixture`].
//!
//! The verifiers read the `.vk` files of filecoin-proofs' parameter cache
//! (`FIL_PROOFS_PARAMETER_CACHE`, read once per process: set it before any fil call).
//!
//! Not for production: the sector data is random and the dirs are the caller's scratch space.

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};

use filecoin_proofs_api::post::{
    generate_fallback_sector_challenges, generate_single_vanilla_proof,
    generate_winning_post_sector_challenge, verify_window_post, verify_winning_post,
};
use filecoin_proofs_api::seal::{self, SealCommitPhase1Output};
use filecoin_proofs_api::update::{
    empty_sector_update_encode_into, generate_partition_proofs, verify_empty_sector_update_proof,
};
use filecoin_proofs_api::{
    Commitment, PartitionProofBytes, PoStType, PrivateReplicaInfo, PublicReplicaInfo,
    RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof, SectorId, UnpaddedBytesAmount,
};
use rand::{Rng, SeedableRng};

use super::post::PoStRequest;
use super::update::SnapRequest;
use super::{fil_error, guarded, ProofKind};
use crate::{Error, ErrorKind};

/// Seed of the local test parameters that test binaries share: the same kind and seed give the
/// same files, so whichever binary runs first generates them and the others reuse them.
pub const TEST_PARAM_SEED: u64 = 0x5eed_f11e;

/// Sets the Filecoin environment of a test or bench process: filecoin-proofs' parameter cache at
/// `param_dir` (where its verifiers read the `.vk`) and its parent cache at `parent_dir` (both
/// created), production parameter checks off. filecoin-proofs reads these settings once per
/// process, so this runs before any fil call; later calls change nothing. Child processes
/// inherit the variables.
pub fn use_test_dirs(param_dir: &Path, parent_dir: &Path) -> Result<(), Error> {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    if DONE.get().is_some() {
        return Ok(());
    }
    std::fs::create_dir_all(param_dir)?;
    std::fs::create_dir_all(parent_dir)?;
    DONE.get_or_init(|| {
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", param_dir);
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", parent_dir);
        std::env::remove_var("FIL_PROOFS_VERIFY_PRODUCTION_PARAMS");
    });
    Ok(())
}

/// The parameters of `kind` in `param_dir`, generated with [`TEST_PARAM_SEED`] if missing;
/// says on stderr how long that took.
pub fn test_parameters(kind: ProofKind, param_dir: &Path) -> Result<super::ParamFiles, Error> {
    let t = std::time::Instant::now();
    let (files, generated) = super::ensure_parameters(kind, param_dir, TEST_PARAM_SEED, &|_| {})?;
    eprintln!(
        "{kind} parameters ready in {:.1} s (generated: {generated})",
        t.elapsed().as_secs_f64()
    );
    Ok(files)
}

/// The miner id of the fixtures (t01000, a devnet's first miner).
pub const PROVER_MINER_ID: u64 = 1000;

/// The prover id of the fixtures: the miner's, as lotus and Curio derive it
/// ([`super::curio::prover_id`]).
pub const PROVER_ID: [u8; 32] = super::curio::prover_id(PROVER_MINER_ID);

/// A sealed sector and what its C2 needs and its verifier checks.
#[derive(Clone, Debug)]
pub struct SealedSector {
    /// The seal proof type.
    pub proof: RegisteredSealProof,
    /// Sector number.
    pub sector_id: u64,
    /// Prover id (a field element).
    pub prover_id: [u8; 32],
    /// Replica commitment.
    pub comm_r: [u8; 32],
    /// Data commitment.
    pub comm_d: [u8; 32],
    /// Sealing ticket.
    pub ticket: [u8; 32],
    /// Interactive PoRep challenge seed.
    pub seed: [u8; 32],
    /// The C1 output as filecoin-proofs-api serializes it (what `SealCommitPhase1` returns to
    /// lotus and Curio).
    pub c1_json: Vec<u8>,
    /// The sealed replica file.
    pub replica: PathBuf,
    /// The sector's cache dir (trees, `p_aux`, `t_aux`).
    pub cache: PathBuf,
}

impl SealedSector {
    /// The proof kind of its C2.
    pub fn kind(&self) -> ProofKind {
        ProofKind::PoRep(self.proof)
    }

    /// Checks C2 proof bytes with filecoin-proofs-api's `verify_seal` for this sector, or for
    /// `sector_id` instead of its own (negative tests). Needs the `.vk` in the parameter cache
    /// filecoin-proofs reads (`FIL_PROOFS_PARAMETER_CACHE`).
    pub fn verify(&self, proof: &[u8], sector_id: Option<u64>) -> Result<bool, Error> {
        let sector = SectorId::from(sector_id.unwrap_or(self.sector_id));
        super::guarded("verify_seal", || {
            seal::verify_seal(
                self.proof,
                self.comm_r,
                self.comm_d,
                self.prover_id,
                sector,
                self.ticket,
                self.seed,
                proof,
            )
        })
    }

    /// C2 by stock filecoin-proofs-api `seal_commit_phase2` (bellperson; this build links no fil
    /// GPU code): the reference the benchmarks compare with.
    pub fn stock_c2(&self) -> Result<Vec<u8>, Error> {
        let c1: SealCommitPhase1Output =
            serde_json::from_slice(&self.c1_json).map_err(|e| fil_error("parsing C1", e))?;
        let out = super::guarded("seal_commit_phase2", || {
            seal::seal_commit_phase2(c1, self.prover_id, SectorId::from(self.sector_id))
        })?;
        Ok(out.proof)
    }

    /// lotus-bench's `Commit2In` wrapper of the C1 output (`Phase1Out` as base64).
    pub fn commit2in_json(&self) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "SectorNum": self.sector_id,
            "Phase1Out": super::encode_base64(&self.c1_json),
            "SectorSize": self.kind().sector_size(),
        }))
        .unwrap_or_default()
    }
}

/// Seals sector `sector_id` of type `proof` in `dir` (created; the replica, the cache dir and
/// the staged data live there) with data and randomness drawn from `seed`.
pub fn seal_sector(
    proof: RegisteredSealProof,
    dir: &Path,
    sector_id: u64,
    seed: u64,
) -> Result<SealedSector, Error> {
    seal(proof, dir, sector_id, seed, Data::Random)
}

/// A sealed sector's record, `sector-<id>.json` beside its replica: what [`SealedSector`]
/// holds but the paths, and the seed its data and randomness came from.
#[derive(serde::Serialize, serde::Deserialize)]
struct SectorRecord {
    proof: RegisteredSealProof,
    sector_id: u64,
    data_seed: u64,
    prover_id: [u8; 32],
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    ticket: [u8; 32],
    seed: [u8; 32],
    /// The C1 output, as filecoin-proofs-api serializes it.
    c1: String,
}

/// Sector `sector_id`'s replica file and cache dir in `dir`.
fn sector_files(dir: &Path, sector_id: u64) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("sealed-{sector_id}")),
        dir.join(format!("cache-{sector_id}")),
    )
}

/// The record [`seal_sector_once`] keeps for sector `sector_id` in `dir`.
pub fn sector_record_path(dir: &Path, sector_id: u64) -> PathBuf {
    dir.join(format!("sector-{sector_id}.json"))
}

/// [`seal_sector`] once per sector: a sector sealed in `dir` before with the same proof, id and
/// seed is read back from its record ([`sector_record_path`], written after sealing) instead of
/// sealed again (4 minutes for a 512 MiB sector). Returns the sector and whether it was sealed
/// now. The record holds the C1 output and what `verify_seal` needs, so a sector sealed on one
/// machine can be proved on another from its record alone; only the stock C2 and the PoSts read
/// the replica and cache dir, which must then be there too.
///
/// Errors: a record that cannot be read or parsed names its file (delete it to seal again).
pub fn seal_sector_once(
    proof: RegisteredSealProof,
    dir: &Path,
    sector_id: u64,
    seed: u64,
) -> Result<(SealedSector, bool), Error> {
    let path = sector_record_path(dir, sector_id);
    let bad = |why: String| -> Error {
        ErrorKind::InvalidRequest(format!(
            "sector record `{}`: {why} (delete it to seal the sector again)",
            path.display()
        ))
        .into()
    };
    if path.exists() {
        let (replica, cache) = sector_files(dir, sector_id);
        let text = std::fs::read(&path).map_err(|e| bad(e.to_string()))?;
        let r: SectorRecord = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
        if r.proof == proof && r.sector_id == sector_id && r.data_seed == seed {
            return Ok((
                SealedSector {
                    proof,
                    sector_id,
                    prover_id: r.prover_id,
                    comm_r: r.comm_r,
                    comm_d: r.comm_d,
                    ticket: r.ticket,
                    seed: r.seed,
                    c1_json: r.c1.into_bytes(),
                    replica,
                    cache,
                },
                false,
            ));
        }
    }
    let sector = seal_sector(proof, dir, sector_id, seed)?;
    let record = SectorRecord {
        proof,
        sector_id,
        data_seed: seed,
        prover_id: sector.prover_id,
        comm_r: sector.comm_r,
        comm_d: sector.comm_d,
        ticket: sector.ticket,
        seed: sector.seed,
        c1: String::from_utf8(sector.c1_json.clone()).map_err(|e| bad(e.to_string()))?,
    };
    let json = serde_json::to_vec(&record).map_err(|e| bad(e.to_string()))?;
    // written whole, then renamed: a crash leaves no half record
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, &path)?;
    Ok((sector, true))
}

/// Seals a committed-capacity sector (one piece of zeros, as lotus seals a CC sector): what a
/// SnapDeals update ([`snap_request`]) starts from. Like [`seal_sector`] otherwise (PC1, PC2,
/// C1; ticket and seed drawn from `seed`; files `sealed-<id>`, `cache-<id>` in `dir`, which a
/// sector of the same id sealed there before is replaced by).
pub fn seal_cc_sector(
    proof: RegisteredSealProof,
    dir: &Path,
    sector_id: u64,
    seed: u64,
) -> Result<SealedSector, Error> {
    seal(proof, dir, sector_id, seed, Data::Zeros)
}

/// What a fixture sector or update is filled with.
#[derive(Clone, Copy)]
enum Data {
    /// Drawn from the fixture's generator.
    Random,
    /// A CC sector's.
    Zeros,
}

/// Writes `bytes` bytes of `data` to `path` as one piece, streamed (a 512 MiB sector is not held
/// in memory twice).
fn write_piece<R: Rng>(path: &Path, bytes: u64, data: Data, rng: &mut R) -> Result<(), Error> {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut left = bytes;
    let mut buf = vec![0u8; 1 << 20];
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        if let Data::Random = data {
            rng.fill(&mut buf[..n]);
        }
        w.write_all(&buf[..n])?;
        left -= n as u64;
    }
    w.flush()?;
    Ok(())
}

/// The piece in `data_path` (a whole sector's worth of unpadded bytes) staged into `staged` as
/// the sector's only piece; returns its piece info.
fn stage(
    proof: RegisteredSealProof,
    data_path: &Path,
    staged: &Path,
    unpadded: UnpaddedBytesAmount,
) -> Result<filecoin_proofs_api::PieceInfo, Error> {
    let fil = |what: &'static str| move |e: anyhow::Error| fil_error(what, e);
    let piece = seal::generate_piece_commitment(proof, std::fs::File::open(data_path)?, unpadded)
        .map_err(fil("piece commitment"))?;
    let mut staged_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(staged)?;
    seal::add_piece(
        proof,
        std::fs::File::open(data_path)?,
        &mut staged_file,
        unpadded,
        &[],
    )
    .map_err(fil("add piece"))?;
    staged_file.seek(SeekFrom::Start(0))?;
    Ok(piece)
}

fn seal(
    proof: RegisteredSealProof,
    dir: &Path,
    sector_id: u64,
    seed: u64,
    data: Data,
) -> Result<SealedSector, Error> {
    let fil = |what: &'static str| move |e: anyhow::Error| fil_error(what, e);
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let sector_size = u64::from(proof.sector_size());
    let unpadded = UnpaddedBytesAmount::from(filecoin_proofs_api::PaddedBytesAmount(sector_size));
    std::fs::create_dir_all(dir)?;
    let staged = dir.join(format!("staged-{sector_id}"));
    let (replica, cache) = sector_files(dir, sector_id);
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache)?;
    std::fs::write(&replica, [])?;
    let data_path = dir.join(format!("piece-{sector_id}"));
    write_piece(&data_path, u64::from(unpadded), data, &mut rng)?;
    let piece = stage(proof, &data_path, &staged, unpadded)?;
    std::fs::remove_file(&data_path)?;
    let ticket = field_bytes(&mut rng);
    let challenge = field_bytes(&mut rng);
    let pieces = [piece];
    let sector = SectorId::from(sector_id);
    let pc1 = seal::seal_pre_commit_phase1(
        proof, &cache, &staged, &replica, PROVER_ID, sector, ticket, &pieces,
    )
    .map_err(fil("PC1"))?;
    let pc2 = seal::seal_pre_commit_phase2(pc1, &cache, &replica).map_err(fil("PC2"))?;
    let (comm_r, comm_d) = (pc2.comm_r, pc2.comm_d);
    let c1: SealCommitPhase1Output = seal::seal_commit_phase1(
        &cache, &replica, PROVER_ID, sector, ticket, challenge, pc2, &pieces,
    )
    .map_err(fil("C1"))?;
    let c1_json = serde_json::to_vec(&c1).map_err(|e| fil_error("serializing C1", e))?;
    std::fs::remove_file(&staged)?;
    Ok(SealedSector {
        proof,
        sector_id,
        prover_id: PROVER_ID,
        comm_r,
        comm_d,
        ticket,
        seed: challenge,
        c1_json,
        replica,
        cache,
    })
}

/// 32 random bytes that are a valid field element (top byte cleared, as lotus' randomness is
/// reduced).
fn field_bytes<R: Rng>(rng: &mut R) -> [u8; 32] {
    let mut b: [u8; 32] = rng.gen();
    b[31] &= 0x3f;
    b
}

/// PoSt randomness drawn from `seed` (a valid field element, as lotus draws it: the top two bits
/// clear). Different seeds give different randomness.
pub fn randomness(seed: u64) -> [u8; 32] {
    field_bytes(&mut rand_chacha::ChaCha20Rng::seed_from_u64(seed))
}

fn config_error(reason: String) -> Error {
    ErrorKind::PoRepConfig(reason).into()
}

/// A WinningPoSt or WindowPoSt request over sealed sectors ([`post_request`]) and what its
/// verifier needs. The fields are the verifier's inputs: a clone with one of them changed checks
/// a proof against altered inputs (see also [`PoStFixture::verify_with`]).
#[derive(Clone, Debug)]
pub struct PoStFixture {
    /// The registered PoSt proof.
    pub proof: RegisteredPoStProof,
    /// The prover id (the sectors').
    pub prover_id: [u8; 32],
    /// The PoSt randomness (a field element).
    pub randomness: [u8; 32],
    /// The challenged sectors as the verifier lists them, `(sector id, comm_r)`: WinningPoSt the
    /// sector(s) `generate_winning_post_sector_challenge` picked, WindowPoSt every sector, in
    /// ascending sector id order (the order of the vanilla proofs).
    pub sectors: Vec<(u64, [u8; 32])>,
    /// One vanilla proof per entry of `sectors`, in that order: the bytes filecoin-proofs-api's
    /// `generate_single_vanilla_proof` returns.
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// The request proving every partition.
    pub request: PoStRequest,
    /// `request` as JSON: what [`super::open_job`], a request file and the pipeline take.
    pub json: Vec<u8>,
}

impl PoStFixture {
    /// The proof kind.
    pub fn kind(&self) -> ProofKind {
        ProofKind::PoSt(self.proof)
    }

    /// Sectors per partition of the proof type (WinningPoSt: the sectors challenged).
    pub fn sector_count(&self) -> Result<usize, Error> {
        let proof = self.proof;
        guarded("PoSt sector count", || Ok(proof.sector_count()))
    }

    /// Number of partitions of the request (Groth16 proofs of 192 bytes in the proof):
    /// WinningPoSt 1, WindowPoSt `ceil(sectors / sector_count)`.
    pub fn partitions(&self) -> Result<usize, Error> {
        Ok(match self.proof.typ() {
            PoStType::Winning => 1,
            PoStType::Window => self.sectors.len().div_ceil(self.sector_count()?.max(1)),
        })
    }

    /// The request proving partition `k` only (WindowPoSt V1_2, filecoin-proofs-api's
    /// `generate_single_window_post_with_vanilla`): the vanilla proofs of that partition's
    /// sectors and `partition_index = k`. Its proof is partition `k`'s 192 bytes of the full one.
    pub fn partition_request(&self, k: usize) -> Result<PoStRequest, Error> {
        let per = self.sector_count()?.max(1);
        let chunk = self.vanilla_proofs.chunks(per).nth(k).ok_or_else(|| {
            config_error(format!(
                "partition {k} out of range (the request has {})",
                self.vanilla_proofs.len().div_ceil(per)
            ))
        })?;
        Ok(
            PoStRequest::new(self.proof, self.prover_id, self.randomness, chunk)
                .with_partition_index(k),
        )
    }

    /// Checks PoSt proof bytes with filecoin-proofs-api's `verify_winning_post` /
    /// `verify_window_post` for this request. Needs the `.vk` in the parameter cache
    /// filecoin-proofs reads (`FIL_PROOFS_PARAMETER_CACHE`). A malformed proof may be an error
    /// rather than `false`.
    pub fn verify(&self, proof: &[u8]) -> Result<bool, Error> {
        self.verify_for(proof, self.randomness, &self.sectors)
    }

    /// [`PoStFixture::verify`] with altered inputs (negative tests): another `randomness`, and/or
    /// `comm_r_of = (sector id, comm_r)`: that sector's `comm_r` replaced (for example by another
    /// sector's). A sector id not in the request is an error, so a typo cannot make a negative
    /// test pass.
    pub fn verify_with(
        &self,
        proof: &[u8],
        randomness: Option<[u8; 32]>,
        comm_r_of: Option<(u64, [u8; 32])>,
    ) -> Result<bool, Error> {
        let mut sectors = self.sectors.clone();
        if let Some((id, comm_r)) = comm_r_of {
            let entry = sectors.iter_mut().find(|(s, _)| *s == id).ok_or_else(|| {
                config_error(format!(
                    "sector {id} is not one of the request's ({:?})",
                    self.sector_ids()
                ))
            })?;
            entry.1 = comm_r;
        }
        self.verify_for(proof, randomness.unwrap_or(self.randomness), &sectors)
    }

    /// The verifier with explicit inputs: `randomness` and the `(sector id, comm_r)` the verifier
    /// lists (another sector id, a missing or an extra sector).
    pub fn verify_for(
        &self,
        proof: &[u8],
        randomness: [u8; 32],
        sectors: &[(u64, [u8; 32])],
    ) -> Result<bool, Error> {
        let replicas: BTreeMap<SectorId, PublicReplicaInfo> = sectors
            .iter()
            .map(|&(id, comm_r)| {
                (
                    SectorId::from(id),
                    PublicReplicaInfo::new(self.proof, comm_r),
                )
            })
            .collect();
        match self.proof.typ() {
            PoStType::Winning => guarded("verify_winning_post", || {
                verify_winning_post(&randomness, proof, &replicas, self.prover_id)
            }),
            PoStType::Window => guarded("verify_window_post", || {
                verify_window_post(
                    &randomness,
                    &[(self.proof, proof)],
                    &replicas,
                    self.prover_id,
                )
            }),
        }
    }

    /// The challenged sector ids, in the request's order.
    pub fn sector_ids(&self) -> Vec<u64> {
        self.sectors.iter().map(|&(id, _)| id).collect()
    }
}

/// A PoSt request of type `proof` over `sectors` (sealed with a seal proof of the same sector
/// size and one prover id) for `randomness` (a field element, see [`randomness`]), made as lotus
/// and Curio make it:
/// - WinningPoSt: `generate_winning_post_sector_challenge` picks the challenged sector(s) among
///   `sectors` in ascending sector id order (lotus indexes its eligible sectors that way); the
///   request carries their vanilla proofs;
/// - WindowPoSt: every sector, in ascending sector id order (the verifier's), one vanilla proof
///   each.
///
/// The challenges come from `generate_fallback_sector_challenges`, the vanilla proofs from
/// `generate_single_vanilla_proof` (reading each sector's replica and cache dir).
pub fn post_request(
    proof: RegisteredPoStProof,
    sectors: &[SealedSector],
    randomness: [u8; 32],
) -> Result<PoStFixture, Error> {
    let kind = ProofKind::PoSt(proof);
    let Some(first) = sectors.first() else {
        return Err(config_error(format!("{kind}: no sectors")));
    };
    let prover_id = first.prover_id;
    for s in sectors {
        if u64::from(s.proof.sector_size()) != kind.sector_size() {
            return Err(config_error(format!(
                "sector {} is a {} sector, not one of `{kind}`",
                s.sector_id,
                s.kind()
            )));
        }
        if s.prover_id != prover_id {
            return Err(config_error(format!(
                "sector {} has another prover id than sector {}",
                s.sector_id, first.sector_id
            )));
        }
    }
    let mut sorted: Vec<&SealedSector> = sectors.iter().collect();
    sorted.sort_by_key(|s| s.sector_id);
    if let Some(w) = sorted.windows(2).find(|w| w[0].sector_id == w[1].sector_id) {
        return Err(config_error(format!(
            "sector {} is given twice",
            w[0].sector_id
        )));
    }
    let challenged: Vec<&SealedSector> = match proof.typ() {
        PoStType::Winning => {
            let picked = guarded("generate_winning_post_sector_challenge", || {
                generate_winning_post_sector_challenge(
                    proof,
                    &randomness,
                    sorted.len() as u64,
                    prover_id,
                )
            })?;
            picked
                .iter()
                .map(|&i| {
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| sorted.get(i).copied())
                        .ok_or_else(|| {
                            fil_error(
                                "generate_winning_post_sector_challenge",
                                format_args!("index {i} out of range"),
                            )
                        })
                })
                .collect::<Result<_, Error>>()?
        }
        PoStType::Window => sorted,
    };
    let ids: Vec<SectorId> = challenged
        .iter()
        .map(|s| SectorId::from(s.sector_id))
        .collect();
    let challenges = guarded("generate_fallback_sector_challenges", || {
        generate_fallback_sector_challenges(proof, &randomness, &ids, prover_id)
    })?;
    let vanilla_proofs = challenged
        .iter()
        .map(|s| {
            let id = SectorId::from(s.sector_id);
            let sector_challenges = challenges.get(&id).ok_or_else(|| {
                fil_error(
                    "generate_fallback_sector_challenges",
                    format_args!("no challenges for sector {id:?}"),
                )
            })?;
            let replica =
                PrivateReplicaInfo::new(proof, s.comm_r, s.cache.clone(), s.replica.clone());
            guarded("generate_single_vanilla_proof", || {
                generate_single_vanilla_proof(proof, id, &replica, sector_challenges)
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let request = PoStRequest::new(proof, prover_id, randomness, &vanilla_proofs);
    let json = request.to_json()?;
    Ok(PoStFixture {
        proof,
        prover_id,
        randomness,
        sectors: challenged.iter().map(|s| (s.sector_id, s.comm_r)).collect(),
        vanilla_proofs,
        request,
        json,
    })
}

/// A SnapDeals request updating a CC sector ([`snap_request`]) and what its verifier needs.
#[derive(Clone, Debug)]
pub struct SnapFixture {
    /// The registered update proof.
    pub proof: RegisteredUpdateProof,
    /// The updated sector's number.
    pub sector_id: u64,
    /// The CC sector's replica commitment (before the update).
    pub comm_r_old: Commitment,
    /// The updated replica's commitment.
    pub comm_r_new: Commitment,
    /// The new data's commitment.
    pub comm_d_new: Commitment,
    /// The partition vanilla proofs, as `generate_partition_proofs` returns them.
    pub vanilla_proofs: Vec<PartitionProofBytes>,
    /// The request.
    pub request: SnapRequest,
    /// `request` as JSON: what [`super::open_job`], a request file and the pipeline take.
    pub json: Vec<u8>,
    /// The updated replica.
    pub replica: PathBuf,
    /// The updated replica's cache dir.
    pub cache: PathBuf,
}

impl SnapFixture {
    /// The proof kind.
    pub fn kind(&self) -> ProofKind {
        ProofKind::SnapDeals(self.proof)
    }

    /// Number of partitions (Groth16 proofs of 192 bytes in the proof).
    pub fn partitions(&self) -> usize {
        self.vanilla_proofs.len()
    }

    /// Checks SnapDeals proof bytes with filecoin-proofs-api's
    /// `verify_empty_sector_update_proof` for this update. Needs the update circuit's `.vk` in
    /// the parameter cache filecoin-proofs reads (`FIL_PROOFS_PARAMETER_CACHE`). A malformed
    /// proof may be an error rather than `false`.
    pub fn verify(&self, proof: &[u8]) -> Result<bool, Error> {
        self.verify_with(proof, None, None, None)
    }

    /// [`SnapFixture::verify`] with altered commitments (negative tests): each one given
    /// replaces the update's.
    pub fn verify_with(
        &self,
        proof: &[u8],
        comm_r_old: Option<Commitment>,
        comm_r_new: Option<Commitment>,
        comm_d_new: Option<Commitment>,
    ) -> Result<bool, Error> {
        guarded("verify_empty_sector_update_proof", || {
            verify_empty_sector_update_proof(
                self.proof,
                proof,
                comm_r_old.unwrap_or(self.comm_r_old),
                comm_r_new.unwrap_or(self.comm_r_new),
                comm_d_new.unwrap_or(self.comm_d_new),
            )
        })
    }
}

/// A SnapDeals update of type `proof` of `sector` (a CC sector of the same sector size, see
/// [`seal_cc_sector`]; the proofs do not check that its data was zero, the chain does) with
/// random data drawn from `seed`, made as lotus and Curio make it: the new data staged as one
/// piece, `empty_sector_update_encode_into` writes the updated replica `updated-<id>` and its
/// cache dir `updated-cache-<id>` in `dir` (created), `generate_partition_proofs` makes the
/// partition vanilla proofs. The sector's replica and cache dir (the sector key) are only read.
pub fn snap_request(
    proof: RegisteredUpdateProof,
    sector: &SealedSector,
    dir: &Path,
    seed: u64,
) -> Result<SnapFixture, Error> {
    let kind = ProofKind::SnapDeals(proof);
    if u64::from(sector.proof.sector_size()) != kind.sector_size() {
        return Err(config_error(format!(
            "sector {} is a {} sector, not one of `{kind}`",
            sector.sector_id,
            sector.kind()
        )));
    }
    let id = sector.sector_id;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let unpadded =
        UnpaddedBytesAmount::from(filecoin_proofs_api::PaddedBytesAmount(kind.sector_size()));
    std::fs::create_dir_all(dir)?;
    let (data_path, staged, replica, cache) = (
        dir.join(format!("update-piece-{id}")),
        dir.join(format!("update-staged-{id}")),
        dir.join(format!("updated-{id}")),
        dir.join(format!("updated-cache-{id}")),
    );
    write_piece(&data_path, u64::from(unpadded), Data::Random, &mut rng)?;
    let piece = stage(sector.proof, &data_path, &staged, unpadded)?;
    std::fs::remove_file(&data_path)?;
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache)?;
    std::fs::File::create(&replica)?.set_len(std::fs::metadata(&sector.replica)?.len())?;
    let encoded = guarded("empty_sector_update_encode_into", || {
        empty_sector_update_encode_into(
            proof,
            &replica,
            &cache,
            &sector.replica,
            &sector.cache,
            &staged,
            &[piece],
        )
    })?;
    std::fs::remove_file(&staged)?;
    let vanilla_proofs = guarded("generate_partition_proofs", || {
        generate_partition_proofs(
            proof,
            sector.comm_r,
            encoded.comm_r_new,
            encoded.comm_d_new,
            &sector.replica,
            &sector.cache,
            &replica,
            &cache,
        )
    })?;
    let request = SnapRequest::new(
        proof,
        sector.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &vanilla_proofs,
    );
    let json = request.to_json();
    Ok(SnapFixture {
        proof,
        sector_id: id,
        comm_r_old: sector.comm_r,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
        vanilla_proofs,
        request,
        json,
        replica,
        cache,
    })
}
