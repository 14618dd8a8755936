//! The stand-in for `filecoin` in a build without the feature `filecoin`: a [`ProofKind`] that
//! has no value, so every Filecoin branch elsewhere is statically unreachable, and parsing that
//! says the build has no Filecoin support. It mirrors the few names of the real module that the
//! rest of the workspace uses without a `cfg`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::types::CircuitShape;
pub use crate::types::ProofFamily;
use crate::{Error, ErrorKind};

/// What every attempt to name or read a Filecoin proof says in this build.
pub const NO_FILECOIN: &str =
    "this build has no Filecoin support (build with the feature `filecoin`)";

/// A Filecoin proof kind: none exists in this build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProofKind {}

fn no_filecoin(spec: &str) -> Error {
    ErrorKind::InvalidSpec {
        spec: spec.to_owned(),
        reason: NO_FILECOIN.into(),
    }
    .into()
}

impl fmt::Display for ProofKind {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}

impl FromStr for ProofKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Err(no_filecoin(s))
    }
}

impl ProofKind {
    /// Its family.
    pub fn family(self) -> ProofFamily {
        match self {}
    }

    /// The shape of its partition circuits.
    pub fn shape(self) -> Result<CircuitShape, Error> {
        match self {}
    }

    /// The id of its parameter set.
    pub fn circuit_id(self) -> Result<u64, Error> {
        match self {}
    }

    /// The matrices of its partition circuits.
    pub fn record_r1cs(self, _limit_bytes: Option<u64>) -> Result<crate::r1cs::R1csBuilder, Error> {
        match self {}
    }

    /// Its circuit measured.
    pub fn measure(self) -> Result<crate::r1cs::Measure, Error> {
        match self {}
    }

    /// Its checked `.params` file in `param_cache`.
    pub fn param_file(self, _param_cache: &Path) -> Result<PathBuf, Error> {
        match self {}
    }
}

/// The kind of a proof request: in this build, always the error saying there is no Filecoin
/// support.
pub fn detect_kind(_input: &[u8]) -> Result<ProofKind, Error> {
    Err(ErrorKind::InvalidRequest(NO_FILECOIN.into()).into())
}

/// Opens a proof request as a job (`J`: `Box<dyn Job>`): unreachable in this build (no
/// [`ProofKind`] exists).
pub fn open_job<J>(kind: ProofKind, _input: &[u8]) -> Result<J, Error> {
    match kind {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::AnyCircuit;

    #[test]
    fn filecoin_specs_say_the_build_has_no_filecoin_support() {
        for s in [
            "porep:StackedDrg2KiBV1_1",
            "post:StackedDrgWinning2KiBV1",
            "snap:StackedDrg2KiBV1",
        ] {
            let e = s.parse::<AnyCircuit>().unwrap_err();
            assert!(matches!(e.kind(), ErrorKind::InvalidSpec { .. }), "{e}");
            assert!(e.to_string().contains(NO_FILECOIN), "{e}");
            assert!(e.to_string().contains(s), "names the spec: {e}");
        }
        let e = detect_kind(b"{}").unwrap_err();
        assert!(e.to_string().contains(NO_FILECOIN), "{e}");
        // Built-in specs are unaffected.
        assert!("bits:8".parse::<AnyCircuit>().is_ok());
    }
}

/// Curio's requests: in this build every one is refused (no Filecoin support).
pub mod curio {
    use super::{no_filecoin, ProofKind};
    use crate::{Error, ErrorKind};

    /// cuzk's `ProofKind` enum values.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum CurioKind {
        /// `POREP_SEAL_COMMIT` (1).
        PoRepSealCommit,
        /// `SNAP_DEALS_UPDATE` (2).
        SnapDealsUpdate,
        /// `WINDOW_POST_PARTITION` (3).
        WindowPostPartition,
        /// `WINNING_POST` (4).
        WinningPost,
    }

    impl CurioKind {
        /// The kind of a wire value; 0 (`UNSPECIFIED`) and unknown values are refused.
        pub fn from_wire(value: i32) -> Result<CurioKind, Error> {
            let invalid = |reason: String| Error::from(ErrorKind::InvalidRequest(reason));
            match value {
                1 => Ok(CurioKind::PoRepSealCommit),
                2 => Ok(CurioKind::SnapDealsUpdate),
                3 => Ok(CurioKind::WindowPostPartition),
                4 => Ok(CurioKind::WinningPost),
                0 => Err(invalid("proof_kind is UNSPECIFIED".into())),
                v => Err(invalid(format!("unknown proof_kind {v}"))),
            }
        }
    }

    /// The proof-carrying fields of a `SubmitProofRequest`.
    #[derive(Clone, Copy, Debug)]
    #[allow(missing_docs)]
    pub struct CurioRequest<'a> {
        pub kind: CurioKind,
        pub sector_size: u64,
        pub registered_proof: u64,
        pub vanilla_proof: &'a [u8],
        pub vanilla_proofs: &'a [Vec<u8>],
        pub sector_number: u64,
        pub miner_id: u64,
        pub randomness: &'a [u8],
        pub partition_index: u32,
        pub comm_r_old: &'a [u8],
        pub comm_r_new: &'a [u8],
        pub comm_d_new: &'a [u8],
    }

    /// A translated request (none exists in this build).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Translated {
        /// The circuit it is proved with.
        pub kind: ProofKind,
        /// The request bytes.
        pub bytes: Vec<u8>,
    }

    /// Refuses: this build has no Filecoin support.
    pub fn translate(req: &CurioRequest<'_>) -> Result<Translated, Error> {
        Err(no_filecoin(&format!("{:?}", req.kind)))
    }
}
