//! The generator's fixed-base multiplications on the current CUDA device
//! (`cuda/gpu_paramgen.cu`): the host's comb table and scalars in, affine points out.

use blstrs::{G1Affine, G2Affine, Scalar};

use crate::backend::cuda::sppark_error;
use crate::fixed_base::FixedBase;
use crate::Error;

mod ffi {
    use blstrs::{G1Affine, G2Affine, Scalar};

    // SAFETY: each declaration matches its `extern "C"` definition in kernels/cuda/gpu_paramgen.cu;
    // blstrs' affine points and scalars are `#[repr(transparent)]` over blst's C structs.
    extern "C" {
        pub fn splitprover_paramgen_g1(
            out: *mut G1Affine,
            scalars: *const Scalar,
            n: usize,
            table: *const G1Affine,
            table_len: usize,
            w: u32,
            windows: u32,
        ) -> sppark::Error;
        pub fn splitprover_paramgen_g2(
            out: *mut G2Affine,
            scalars: *const Scalar,
            n: usize,
            table: *const G2Affine,
            table_len: usize,
            w: u32,
            windows: u32,
        ) -> sppark::Error;
    }
}

fn table_shape<A>(fb: &FixedBase<A>) -> (u32, u32) {
    // Windows of at most 12 bits and at most 257 of them: both fit u32.
    (
        u32::try_from(fb.w).unwrap_or(u32::MAX),
        u32::try_from(fb.windows).unwrap_or(u32::MAX),
    )
}

/// `scalars[i] * base` for every i, where `fb` is the comb table of `base`.
pub(super) fn g1_mul_all(
    fb: &FixedBase<G1Affine>,
    scalars: &[Scalar],
) -> Result<Vec<G1Affine>, Error> {
    let mut out = vec![G1Affine::default(); scalars.len()];
    let (w, windows) = table_shape(fb);
    // SAFETY: blstrs' `G1Affine` and `Scalar` are `repr(transparent)` over blst's
    // `blst_p1_affine` and `blst_fr`, the layouts the kernel reads and writes (checked by its
    // static_asserts); `out` has room for `scalars.len()` points; the table has `table.len()`
    // points, which the C++ side checks against `w` and `windows` before reading.
    let e = unsafe {
        ffi::splitprover_paramgen_g1(
            out.as_mut_ptr(),
            scalars.as_ptr(),
            scalars.len(),
            fb.table.as_ptr(),
            fb.table.len(),
            w,
            windows,
        )
    };
    if e.code != 0 {
        return Err(sppark_error(e, "generating parameters"));
    }
    Ok(out)
}

/// `scalars[i] * base` in G2, where `fb` is the comb table of `base`.
pub(super) fn g2_mul_all(
    fb: &FixedBase<G2Affine>,
    scalars: &[Scalar],
) -> Result<Vec<G2Affine>, Error> {
    let mut out = vec![G2Affine::default(); scalars.len()];
    let (w, windows) = table_shape(fb);
    // SAFETY: as in `g1_mul_all`, with `blst_p2_affine`.
    let e = unsafe {
        ffi::splitprover_paramgen_g2(
            out.as_mut_ptr(),
            scalars.as_ptr(),
            scalars.len(),
            fb.table.as_ptr(),
            fb.table.len(),
            w,
            windows,
        )
    };
    if e.code != 0 {
        return Err(sppark_error(e, "generating parameters"));
    }
    Ok(out)
}
