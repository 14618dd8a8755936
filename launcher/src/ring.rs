//! Ring settings shared by the command line and the config file, and the slot capacities a
//! circuit needs (what synth-proc lays out for it: the same arithmetic as its own
//! `capacity_for` and `witness_capacity_for`, here so that the launcher's library needs nothing
//! of synth-proc; a test holds the two equal).

use kernels::types::CircuitShape;
use kernels::witness::WitnessLayout;
use shm_protocol::{HugePagePolicy, PageKind, SlotCapacity, WitnessCapacity};

/// A huge-page setting that is none of `auto`, `1g`, `2m`, `thp`, `none`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("huge pages `{0}` is unknown: use `auto`, `1g`, `2m`, `thp` or `none`")]
pub struct UnknownHugePages(pub String);

/// Parses `auto`, `1g`, `2m`, `thp` or `none`.
pub fn parse_huge_pages(text: &str) -> Result<HugePagePolicy, UnknownHugePages> {
    Ok(match text.trim() {
        "auto" => HugePagePolicy::Auto,
        "1g" => HugePagePolicy::Require(PageKind::Huge1G),
        "2m" => HugePagePolicy::Require(PageKind::Huge2M),
        "thp" => HugePagePolicy::Require(PageKind::Transparent),
        "none" | "plain" => HugePagePolicy::Plain,
        other => return Err(UnknownHugePages(other.to_owned())),
    })
}

/// A full slot's capacities (a, b, c evaluations, inputs, aux) for a circuit's shape: size the
/// ring's full slots with its `slot_bytes`.
pub(crate) fn capacity_for(shape: &CircuitShape) -> SlotCapacity {
    SlotCapacity {
        n: shape.n(),
        inputs: shape.inputs,
        aux: shape.aux,
    }
}

/// A witness slot's capacities for a circuit's witness layout (its inputs, bit variables and
/// the other aux variables): size the ring's witness slots with its `slot_bytes`.
pub(crate) fn witness_capacity_for(layout: &WitnessLayout) -> WitnessCapacity {
    WitnessCapacity {
        inputs: layout.inputs(),
        bits: layout.bits(),
        non_bits: layout.non_bits(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The launcher sizes the slots synth-proc fills: the two must agree.
    #[test]
    fn capacities_are_synth_procs() {
        for spec in ["pubinputs:4", "bits:100"] {
            let spec: kernels::circuits::CircuitSpec = spec.parse().unwrap();
            let layout =
                WitnessLayout::of(&kernels::circuits::AnyCircuit::from(spec).compile().unwrap());
            let (ours, theirs) = (
                witness_capacity_for(&layout),
                synth_proc::witness_capacity_for(&layout),
            );
            assert_eq!(
                (ours.inputs, ours.bits, ours.non_bits),
                (theirs.inputs, theirs.bits, theirs.non_bits)
            );
            let shape = spec.shape().unwrap();
            let (ours, theirs) = (capacity_for(&shape), synth_proc::capacity_for(&shape));
            assert_eq!(
                (ours.n, ours.inputs, ours.aux),
                (theirs.n, theirs.inputs, theirs.aux)
            );
        }
    }
}
