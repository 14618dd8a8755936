// Point memory and XYZZ helpers shared by the prover (gpu_prover.cu) and the parameter generator
// (gpu_paramgen.cu), for the host and the device pass alike. Include after the field and
// `ec/xyzz_t.hpp`.
#ifndef SPLITPROVER_POINTS_CUH
#define SPLITPROVER_POINTS_CUH

// An affine point as blst lays it out (blst_p1_affine / blst_p2_affine; the identity is all
// zero). On the device an Fp2 `mem_t` is read and written by a pair of lanes, each its own half
// (sppark: the lanes of a pair cooperate through shuffles), so a G2 point takes two threads.
template<class F> struct sp_aff_mem { typename F::mem_t X, Y; };

// An XYZZ point over field F, whatever xyzz_t's other parameters (a parameter list that names
// them all, so that F is deduced from a bucket type).
#define SP_XYZZ_T template<class F, class H, const H* A4>
#define SP_XYZZ xyzz_t<F, H, A4>

// xyzz_t keeps its coordinates private; sppark's conversions are host-only, so this code reads
// them as the four field elements they are, in declaration order: X, Y, ZZZ, ZZ.
SP_XYZZ_T __host__ __device__ __forceinline__ F* sp_xyzz(SP_XYZZ& p)
{
    static_assert(sizeof(SP_XYZZ) == 4 * sizeof(F), "xyzz_t is X, Y, ZZZ, ZZ");
    return reinterpret_cast<F*>(&p);
}
SP_XYZZ_T __host__ __device__ __forceinline__ const F* sp_xyzz(const SP_XYZZ& p)
{
    static_assert(sizeof(SP_XYZZ) == 4 * sizeof(F), "xyzz_t is X, Y, ZZZ, ZZ");
    return reinterpret_cast<const F*>(&p);
}

// Affine coordinates with one inversion: x = X ZZZ / (ZZ ZZZ), y = Y ZZ / (ZZ ZZZ); the identity
// (ZZ = ZZZ = 0) becomes (0, 0), blst's encoding of it (the inverse of zero is zero). Affine
// coordinates are unique, so the result equals blst's bit for bit.
SP_XYZZ_T __host__ __device__ void sp_affine(F& x, F& y, const SP_XYZZ& p)
{
    const F* c = sp_xyzz(p);
    F inv = 1u / (c[3] * c[2]);
    x = c[0] * c[2];
    y = c[1] * c[3];
    x *= inv;
    y *= inv;
}

#endif
