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
