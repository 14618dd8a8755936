//! The Filecoin proof families, named in every build (with or without the feature `filecoin`):
//! what a request file must be, and the spec prefixes that name a Filecoin proof kind.

use std::fmt;

/// Prefixes of Filecoin proof kinds (`porep:`, `post:`, `snap:`; see `crate::filecoin::ProofKind`).
pub const FILECOIN_PREFIXES: [&str; 3] = ["porep:", "post:", "snap:"];

/// The family of a Filecoin proof kind: what a request file must be. Feature-free, so the CLI
/// can name a family in any build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProofFamily {
    /// PoRep C2 from a C1 output.
    PoRep,
    /// WinningPoSt or WindowPoSt.
    PoSt,
    /// SnapDeals.
    SnapDeals,
}

impl ProofFamily {
    /// The family of a spec prefix: `porep`, `post` or `snap`.
    pub fn from_prefix(prefix: &str) -> Option<ProofFamily> {
        match prefix {
            "porep" => Some(ProofFamily::PoRep),
            "post" => Some(ProofFamily::PoSt),
            "snap" => Some(ProofFamily::SnapDeals),
            _ => None,
        }
    }

    /// The command-line flag a request of this family is given with (`--porep-c1`, ...).
    pub fn flag(self) -> &'static str {
        match self {
            ProofFamily::PoRep => "porep-c1",
            ProofFamily::PoSt => "post",
            ProofFamily::SnapDeals => "snap",
        }
    }
}

impl fmt::Display for ProofFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProofFamily::PoRep => "a PoRep C1 output",
            ProofFamily::PoSt => "a PoSt request",
            ProofFamily::SnapDeals => "a SnapDeals request",
        })
    }
}
