//! A request that claims huge lengths is refused before the service allocates for them: the
//! bincode vanilla proofs of a PoSt or SnapDeals request whose length prefixes claim 2^40
//! elements, made as the launcher's Curio translation makes them from cuzk's envelope
//! (`launcher::api::curio::translate`) and opened as a job, are refused
//! with the heap's peak growth (counted by this binary's global allocator) within a small
//! multiple of the request's size, plus serde's fixed cap on what one sequence preallocates
//! from a claimed length (1 MiB per nested sequence) that bincode's size limit cannot lower. This binary holds one
//! test, so nothing else allocates while it measures.
#![cfg(feature = "filecoin")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use kernels::filecoin::post::PoStRequest;
use kernels::filecoin::update::SnapRequest;
use kernels::filecoin::{
    encode_base64, open_job, prover_id, ProofKind, RegisteredPoStProof, RegisteredUpdateProof,
};

/// Bytes allocated now.
static NOW: AtomicUsize = AtomicUsize::new(0);
/// The most allocated at once since the last [`reset_peak`].
static PEAK: AtomicUsize = AtomicUsize::new(0);

struct Counting;

fn grew(n: usize) {
    // Relaxed: the counters are statistics read after the measured call returns on this thread
    // (and after any thread it used has joined); they order no other memory.
    let now = NOW.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so `System`'s
// guarantees are ours; the counting touches only two atomics and never allocates.
unsafe impl GlobalAlloc for Counting {
    /// # Safety
    /// As `GlobalAlloc`'s contract: the caller passes layouts (and blocks) that `System` accepts.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract (non-zero size), passed on as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    /// # Safety
    /// As `GlobalAlloc`'s contract: the caller passes layouts (and blocks) that `System` accepts.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    /// # Safety
    /// As `GlobalAlloc`'s contract: the caller passes layouts (and blocks) that `System` accepts.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller passes a block this allocator (that is, `System`) returned, with
        // its layout.
        unsafe { System.dealloc(ptr, layout) };
        // Relaxed: see `grew`.
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    /// # Safety
    /// As `GlobalAlloc`'s contract: the caller passes layouts (and blocks) that `System` accepts.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller passes a block `System` returned, its layout and a valid new size.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            grew(new_size);
            // Relaxed: see `grew`.
            NOW.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result and how far the heap grew above where it started.
fn peak_growth<T>(f: impl FnOnce() -> T) -> (T, usize) {
    // Relaxed: see `grew`.
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - base)
}

/// `len` bytes of little-endian 2^40 repeated: wherever bincode reads a length prefix, it is
/// told 2^40 elements follow.
fn claims_2_pow_40(len: usize) -> Vec<u8> {
    (1u64 << 40)
        .to_le_bytes()
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect()
}

/// serde's cap on what a sequence preallocates from a claimed length
/// (`serde::__private::size_hint::cautious`), whatever bincode's size limit: each nested
/// sequence a crafted proof opens takes it once (a PoSt vanilla proof nests sectors, inclusion
/// proofs and their paths).
const SERDE_PREALLOCATION: usize = 1 << 20;
/// The sequences a vanilla proof nests, at most.
const NESTING: usize = 4;

#[test]
fn huge_claimed_lengths_are_refused_within_a_small_multiple_of_the_request() {
    for proof_len in [48usize, 4 << 10, 256 << 10] {
        let vanilla = [claims_2_pow_40(proof_len)];
        let commitment = [1u8; 32];
        let mut randomness = [2u8; 32];
        randomness[31] = 0;
        let post = |proof: RegisteredPoStProof, partition_index: Option<usize>| {
            let request = PoStRequest {
                registered_proof: proof,
                prover_id: prover_id(1000),
                randomness,
                vanilla_proofs: vanilla.iter().map(|p| encode_base64(p)).collect(),
                partition_index,
            };
            (ProofKind::PoSt(proof), request.to_json())
        };
        let snap = || {
            let request = SnapRequest {
                registered_update_proof: RegisteredUpdateProof::StackedDrg2KiBV1,
                comm_r_old: commitment,
                comm_r_new: commitment,
                comm_d_new: commitment,
                vanilla_proofs: vanilla.iter().map(|p| encode_base64(p)).collect(),
            };
            (
                ProofKind::SnapDeals(RegisteredUpdateProof::StackedDrg2KiBV1),
                Ok(request.to_json()),
            )
        };
        let request = |what: &str| match what {
            "WinningPoSt" => post(RegisteredPoStProof::StackedDrgWinning2KiBV1, None),
            "WindowPoSt" => post(RegisteredPoStProof::StackedDrgWindow2KiBV1_2, Some(0)),
            _ => snap(),
        };
        for what in ["WinningPoSt", "WindowPoSt", "SnapDeals"] {
            let request_size = proof_len + 3 * 32;
            let (refused, grown) = peak_growth(|| {
                let (kind, bytes) = request(what);
                open_job(kind, &bytes?).map(drop)
            });
            let e = refused.expect_err(what);
            eprintln!(
                "{what}, a {proof_len}-byte vanilla proof: heap +{grown} bytes, refused: {e}"
            );
            assert!(e.to_string().contains("vanilla proof"), "{what}: {e}");
            // The request is held as bytes, base64 in the JSON, the parsed JSON and the decoded
            // bytes (about 5 copies); 8 copies and one preallocation cap per nesting level bound
            // it, against the 2^40 elements claimed.
            let bound = 8 * request_size + NESTING * SERDE_PREALLOCATION;
            assert!(
                grown <= bound,
                "{what}: the heap grew {grown} bytes for a {request_size}-byte request (bound {bound})"
            );
        }
    }
}
