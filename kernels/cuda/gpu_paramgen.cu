// Fixed-base scalar multiplication on the GPU for the random parameter generator.
//
// The host builds the signed-digit comb table exactly as the CPU generator does
// (`table[j * per + k] = (k + 1) * 2^(j w) * base`, affine, blst layout) and hands it over with
// the scalars in blst's (Montgomery) form. One thread per scalar: the scalar is converted to its
// canonical form, recoded into signed digits of `w` bits, the table entries are summed in XYZZ
// coordinates (sppark's mixed addition handles doubling and infinity), and the sum is normalised
// to affine with one inversion. Affine coordinates are unique, so the points equal
// the CPU generator's bit for bit; the identity is written as blst writes it (all zero).
//
// Every entry point returns a RustError: a CUDA failure is an error value, never an abort.

#if defined(FEATURE_BLS12_381)
# include <ff/bls12-381-fp2.hpp>
#else
# error "only FEATURE_BLS12_381 is supported"
#endif

#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>
#include "points.cuh"
#include <util/exception.cuh>
#include <util/rusterror.h>
#include <util/gpu_t.cuh>

#include <string>

// Sums in XYZZ coordinates (sppark's device additions, complete for mixed addition: infinity
// and doubling handled), normalised to affine with one inversion (`sp_affine`, points.cuh) and
// written as blst lays points out (`sp_aff_mem`).

// `w` bits of the canonical scalar `l` (8 little-endian words) from bit `pos`; 0 past bit 255.
__device__ __forceinline__ uint32_t pg_bits_at(const uint32_t l[8], uint32_t pos, uint32_t w)
{
    uint32_t i = pos / 32, sh = pos % 32;
    if (i >= 8)
        return 0;
    uint32_t v = l[i] >> sh;
    if (sh + w > 32 && i + 1 < 8)
        v |= l[i + 1] << (32 - sh);
    return v & ((1u << w) - 1);
}

// out[i] = scalars[i] * base, from the comb table of base (`field_t::degree` threads per point).
// Threads past `n` compute a dummy point instead of returning early: the inversion in the affine
// conversion and the Fp2 arithmetic exchange values between lanes (warp shuffles), so every lane
// must reach them.
template<class field_t>
__launch_bounds__(128)
__global__ void pg_fixed_base(void* out_, const fr_t* scalars, size_t n, const void* table_,
                              uint32_t w, uint32_t windows)
{
#ifdef __CUDA_ARCH__   // the host pass sees blst's host types, which this body does not take
    typedef xyzz_t<field_t> xyzz;
    typedef typename xyzz::affine_t affine;
    sp_aff_mem<field_t>* out = (sp_aff_mem<field_t>*)out_;
    const sp_aff_mem<field_t>* table = (const sp_aff_mem<field_t>*)table_;

    size_t i = (threadIdx.x + (size_t)blockIdx.x * blockDim.x) / field_t::degree;
    bool live = i < n;
    fr_t s = scalars[live ? i : 0];
    s.from();
    uint32_t l[8];
    for (int k = 0; k < 8; k++)
        l[k] = s[k];

    const int32_t half = 1 << (w - 1);
    const uint32_t per = 1u << (w - 1);
    xyzz acc;
    acc.inf();
    int32_t carry = 0;
    for (uint32_t j = 0; j < windows; j++) {
        int32_t v = (int32_t)pg_bits_at(l, j * w, w) + carry;
        if (v > half) {
            v -= 1 << w;
            carry = 1;
        } else {
            carry = 0;
        }
        if (v != 0) {
            const sp_aff_mem<field_t>& m = table[j * per + (uint32_t)(v < 0 ? -v : v) - 1];
            affine p((field_t)m.X, (field_t)m.Y);
            acc.add(p, v < 0);
        }
    }
    field_t x, y;
    sp_affine(x, y, acc);
    if (live) {
        out[i].X = x;
        out[i].Y = y;
    }
#endif
}

