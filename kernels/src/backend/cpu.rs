//! The CPU backend: NTTs and multi-exponentiations on the ambient rayon pool, bit-exact with
//! bellperson 0.27's native `create_proof`.
//!
//! # Where the SRS lives
//!
//! [`CpuBackend<S>`] owns any `S: AsRef<[u8]> + Send + Sync` holding an SRS image (see
//! [`crate::srs`]): an [`AlignedBytes`] buffer, an `Arc` around a shared read-only mapping made by
//! the launcher, or anything else that derefs to 64-byte aligned bytes. The image is validated
//! at construction and re-validated (header only, O(1)) at every call, so no `unsafe` depends on
//! `S` returning the same bytes each time. Points are read in place: nothing is copied.
//!
//! # What a proof is
//!
//! For each circuit, with `k` inputs, aux `w`, densities `dA`, `dBi`, `dBa`:
//! - `H`: [`compute_h`] then an MSM over `h`;
//! - `L`: MSM of all aux over `l`;
//! - `A`: inputs followed by the aux selected by `dA`, over `a` (one MSM: the SRS stores the
//!   input part first, then the dense aux part);
//! - `B`: inputs selected by `dBi` then aux selected by `dBa`, over `b_g1` and `b_g2`;
//! - `A = alpha + A + r delta`, `B = beta + B_g2 + s delta`,
//!   `C = s A + r B_g1 + r s delta + s alpha + r beta + H + L` (bellperson's order of terms;
//!   the affine result is unique, so the bytes match).

use std::time::Instant;

use bellperson::groth16::{prepare_verifying_key, verify_proof, PreparedVerifyingKey};
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use rayon::prelude::*;

use super::{Backend, BlindingKey};
use crate::msm::{all_bytes, msm_g1, msm_g2, ScalarBytes};
use crate::ntt::compute_h;
use crate::srs::{AlignedBytes, SrsView};
use crate::types::{Assignment, Proof};
use crate::{Error, ErrorKind};

/// Groth16 on the CPU over an SRS image held in `S`.
pub struct CpuBackend<S = AlignedBytes> {
    srs: S,
    pvk: PreparedVerifyingKey<Bls12>,
}

impl<S: AsRef<[u8]> + Send + Sync> CpuBackend<S> {
    /// Validates the SRS image in `srs` and prepares the verifying key.
    pub fn new(srs: S) -> Result<Self, Error> {
        let pvk = prepare_verifying_key(&SrsView::new(srs.as_ref())?.verifying_key());
        Ok(Self { srs, pvk })
    }

    /// A view of the SRS.
    pub fn srs(&self) -> Result<SrsView<'_>, Error> {
        SrsView::new(self.srs.as_ref())
    }

    /// Verifies a proof against this SRS's verifying key with bellperson's verifier.
    pub fn verify(&self, proof: &Proof, public_inputs: &[Scalar]) -> Result<bool, Error> {
        Ok(verify_proof(&self.pvk, proof, public_inputs)?)
    }

    /// The underlying storage.
    pub fn storage(&self) -> &S {
        &self.srs
    }

    /// The five multi-exponentiations of one proof before any blinding: what a GPU prover must
    /// reproduce exactly for the same SRS and assignment, whatever `r` and `s`. Used by
    /// [`Backend::prove_batch`] and by the CUDA diagnostics that compare provers component by
    /// component.
    pub fn components(&self, asg: &Assignment<'_>) -> Result<Components, Error> {
        self.components_in(&self.srs()?, asg)
    }

    fn components_in(&self, srs: &SrsView<'_>, asg: &Assignment<'_>) -> Result<Components, Error> {
        srs.lengths().check_assignment(asg)?;

        let t = Instant::now();
        let h = compute_h(asg.a, asg.b, asg.c)?;
        let h = all_bytes(&h);
        let t_ntt = t.elapsed();
        let aux = all_bytes(asg.aux);
        let input = all_bytes(asg.input);
        let filtered = |v: &[ScalarBytes], d: &super::Density<'_>| -> Vec<ScalarBytes> {
            v.par_iter()
                .enumerate()
                .filter(|(i, _)| d.get(*i))
                .map(|(_, b)| *b)
                .collect()
        };
        let mut a_sc = input.clone();
        a_sc.extend(filtered(&aux, &asg.a_aux_density));
        let mut b_sc = filtered(&input, &asg.b_input_density);
        b_sc.extend(filtered(&aux, &asg.b_aux_density));

        let components = Components {
            h: msm_g1(srs.h(), &h),
            l: msm_g1(srs.l(), &aux),
            a: msm_g1(srs.a(), &a_sc),
            b_g1: msm_g1(srs.b_g1(), &b_sc),
            b_g2: msm_g2(srs.b_g2(), &b_sc),
        };
        tracing::debug!(
            n = asg.a.len(),
            ntt_ms = t_ntt.as_millis() as u64,
            total_ms = t.elapsed().as_millis() as u64,
            "cpu proof components"
        );
        Ok(components)
    }

    fn prove_one(
        &self,
        srs: &SrsView<'_>,
        asg: &Assignment<'_>,
        r: Scalar,
        s: Scalar,
    ) -> Result<Proof, Error> {
        let components = self.components_in(srs, asg)?;
        Ok(BlindingKey::of(srs).proof(&components, r, s))
    }
}

/// The unblinded multi-exponentiations of one Groth16 proof (see [`CpuBackend::components`]).
///
/// With them, `A = alpha + a + r delta`, `B = beta + b_g2 + s delta` and
/// `C = s a + r b_g1 + r s delta + s alpha + r beta + h + l`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Components {
    /// `sum h_i H_i` over the quotient polynomial's coefficients.
    pub h: G1Projective,
    /// `sum w_j L_j` over every aux value.
    pub l: G1Projective,
    /// The A query: inputs, then the aux selected by the A density.
    pub a: G1Projective,
    /// The B query in G1: the inputs and aux selected by the B densities.
    pub b_g1: G1Projective,
    /// The B query in G2.
    pub b_g2: G2Projective,
}

impl<S: AsRef<[u8]> + Send + Sync> Backend for CpuBackend<S> {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn prove_batch(
        &self,
        batch: &[Assignment<'_>],
        r: &[Scalar],
        s: &[Scalar],
    ) -> Result<Vec<Proof>, Error> {
        super::check_randomness(batch, r, s)?;
        let srs = self.srs()?;
        // `SrsView::new` already refused an identity delta; keep bellperson's guard explicit.
        if bool::from(group::prime::PrimeCurveAffine::is_identity(&srs.delta_g1())) {
            return Err(ErrorKind::UnexpectedIdentity.into());
        }
        batch
            .iter()
            .zip(r.iter().zip(s))
            .map(|(asg, (r, s))| self.prove_one(&srs, asg, *r, *s))
            .collect()
    }
}
