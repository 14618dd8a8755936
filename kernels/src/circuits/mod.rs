//! The circuits the pipeline serves: an [`AnyCircuit`] is a built-in circuit ([`builtin`], named
//! by a [`CircuitSpec`]) or a Filecoin proof kind ([`ProofKind`], of a [`ProofFamily`]). It is
//! the workspace's circuit identity: what a job names, an SRS image and a slot carry (as its
//! [`AnyCircuit::circuit_id`]) and the command line writes (`sha-chain:38`,
//! `porep:StackedDrg32GiBV1_1`).

use std::fmt;
use std::str::FromStr;

pub mod builtin;

pub use builtin::{
    Bits, CircuitSpec, PartitionShape, PorepLike, PubInputs, ShaChain, SpecCircuit,
    POREP_32GIB_BIT_PERMILLE, POREP_32GIB_PARTITION, PUB_ROUNDS,
};
// The Filecoin families, named here beside the circuits of each.
pub use crate::types::{ProofFamily, FILECOIN_PREFIXES};

use crate::filecoin::ProofKind;
use crate::r1cs::{self, Measure, R1cs, R1csBuilder};
use crate::types::{CircuitShape, Error, FILECOIN_PREFIXES as PREFIXES};

/// A circuit the pipeline can serve: a built-in one (witness from a seed) or a Filecoin proof
/// kind (witness from a proof request: C1 output, PoSt or SnapDeals request; without the feature
/// `filecoin` the kind has no value and parsing one is an error). Written as its spec
/// (`sha-chain:38`, `porep:StackedDrg32GiBV1_1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnyCircuit {
    /// A built-in circuit.
    Builtin(CircuitSpec),
    /// A Filecoin proof kind.
    Filecoin(ProofKind),
}

impl AnyCircuit {
    /// Its shape (counting pass; a few seconds for the largest Filecoin circuits).
    pub fn shape(&self) -> Result<CircuitShape, Error> {
        match self {
            Self::Builtin(spec) => spec.shape(),
            Self::Filecoin(kind) => kind.shape(),
        }
    }

    /// Records the matrices of its circuit from the blank circuit (no witness), as parameter
    /// generation sees it ([`crate::r1cs::record`]); stops past `limit_bytes`.
    pub fn record_r1cs(&self, limit_bytes: Option<u64>) -> Result<R1csBuilder, Error> {
        match self {
            Self::Builtin(spec) => r1cs::record(spec.circuit(None), limit_bytes),
            Self::Filecoin(kind) => kind.record_r1cs(limit_bytes),
        }
    }

    /// Measures its circuit from the blank circuit ([`crate::r1cs::measure`]): shape, matrix
    /// sizes and densities, whatever its size.
    pub fn measure(&self) -> Result<Measure, Error> {
        match self {
            Self::Builtin(spec) => r1cs::measure(spec.circuit(None)),
            Self::Filecoin(kind) => kind.measure(),
        }
    }

    /// The id slots and SRS images carry: [`CircuitSpec::circuit_id`], or for Filecoin the id of
    /// its parameter set (`filecoin::ParamFiles::circuit_id`).
    pub fn circuit_id(&self) -> Result<u64, Error> {
        match self {
            Self::Builtin(spec) => Ok(spec.circuit_id()),
            Self::Filecoin(kind) => kind.circuit_id(),
        }
    }

    /// Records its matrices ([`AnyCircuit::record_r1cs`]) and serves them from memory (for
    /// syntheses in this process; the pipeline shares them through a memfd instead).
    pub fn compile(&self) -> Result<R1cs, Error> {
        let builder = self.record_r1cs(None)?;
        R1cs::from_bytes(Box::new(builder.encode(self.circuit_id()?)))
    }

    /// The built-in spec, if it is one.
    pub fn builtin(&self) -> Option<CircuitSpec> {
        match self {
            Self::Builtin(spec) => Some(*spec),
            Self::Filecoin(_) => None,
        }
    }

    /// The Filecoin proof kind, if it is one.
    pub fn filecoin(&self) -> Option<ProofKind> {
        match self {
            Self::Builtin(_) => None,
            Self::Filecoin(kind) => Some(*kind),
        }
    }
}

impl fmt::Display for AnyCircuit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin(spec) => spec.fmt(f),
            Self::Filecoin(kind) => kind.fmt(f),
        }
    }
}

impl FromStr for AnyCircuit {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        if PREFIXES.iter().any(|p| s.starts_with(p)) {
            return s.parse().map(Self::Filecoin);
        }
        s.parse().map(Self::Builtin)
    }
}

impl From<CircuitSpec> for AnyCircuit {
    fn from(spec: CircuitSpec) -> Self {
        Self::Builtin(spec)
    }
}