// Explicit instantiations: the launches below are host-only code, and without them nvcc 13
// leaves the kernels unregistered (see gpu_prover.cu).
template __global__ void pg_fixed_base<fp_t>(void*, const fr_t*, size_t, const void*, uint32_t,
                                             uint32_t);
template __global__ void pg_fixed_base<fp2_t>(void*, const fr_t*, size_t, const void*, uint32_t,
                                              uint32_t);

#ifndef __CUDA_ARCH__

// `degree` threads per point; `point_bytes` per affine point in memory (blst's layout).
template<class field_t>
static RustError pg_run(void* out_, const fr_t* scalars, size_t n, const void* table,
                        size_t table_len, uint32_t w, uint32_t windows, size_t point_bytes,
                        uint32_t degree, const char* what)
{
    uint8_t* out = (uint8_t*)out_;
    if (w < 2 || w > 16 || (size_t)windows * (1u << (w - 1)) != table_len
        || (size_t)windows * w < 256)
        return RustError{cudaErrorInvalidValue, std::string(what) + ": inconsistent comb table"};
    if (n == 0)
        return RustError{cudaSuccess};
    if (!ngpus())
        return RustError{cudaErrorNoDevice, "no CUDA device"};

    void* d_table = nullptr;
    void* d_out = nullptr;
    fr_t* d_sc = nullptr;
    auto release = [&]() {
        if (d_table) (void)cudaFree(d_table);
        if (d_out) (void)cudaFree(d_out);
        if (d_sc) (void)cudaFree(d_sc);
    };
    try {
        int device = 0;
        CUDA_OK(cudaGetDevice(&device));
        const gpu_t& gpu = select_gpu(device);
        gpu.select();
        // Chunks of 384 MiB of points: bounded device memory at any size.
        size_t chunk = std::min(n, ((size_t)384 << 20) / point_bytes);
        CUDA_OK(cudaMalloc(&d_table, table_len * point_bytes));
        CUDA_OK(cudaMalloc(&d_out, chunk * point_bytes));
        CUDA_OK(cudaMalloc((void**)&d_sc, chunk * sizeof(fr_t)));
        CUDA_OK(cudaMemcpyAsync(d_table, table, table_len * point_bytes,
                                cudaMemcpyHostToDevice, gpu));
        for (size_t off = 0; off < n; off += chunk) {
            size_t len = std::min(chunk, n - off);
            CUDA_OK(cudaMemcpyAsync(d_sc, scalars + off, len * sizeof(fr_t),
                                    cudaMemcpyHostToDevice, gpu));
            const uint32_t block = 128;
            size_t grid = (len * degree + block - 1) / block;
            pg_fixed_base<field_t><<<grid, block, 0, gpu>>>(d_out, d_sc, len, d_table, w,
                                                            windows);
            CUDA_OK(cudaGetLastError());
            CUDA_OK(cudaMemcpyAsync(out + off * point_bytes, d_out, len * point_bytes,
                                    cudaMemcpyDeviceToHost, gpu));
        }
        gpu.sync();
    } catch (const cuda_error& e) {
        release();
        return RustError{e.code(), std::string(what) + ": " + e.what()};
    }
    release();
    return RustError{cudaSuccess};
}

static_assert(sizeof(fr_t) == 32, "Fr is blst_fr");

// `out` and `table` hold blst_p1_affine points (96 bytes).
extern "C"
RustError::by_value splitprover_paramgen_g1(void* out, const fr_t* scalars, size_t n,
                                            const void* table, size_t table_len, uint32_t w,
                                            uint32_t windows)
{
    return pg_run<fp_t>(out, scalars, n, table, table_len, w, windows, 96, 1,
                        "fixed-base multiplications in G1");
}

// `out` and `table` hold blst_p2_affine points (192 bytes).
extern "C"
RustError::by_value splitprover_paramgen_g2(void* out, const fr_t* scalars, size_t n,
                                            const void* table, size_t table_len, uint32_t w,
                                            uint32_t windows)
{
    return pg_run<fp2_t>(out, scalars, n, table, table_len, w, windows, 192, 2,
                         "fixed-base multiplications in G2");
}

#endif
