// splitprover's own CUDA Groth16 prover over sppark (BLS12-381).
//
// A `GpuContext` holds one SRS resident in device memory (H, L, A, B_G1, B_G2 uploaded once from
// the host SRS image) and everything a proof needs, allocated once from one size function
// (`sp_layout`): the input buffers (two sets where memory allows, so that one proof's inputs are
// copied while the previous proof computes), the scratch of the gathers, splits and MSMs, the
// per-MSM accumulators, four streams, the events and the page-locked host results.
//
// One proof, all of it queued on the device without a host wait but one (the tail sizes):
//   - copy stream: the blinding input of the device's finishing, the assignment and the density
//     bitmaps, then a/b/c (zero-padded to the domain by the front half);
//   - compute stream, front half: the density gathers of A's and B's scalars and the 0/1 split
//     of the L, A and B scalars (bitmaps of ones and of "big" scalars, their counts copied back
//     to the host), then the quotient H (iNTT, coset NTT of a, b and c on three streams, each
//     as soon as its own vector has landed, then (a*b - c) / Z on the coset, coset iNTT);
//   - compute stream, back half (issued once the host has the counts, while the NTTs run): the
//     L, A, B_G1 and B_G2 MSMs (a batch addition of the points whose scalar is one, Pippenger
//     over the others), then the H MSM;
//   - side stream, beside the H MSM: the four MSMs' final sums (`sp_final`: every Pippenger's
//     per-window sums and the batch additions' partial sums reduced to one point per window and
//     one for the ones) and, with `device_finish`, `sp_side`: their window chains (Horner) and
//     the blinding, x = L + s (A + pa) + r (B_G1 + pb1) and B_G2 + pb2, affine;
//   - then H's final sums; the host combines H's windows (`sp_horner`) and adds them to C.
//   Without `device_finish` the host combines every MSM's windows (H's and L's in one chain)
//   and the Rust side blinds with r and s.
// Each half is one CUDA graph launch: the front half's graph is captured once per input set and
// flight, the back half's once per shape as well (`sp_back_key`: each tail MSM runs over its
// count rounded up, zeros past it, so that its plan and launches do not follow the count itself).
//
// Where the window chains run: each is about 250 dependent doublings (the top window must be
// multiplied by 2^(wbits (nwins - 1))), which no parallelism shortens. On the device a chain runs
// at single-thread latency (measured on an H200: 2.1 ms per G1 chain, 3.0 ms in G2, 4.4 ms for a
// G1 multiplication by a full scalar); on the host blst does one in well under a millisecond but
// it is host CPU per proof. So the device finishes where the H MSM hides its chains: from 2^20
// up (`SP_DEVICE_FINISH_LG`), the H MSM taking 13 ms there against about 7 ms of chains; H's own
// chain, which nothing follows on the device, stays on the host.
// Everything else of sppark's host-side `collect` (the 256 partial sums of every window, the
// batch additions' 8 x SMs partial sums) is parallel work and done on the device.
//
// The MSMs drive sppark's kernels (breakdown, sort, accumulate, integrate, batch_addition) with
// exactly the window size, chunking and launch shapes that sppark's `msm_t` chooses for the same
// number of points (`sp_plan`), over device-resident points and scalars, without sppark's host
// vectors, device allocations and per-chunk host synchronisations.
//
// Every entry point returns a RustError: a CUDA failure or an allocation refused is an error
// value, never an abort. Entry points serialize on the context's mutex.

#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(FEATURE_BLS12_381)
# include <ff/bls12-381-fp2.hpp>
#else
# error "only FEATURE_BLS12_381 is supported"
#endif

#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>
#include "points.cuh"
#include "witness.cuh"

typedef jacobian_t<fp_t> point_t;
typedef xyzz_t<fp_t> bucket_t;
typedef bucket_t::affine_t affine_t;

typedef jacobian_t<fp2_t> point_fp2_t;
typedef xyzz_t<fp2_t> bucket_fp2_t;
typedef bucket_fp2_t::affine_t affine_fp2_t;

typedef fr_t scalar_t;

#define SPPARK_DONT_INSTANTIATE_TEMPLATES
// sppark's radix-sort kernel `sort` is an ordinary (non-template) __global__ function, so it is
// defined in every object that includes pippenger.cuh; supraseal-c2's object (linked into the
// same binary) defines it too. Our copy gets its own name. The headers that pippenger.cuh
// includes and that could mention `sort` are included before the rename.
#include <cuda.h>
#include <cooperative_groups.h>
#include <cassert>
#include <cstddef>
#include <vector>
#include <algorithm>
#include <string>
#define sort splitprover_msm_sort
#include <msm/pippenger.cuh>
#undef sort
#include <ntt/ntt.cuh>

// Explicit instantiations of the MSM kernels for both groups. With implicit instantiation alone
// (SPPARK_DONT_INSTANTIATE_TEMPLATES, as supraseal-c2 builds), nvcc 13's static template stubs
// left the kernels launched with <<<>>> from msm_t unregistered in this object, and their first
// launch failed with "invalid device function" on the H200. Our own kernel templates below are
// instantiated explicitly for the same reason.
#define SP_INSTANTIATE_MSM(BKT, AFF)                                                        \
    template __global__ void accumulate<BKT, AFF::mem_t>(BKT::mem_t[], uint32_t, uint32_t,  \
        AFF::mem_t[], const vec2d_t<uint32_t>, const vec2d_t<uint32_t>, uint32_t);         \
    template __global__ void batch_addition<BKT>(BKT::mem_t[], const AFF::mem_t[], size_t,  \
        const uint32_t[], const uint32_t&);                                                 \
    template __global__ void integrate<BKT>(BKT::mem_t[], uint32_t, uint32_t, uint32_t);     \
    template __global__ void batch_addition<BKT>(BKT::mem_t[], const AFF::mem_t[], uint32_t,  \
        const uint32_t[], bool, uint32_t);
SP_INSTANTIATE_MSM(bucket_t, affine_t)
SP_INSTANTIATE_MSM(bucket_fp2_t, affine_fp2_t)
template __global__ void breakdown<fr_t>(vec2d_t<uint32_t>, const fr_t[], size_t, uint32_t,
                                         uint32_t, bool);

// Points per row of sppark's `integrate` output (threads per block / lanes per point) and its
// log2: each window's integration leaves 2 * SP_NT(B) partial sums.
#define SP_NT(B) (MSM_NTHREADS / B::degree)
// The most windows any plan has (10-bit windows over a 255-bit scalar).
#define SP_NW_MAX 26
// MSMs per proof: H, L, A, B_G1 in G1, then B_G2.
#define SP_G1_JOBS 4
enum { SP_JOB_H, SP_JOB_L, SP_JOB_A, SP_JOB_B1, SP_JOB_B2, SP_JOBS };

// The weight of integrate's partial sums of row point j in window sum: the window sum is
// sum_j (use_p ? P_j : 0) + k_j A_j, where P_j is the weighted and A_j the plain sum of the
// j-th segment of buckets, `lsbits` the bits of the window (fewer in the top one) and `nthrbits`
// log2 of the row's points. This is sppark's host-side `integrate_row` written as one weight
// per segment so that the device can sum the segments in parallel (kernels/tests/gpu.rs checks
// the identity against a transcription of that loop over integers, for every window size).
__host__ __device__ __forceinline__
static void sp_window_term(uint32_t j, uint32_t lsbits, uint32_t nthrbits, uint32_t& k,
                           bool& use_p)
{
    if (lsbits - 1 > nthrbits) {
        use_p = true;
        k = j << (lsbits - 1 - nthrbits);
    } else {
        use_p = false;
        k = (j >> (nthrbits - (lsbits - 1))) + 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels

__launch_bounds__(1024)
__global__ void sp_mul_assign(fr_t* a, const fr_t* b, size_t n)
{
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n;
         i += (size_t)blockDim.x * gridDim.x)
        a[i] *= b[i];
}

// a = (a - c) * z_inv: the quotient's evaluations on the coset, where Z is the constant
// g^n - 1.
__launch_bounds__(1024)
__global__ void sp_sub_scale(fr_t* a, const fr_t* c, fr_t z_inv, size_t n)
{
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n;
         i += (size_t)blockDim.x * gridDim.x) {
        fr_t t = a[i] - c[i];
        a[i] = t * z_inv;
    }
}

// A witness-only slot's aux values unpacked (`sp_unpack_aux`), one per thread.
__launch_bounds__(256)
__global__ void sp_unpack(fr_t* aux, size_t n_aux, const uint64_t* is_bit,
                          const uint64_t* bits_before, const uint64_t* bit_values,
                          const fr_t* non_bits, const fr_t* one)
{
    const fr_t o = *one;
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n_aux;
         i += (size_t)blockDim.x * gridDim.x)
        aux[i] = sp_unpack_aux(i, is_bit, bits_before, bit_values, non_bits, o);
}

// out = M w for one pre-compiled matrix (`sp_eval_row`), a row per thread.
__launch_bounds__(256)
__global__ void sp_spmv(fr_t* out, size_t rows, const uint64_t* row_start, const uint64_t* terms,
                        const fr_t* coeffs, const fr_t* input, size_t n_inputs, const fr_t* aux)
{
    // coefficient id 0 is 1 (kernels::r1cs)
    const fr_t one = coeffs[SP_ID_ONE];
    for (size_t r = threadIdx.x + (size_t)blockIdx.x * blockDim.x; r < rows;
         r += (size_t)blockDim.x * gridDim.x)
        out[r] = sp_eval_row(row_start, terms, r, coeffs, input, n_inputs, aux, one);
}

// The bitmap gather: out[k] = in[i] for the k-th set bit i of a bitmap, in three steps over
// tiles of SP_TILE words: per-tile exclusive prefix counts (`sp_tile_scan`), a scan of the tile
// totals (`sp_tiles_scan`, one thread: at most a few thousand tiles up to 2^32 bits), then the
// gather itself (`sp_gather`), which adds the two. `sp_scan` launches the first two.
#define SP_TILE 1024

__launch_bounds__(SP_TILE)
__global__ void sp_tile_scan(uint32_t* offsets, uint32_t* tile_sums, const uint64_t* words,
                             size_t nwords)
{
    __shared__ uint32_t buf[SP_TILE];
    size_t w = (size_t)blockIdx.x * SP_TILE + threadIdx.x;
    uint32_t mine = w < nwords ? __popcll(words[w]) : 0;
    buf[threadIdx.x] = mine;
    __syncthreads();
    // Hillis-Steele inclusive scan in shared memory
    for (uint32_t d = 1; d < SP_TILE; d <<= 1) {
        uint32_t add = threadIdx.x >= d ? buf[threadIdx.x - d] : 0;
        __syncthreads();
        buf[threadIdx.x] += add;
        __syncthreads();
    }
    if (w < nwords)
        offsets[w] = buf[threadIdx.x] - mine;
    if (threadIdx.x == SP_TILE - 1)
        tile_sums[blockIdx.x] = buf[threadIdx.x];
}

// Exclusive scan of the tile totals in place, by one thread (ntiles is small); the grand total
// goes to tile_sums[ntiles].
__global__ void sp_tiles_scan(uint32_t* tile_sums, size_t ntiles)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    uint32_t acc = 0;
    for (size_t t = 0; t < ntiles; t++) {
        uint32_t v = tile_sums[t];
        tile_sums[t] = acc;
        acc += v;
    }
    tile_sums[ntiles] = acc;
}

// One gather for scalars and for points of either group (instantiated below). `base` is
// subtracted from every output index: a piece of a query (`sp_msm_pieces`) gathers into a
// buffer of its own from the query's prefix sums, which count from the query's start.
template<class T>
__global__ void sp_gather(T* out, const T* in, const uint64_t* words, const uint32_t* offsets,
                          const uint32_t* tile_sums, size_t nwords, size_t base)
{
    for (size_t w = threadIdx.x + (size_t)blockIdx.x * blockDim.x; w < nwords;
         w += (size_t)blockDim.x * gridDim.x) {
        uint64_t word = words[w];
        size_t o = (size_t)tile_sums[w / SP_TILE] + offsets[w] - base;
        while (word) {
            int j = __ffsll((long long)word) - 1;
            out[o++] = in[w * 64 + j];
            word &= word - 1;
        }
    }
}

template __global__ void sp_gather<fr_t>(fr_t*, const fr_t*, const uint64_t*, const uint32_t*,
                                         const uint32_t*, size_t, size_t);
template __global__ void sp_gather<affine_t::mem_t>(affine_t::mem_t*, const affine_t::mem_t*,
    const uint64_t*, const uint32_t*, const uint32_t*, size_t, size_t);
template __global__ void sp_gather<affine_fp2_t::mem_t>(affine_fp2_t::mem_t*,
    const affine_fp2_t::mem_t*, const uint64_t*, const uint32_t*, const uint32_t*, size_t,
    size_t);

// sc[*count..m) = 0: the padding of a tail MSM's scalars past the gathered ones, whose count
// (the gather's total, on the device) a replayed graph does not know. A zero scalar has no
// digits, so the padding's points are never read.
__global__ void sp_zero_past(fr_t* sc, const uint32_t* count, size_t m)
{
    uint64_t* w = (uint64_t*)sc;
    for (size_t i = *count * 4 + threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < m * 4;
         i += (size_t)blockDim.x * gridDim.x)
        w[i] = 0;
}

// The 0/1 split. Filecoin circuits assign mostly bits, and a scalar 0 or 1 needs no
// multiplication: `ones` marks the scalars equal to one (their points are only added, by
// sppark's batch addition), `big` the scalars that are neither 0 nor 1 (the tail MSM's). One
// thread per scalar, one ballot per 32 scalars; the words past `n` (padding up to a multiple of
// 1024 bits, what the batch addition reads) are written as zero.
__global__ void sp_classify(uint32_t* ones, uint32_t* big, const fr_t* scalars, size_t n,
                            size_t padded, uint64_t one0, uint64_t one1, uint64_t one2,
                            uint64_t one3)
{
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < padded;
         i += (size_t)blockDim.x * gridDim.x) {
        bool is_one = false, is_big = false;
        if (i < n) {
            const uint64_t* l = (const uint64_t*)&scalars[i];
            uint64_t a = l[0], b = l[1], c = l[2], d = l[3];
            is_one = a == one0 && b == one1 && c == one2 && d == one3;
            is_big = !is_one && (a | b | c | d) != 0;
        }
        uint32_t o = __ballot_sync(0xffffffff, is_one);
        uint32_t g = __ballot_sync(0xffffffff, is_big);
        if ((threadIdx.x & 31) == 0) {
            ones[i / 32] = o;
            big[i / 32] = g;
        }
    }
}

// Point arithmetic of the final sums, in sppark's XYZZ buckets. A G2 bucket is held by a pair of
// lanes (`degree` 2: each lane one half of every Fp2 element, the pair exchanging values by warp
// shuffles), so every loop bound and branch below depends on the point index `threadIdx.x /
// degree` only, which both lanes of a pair share; as sppark does, G2 uses the unified
// addition (`uadd`) and G1 the branching one. Both handle infinity and doubling.
template<class B> __device__ __forceinline__ void sp_add(B& acc, const B& p)
{
    if constexpr (B::degree == 1)
        acc.add(p);
    else
        acc.uadd(p);
}

// acc * k for a small k (below 2^18), by double-and-add from the top bit.
template<class B> __device__ __forceinline__ B sp_mul_small(const B& p, uint32_t k)
{
    B r;
    r.inf();
    for (int bit = 31 - __clz(k); bit >= 0; bit--) {
        B t = r;
        sp_add(r, t);
        if ((k >> bit) & 1)
            sp_add(r, p);
    }
    return r;
}

// Sum over the points of one warp, by shuffles (as sppark's batch addition reduces); the sum is
// valid in the warp's first point.
template<class B> __device__ __forceinline__ B sp_warp_sum(B acc)
{
    const uint32_t warp_pts = WARP_SZ / B::degree;
    const uint32_t xid = (threadIdx.x / B::degree) % warp_pts;
    for (uint32_t off = 1; off < warp_pts; off <<= 1) {
        B down = shfl_down(acc, off * B::degree);
        if ((xid & (2 * off - 1)) == 0)
            sp_add(acc, down);
    }
    return acc;
}

// acc (+)= src elementwise over integrate's partial sums (2 * SP_NT(B) per window row, rows
// `row_sz` apart in the bucket memory) and over the batch addition's partial sums: one MSM's
// chunks are summed into its accumulators (`first`: the first chunk, copied).
template<class B>
__launch_bounds__(256)
__global__ void sp_fold(typename B::mem_t* acc_w, const typename B::mem_t* buckets,
                        uint32_t row_sz, uint32_t nwins, typename B::mem_t* acc_ones,
                        const typename B::mem_t* part, uint32_t nparts, bool first)
{
#ifdef __CUDA_ARCH__   // the host pass sees blst's host types, which this body does not take
    const size_t per_row = 2 * SP_NT(B);
    const size_t nw = (size_t)nwins * per_row;
    const size_t total = nw + nparts;
    for (size_t i = (threadIdx.x + (size_t)blockIdx.x * blockDim.x) / B::degree; i < total;
         i += (size_t)blockDim.x * gridDim.x / B::degree) {
        const typename B::mem_t* src;
        typename B::mem_t* dst;
        if (i < nw) {
            src = &buckets[(i / per_row) * row_sz + i % per_row];
            dst = &acc_w[i];
        } else {
            src = &part[i - nw];
            dst = &acc_ones[i - nw];
        }
        B v;
        v = *src;
        if (!first) {
            B a;
            a = *dst;
            sp_add(a, v);
            v = a;
        }
        *dst = v;
    }
#endif
}

// One MSM's final sums: `nwins` window sums from the accumulated integrate output, and the sum
// of up to two arrays of batch-addition partial sums (the Pippenger's own +-1 digits of window 0,
// and the split's ones). out[0..nwins) are the windows, out[nwins] the ones.
template<class B> struct sp_final_job {
    typename B::mem_t* out;
    const typename B::mem_t* acc;
    const typename B::mem_t* parts[2];
    uint32_t nparts[2];
    uint32_t nwins, wbits;
};

template<class B> struct sp_final_batch {
    sp_final_job<B> job[SP_G1_JOBS];
    uint32_t njobs;
    uint32_t nbits;
};

// One block of MSM_NTHREADS threads per window and per ones sum, over every job of the batch.
template<class B>
__launch_bounds__(MSM_NTHREADS)
__global__ void sp_final(sp_final_batch<B> batch)
{
#ifdef __CUDA_ARCH__
    const uint32_t NT = SP_NT(B);
    const uint32_t nthrbits = 31 - __clz(NT);
    const uint32_t j = threadIdx.x / B::degree;
    __shared__ uint4 raw[(MSM_NTHREADS / WARP_SZ) * sizeof(typename B::mem_t) / sizeof(uint4)];
    auto* warp_sums = reinterpret_cast<typename B::mem_t*>(raw);

    // Which job and which of its blocks: uniform over the block.
    uint32_t blk = blockIdx.x, q = 0;
    while (q < batch.njobs && blk >= batch.job[q].nwins + 1) {
        blk -= batch.job[q].nwins + 1;
        q++;
    }
    if (q >= batch.njobs)
        return;
    const sp_final_job<B>& job = batch.job[q];

    B acc;
    acc.inf();
    if (blk < job.nwins) {
        uint32_t lsbits = blk == job.nwins - 1 ? batch.nbits - blk * job.wbits : job.wbits;
        const typename B::mem_t* row = job.acc + (size_t)blk * 2 * NT;
        uint32_t k;
        bool use_p;
        sp_window_term(j, lsbits, nthrbits, k, use_p);
        B a;
        a = row[2 * j + 1];
        acc = sp_mul_small(a, k);
        if (use_p) {
            B p;
            p = row[2 * j];
            sp_add(acc, p);
        }
    } else {
        for (int h = 0; h < 2; h++)
            for (uint32_t i = j; i < job.nparts[h]; i += NT) {
                B p;
                p = job.parts[h][i];
                sp_add(acc, p);
            }
    }

    const uint32_t warp_pts = WARP_SZ / B::degree;
    const uint32_t xid = j % warp_pts, warp = threadIdx.x / WARP_SZ;
    acc = sp_warp_sum(acc);
    if (xid == 0)
        warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        B v;
        if (xid < MSM_NTHREADS / WARP_SZ)
            v = warp_sums[xid];
        else
            v.inf();
        v = sp_warp_sum(v);
        if (xid == 0)
            job.out[blk] = v;
    }
#endif
}

template __global__ void sp_fold<bucket_t>(bucket_t::mem_t*, const bucket_t::mem_t*, uint32_t,
    uint32_t, bucket_t::mem_t*, const bucket_t::mem_t*, uint32_t, bool);
template __global__ void sp_fold<bucket_fp2_t>(bucket_fp2_t::mem_t*, const bucket_fp2_t::mem_t*,
    uint32_t, uint32_t, bucket_fp2_t::mem_t*, const bucket_fp2_t::mem_t*, uint32_t, bool);
template __global__ void sp_final<bucket_t>(sp_final_batch<bucket_t>);
template __global__ void sp_final<bucket_fp2_t>(sp_final_batch<bucket_fp2_t>);

// ---------------------------------------------------------------------------------------------
// Finishing a proof on the device (`sp_side`): the window combination of the L, A, B_G1 and B_G2
// sums, the blinding terms added to them, and the two variable-base multiplications of the
// blinding, by one block of four warps on a stream of its own while the H MSM runs. Each warp
// walks one chain of about 250 dependent doublings at single-thread latency (milliseconds: the
// H MSM at 2^20 takes 13 ms, so from there up the chains are hidden); all 32 lanes of a warp do
// the same work (a G2 value takes a pair of lanes), so no lane diverges inside the field
// arithmetic, and one lane (a pair in G2) stores. The math below is written once for both
// passes: the host pass runs it in `splitprover_gpu_side_check`, the no-GPU test of the chain
// order, the window indexing, the scalar bits and the identity's encoding.
//
// What the device computes for a proof with blinding terms `pa`, `pb1`, `pb2` and scalars r, s
// (`sp_blind`; all zero and the identity when a caller wants the plain sums):
//   l = L,  a = A + pa,  b1 = B_G1 + pb1,  b2 = B_G2 + pb2,  x = l + s a + r b1   (all affine)
// With pa = alpha + r delta, pb1 = beta, pb2 = beta + s delta (G2) this is the proof's A and B
// and C - H, since C = H + L + s A + r (beta + B_G1) (kernels/src/backend/blind.rs).

// A Jacobian point as blst lays it out (blst_p1 / blst_p2; the affine one is `sp_aff_mem`,
// points.cuh).
template<class F> struct sp_jac_mem { typename F::mem_t X, Y, Z; };

// One proof's blinding input to `sp_side` (mirrored as `DeviceBlind` in
// kernels/src/backend/blind.rs).
struct sp_blind {
    uint64_t r[4], s[4];       // canonical integers, little-endian words
    sp_jac_mem<fp_t> pa, pb1;  // added to A's and to B_G1's sums
    sp_jac_mem<fp2_t> pb2;     // added to B_G2's sum
};

// What `sp_side` writes (mirrored as `DeviceSums` in kernels/src/backend/blind.rs).
struct sp_dev_sums {
    sp_aff_mem<fp_t> l, a, b1, x;
    sp_aff_mem<fp2_t> b2;
};

// p = 2 p (dbl-2008-s-1 for a = 0: 6M + 3S, against about 13 for a doubling through `add`). The
// identity (ZZ = ZZZ = 0) stays the identity; no point of a prime-order group has Y = 0.
SP_XYZZ_T __host__ __device__ __forceinline__ void sp_dbl(SP_XYZZ& p)
{
    F* c = sp_xyzz(p);
    F u = c[1] + c[1];
    F v = u^2;
    F w = u * v;
    F s = c[0] * v;
    F m = c[0]^2;
    m = m + m + m;
    F x3 = m^2;
    x3 -= s;
    x3 -= s;
    F wy = w * c[1];
    s -= x3;
    s *= m;
    c[1] = s - wy;
    c[0] = x3;
    c[3] *= v;
    c[2] *= w;
}

// acc += p, complete (infinity and doubling handled); G2 by sppark's unified addition on the
// device, as its kernels do.
template<class B> __host__ __device__ __forceinline__ void sp_addx(B& acc, const B& p)
{
#ifdef __CUDA_ARCH__
    if constexpr (B::degree == 2)
        acc.uadd(p);
    else
        acc.add(p);
#else
    acc.add(p);
#endif
}

// out = sum over y of w[y] 2^(y wbits), plus w[nwins] (the ones): Horner from the top window,
// the same chain as the host's `sp_horner` for one MSM.
// `W`: the device's bucket memory (`B::mem_t`), or `B` itself in the host pass.
template<class B, class W> __host__ __device__ void sp_chain(B& out, const W* w,
                                                             uint32_t nwins, uint32_t wbits)
{
    out.inf();
    for (uint32_t y = nwins; y-- > 0;) {
        if (y + 1 != nwins)
            for (uint32_t i = 0; i < wbits; i++)
                sp_dbl(out);
        B t;
        t = w[y];
        sp_addx(out, t);
    }
    B t;
    t = w[nwins];
    sp_addx(out, t);
}

// A Jacobian point (Z = 0: the identity) in XYZZ: (X, Y, Z^3, Z^2).
template<class F> __host__ __device__ xyzz_t<F> sp_from_jac(const sp_jac_mem<F>& j)
{
    xyzz_t<F> p;
    F* c = sp_xyzz(p);
    F z = j.Z;
    c[0] = j.X;
    c[1] = j.Y;
    c[3] = z^2;
    c[2] = c[3] * z;
    return p;
}

// out = k p for the canonical integer k (four little-endian words): the base made affine once,
// then double-and-add over all 256 bits with mixed additions. G1 only.
__host__ __device__ void sp_mul(bucket_t& out, const bucket_t& p, const uint64_t k[4])
{
    out.inf();
    if (p.is_inf())
        return;
    fp_t x, y;
    sp_affine(x, y, p);
    const affine_t base(x, y);
    uint64_t w[4] = {k[0], k[1], k[2], k[3]};
    for (int bit = 255; bit >= 0; bit--) {
        sp_dbl(out);
        if ((w[bit / 64] >> (bit % 64)) & 1)
            out.add(base);
    }
}

// The device's finishing of one proof, after its L, A, B_G1 and B_G2 final sums: the window
// sums `w[j]` of job j (L, A, B_G1 in G1, `w2` of B_G2), each `nwins[j]` windows of `wbits[j]`
// bits then the ones.
struct sp_side_args {
    const bucket_t::mem_t* w[3];
    const bucket_fp2_t::mem_t* w2;
    uint32_t nwins[4], wbits[4];
    const sp_blind* blind;
    sp_dev_sums* out;
};

// One block of four warps: warps 0-2 combine L, A and B_G1 (adding pa to A and pb1 to B_G1),
// warp 3 combines B_G2 (adding pb2) and stores it; then warps 1 and 2 multiply a by s and b1 by
// r while warp 0 stores l; then warp 0 sums x = l + s a + r b1 and warps 1 and 2 store a and b1.
__launch_bounds__(128)
__global__ void sp_side(sp_side_args args)
{
#ifdef __CUDA_ARCH__
    const uint32_t warp = threadIdx.x / WARP_SZ, lane = threadIdx.x % WARP_SZ;
    __shared__ uint4 raw[5 * sizeof(bucket_t::mem_t) / sizeof(uint4)];
    auto* sh = reinterpret_cast<bucket_t::mem_t*>(raw);   // l, a, b1, s a, r b1
    const sp_blind& bl = *args.blind;
    if (warp < 3) {
        bucket_t p;
        sp_chain(p, args.w[warp], args.nwins[warp], args.wbits[warp]);
        if (warp == 1)
            sp_addx(p, sp_from_jac(bl.pa));
        else if (warp == 2)
            sp_addx(p, sp_from_jac(bl.pb1));
        if (lane == 0)
            sh[warp] = p;
    } else {
        bucket_fp2_t p;
        sp_chain(p, args.w2, args.nwins[3], args.wbits[3]);
        sp_addx(p, sp_from_jac(bl.pb2));
        fp2_t x, y;
        sp_affine(x, y, p);
        if (lane < 2) {
            args.out->b2.X = x;
            args.out->b2.Y = y;
        }
    }
    __syncthreads();
    if (warp == 1 || warp == 2) {
        bucket_t p, m;
        p = sh[warp];
        sp_mul(m, p, warp == 1 ? bl.s : bl.r);
        if (lane == 0)
            sh[warp + 2] = m;
    }
    __syncthreads();
    if (warp < 3) {
        bucket_t p;
        p = sh[warp];
        sp_aff_mem<fp_t>* dst[3] = {&args.out->l, &args.out->a, &args.out->b1};
        fp_t x, y;
        sp_affine(x, y, p);
        if (lane == 0) {
            dst[warp]->X = x;
            dst[warp]->Y = y;
        }
        if (warp == 0) {
            bucket_t t;
            t = sh[3];
            sp_addx(p, t);
            t = sh[4];
            sp_addx(p, t);
            sp_affine(x, y, p);
            if (lane == 0) {
                args.out->x.X = x;
                args.out->x.Y = y;
            }
        }
    }
#endif
}

#ifndef __CUDA_ARCH__

// ---------------------------------------------------------------------------------------------
// The FFI types (mirrored in kernels/src/backend/gpu.rs)

// The layout facts the host relies on: the SRS image holds blst affine points, the results are
// read as blst Jacobian points, and the device's bucket memory is read back as host buckets
// (host types: in the device pass an Fp2 value is one lane's half).
static_assert(sizeof(affine_t) == 96, "G1 affine is blst_p1_affine");
static_assert(sizeof(affine_fp2_t) == 192, "G2 affine is blst_p2_affine");
static_assert(sizeof(point_t) == 144, "G1 Jacobian is blst_p1");
static_assert(sizeof(point_fp2_t) == 288, "G2 Jacobian is blst_p2");
static_assert(sizeof(fr_t) == 32, "Fr is blst_fr");
static_assert(sizeof(bucket_t::mem_t) == sizeof(bucket_t) && sizeof(bucket_t) == 192,
              "a G1 bucket is X, Y, ZZZ, ZZ on both sides");
static_assert(sizeof(bucket_fp2_t::mem_t) == sizeof(bucket_fp2_t) && sizeof(bucket_fp2_t) == 384,
              "a G2 bucket is X, Y, ZZZ, ZZ on both sides");

// One SRS as host pointers into an SRS image (blst affine points, Montgomery form).
struct sp_srs {
    const affine_t* h;       size_t n_h;
    const affine_t* l;       size_t n_l;
    const affine_t* a;       size_t n_a;
    const affine_t* b_g1;    size_t n_b;
    const affine_fp2_t* b_g2;
    size_t n_inputs;         // the IC length: the circuit's inputs, ONE included
};

struct sp_density {
    const uint64_t* words;
    size_t bit_len;
    size_t popcount;
};

// One synthesized circuit (scalars in Montgomery form, as blstrs keeps them). A witness-only
// one (`witness` != 0, issue 31) carries no a, b, c or aux: `bit_values` and `non_bits` are its
// packed aux (kernels::witness), unpacked and multiplied by the matrices
// (`splitprover_gpu_set_matrices`) on the device; its densities are the matrices'.
struct sp_assignment {
    const fr_t* a; const fr_t* b; const fr_t* c; size_t abc_len;
    const fr_t* input; size_t input_len;
    const fr_t* aux; size_t aux_len;
    sp_density a_aux, b_input, b_aux;
    const uint64_t* bit_values; size_t bit_words;
    const fr_t* non_bits; size_t non_bits_len;
    uint32_t witness, pad;
};
static_assert(sizeof(sp_assignment) == 176, "the Rust mirror's size");
static_assert(sizeof(sp_matrices) == 192, "the Rust mirror's size");

// The five sums, Jacobian (blst_p1 / blst_p2 layout). With the device finishing (`finished`),
// `dev` holds what `sp_side` wrote (with the caller's blinding terms: the proof's A and B and
// C - H) and l, a, b_g1, b_g2 the same values as Jacobian points; h is H's sum alone.
struct sp_components {
    point_t h, l, a, b_g1;
    point_fp2_t b_g2;
    sp_dev_sums dev;
    uint32_t finished, pad;
};

// Milliseconds of one proof, from CUDA events on the device streams (the copy stream for
// copy_in, the compute stream for the others), and host milliseconds of its window sums.
struct sp_phases {
    double copy_in, ntt, gather, msm_h, msm_l, msm_a, msm_b_g1, msm_b_g2, final_sums;
    double compute;      // compute stream: start of the NTTs to the sums copied back
    double span;         // copy start to the sums copied back
    double host_sums;    // host clock: the window combination of the five sums
    // CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), milliseconds:
    double cpu_issue;    // queueing the proof's copies, kernels and events
    double cpu_wait;     // the two waits on the device (split counts, sums)
    double cpu_finish;   // the window combination and the phase times, after the wait
    double cpu_blind;    // written by the Rust side: blinding the sums into the proof
    double side;         // the side stream: the final sums of L, A, B_G1, B_G2 (and `sp_side`)
    double stream;       // the streaming stream: the proof's first SRS chunk copy to its last
                         // landed (0: nothing streamed)
};

// One batch: device milliseconds from the first copy to the last sums copied back.
struct sp_batch_times {
    double gpu;
    uint32_t input_sets;
    uint32_t front_graphs;     // proofs whose front half ran as one CUDA graph launch
    uint32_t back_graphs;      // proofs whose back half ran as one CUDA graph launch
    char graph_error[200];     // why the context stopped using graphs ("" while it does)
};

// Which SRS points stay in device memory (issue 32): per query (SP_Q_H .. SP_Q_B2) a prefix of
// `resident[q]` points (at least the query's length: all of it); the rest of each query is
// copied from the page-locked host image for every proof, chunk by chunk, through two staging
// buffers of `stage_bytes` each, the copy of one chunk overlapping the MSM over the other.
enum { SP_Q_H, SP_Q_L, SP_Q_A, SP_Q_B1, SP_Q_B2, SP_QUERIES };
// `piece` nonzero: the compact layout (issue 32, budgets below what the full one takes): one
// input set holding two domain vectors (c made after a * b, in b's place) and the gathered
// scalars of A and B (in b's place and after it, once the quotient is made), and tails of at
// most `piece` points of each query at a time (`sp_msm_pieces`).
struct sp_residency {
    size_t resident[SP_QUERIES];
    size_t stage_bytes;
    size_t piece;
};

struct sp_options {
    int double_buffer;   // 0: one input set (no copy overlap); otherwise two where memory allows
    uint32_t wbits_h;    // 0: sppark's window size for the H MSM; otherwise 10..=18
    uint32_t chunks_h;   // 0: sppark's chunking of the H MSM; otherwise 1..=64 chunks
    int no_graphs;       // nonzero: launch the front half kernel by kernel (no CUDA graph)
    int finish;          // 0: on the device from 2^20 up (SP_DEVICE_FINISH_LG); 1: device; 2: host
    sp_residency res;    // what stays resident; the rest streams
};

struct sp_upload {
    size_t resident_bytes;   // SRS points now in device memory
    size_t scratch_bytes;    // everything else allocated in device memory
    double upload_ms;        // host-to-device copy of the SRS
    int pinned;              // 1 when the SRS was page-locked for the copy
    int input_sets;          // 2: the next proof's copies overlap the current one
    uint32_t wbits_h;        // the H MSM's window size
    uint32_t chunks_h;       // the H MSM's chunks
    int device_finish;       // 1: `sp_side` finishes every proof on the device
    size_t streamed_bytes;   // SRS bytes copied from the host image for every proof
    double stream_gbps;      // host-to-device rate of one staging buffer's copy (0: none)
};

// Shape of one Pippenger run (mirrored as `MsmPlan` for the no-GPU tests).
struct sp_msm_plan {
    size_t n;
    uint32_t wbits, nwins;
    size_t batch, stride;    // chunks, and points per chunk
    size_t buckets;          // nwins * 2^(wbits-1): bucket entries, also histogram entries
    size_t digits;           // nwins * stride
    size_t temps;            // 2 * stride (uint2)
};

// Called once per proof of a batch, in order, as soon as its sums are on the host. Finished on
// the host, the sums it gets (and the batch's `out`) hold h + l in `h` and the identity in `l`: a
// proof uses them summed, and one chain of doublings less is host CPU saved per proof. Finished
// on the device, `dev` holds the proof but for C's H, which is `h`.
typedef void (*sp_on_proof)(void* user, size_t index, const sp_components* sums);

static int sp_lg2(size_t n) { int r = 0; while (n >>= 1) r++; return r; }
static size_t sp_words(size_t bits) { return (bits + 63) / 64; }
// u64 words of a split bitmap over n scalars: padded to 1024 bits (sppark's batch addition reads
// 32 u32 words at a time).
static size_t sp_split_words(size_t n) { return (n + 1023) / 1024 * 16; }
static size_t sp_tiles(size_t nwords) { return (nwords + SP_TILE - 1) / SP_TILE; }

// The window size, chunking and buffer sizes that sppark's msm_t picks for an MSM over n points
// (its constructor and `invoke` with the same n), with an optional window size or chunk count
// instead. With device-resident points sppark chunks only to bound the digit memory (its chunks
// pipeline host copies otherwise); its sort and accumulation take any chunk of up to 2^31
// points, so any count is valid and only the speed differs.
static sp_msm_plan sp_plan(size_t n, uint32_t wbits = 0, uint32_t chunks = 0)
{
    sp_msm_plan p{};
    p.n = n;
    size_t np = (n + WARP_SZ - 1) & ((size_t)0 - WARP_SZ);
    int w = 17;
    if (np > 192) {
        w = std::min(sp_lg2(np + np / 2) - 8, 18);
        if (w < 10)
            w = 10;
    } else if (np > 0) {
        w = 10;
    }
    p.wbits = wbits ? wbits : (uint32_t)w;
    p.nwins = (uint32_t)((fr_t::bit_length() - 1) / p.wbits + 1);
    uint32_t lg = (uint32_t)sp_lg2(n + n / 2);
    size_t batch = (size_t)1 << (std::max(lg, p.wbits) - p.wbits);
    batch >>= 6;
    p.batch = chunks ? chunks : batch ? batch : 1;
    size_t stride = n ? (n + p.batch - 1) / p.batch : 0;
    p.stride = (stride + WARP_SZ - 1) & ((size_t)0 - WARP_SZ);
    p.buckets = (size_t)p.nwins << (p.wbits - 1);
    p.digits = (size_t)p.nwins * p.stride;
    p.temps = 2 * p.stride;
    return p;
}

// The largest m in [1, n] with f(m) <= k for a non-decreasing f; 0 when there is none.
template<class F> static size_t sp_last_at_most(size_t n, F f, uint32_t k)
{
    if (!n || f(1) > k)
        return 0;
    size_t lo = 1, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        if (f(mid) <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// The most any plan over m <= n points needs (m = n: a plain MSM; m <= n / 2: a tail MSM).
// sp_plan(m) is piecewise: its window size and chunk count change only where lg2(m + m/2) or
// lg2(r + r/2) (r: m rounded up to 32) steps up, and between those steps every size grows with
// m. So the maximum is at n or at the last m of a piece.
static sp_msm_plan sp_cover(size_t n)
{
    sp_msm_plan most{};
    auto take = [&](size_t m) {
        if (!m)
            return;
        sp_msm_plan p = sp_plan(m);
        most.buckets = std::max(most.buckets, p.buckets);
        most.digits = std::max(most.digits, p.digits);
        most.temps = std::max(most.temps, p.temps);
        most.stride = std::max(most.stride, p.stride);
        most.nwins = std::max(most.nwins, p.nwins);
    };
    auto f1 = [](size_t m) { return (uint32_t)sp_lg2(m + m / 2); };
    auto f2 = [](size_t m) {
        size_t r = (m + WARP_SZ - 1) & ((size_t)0 - WARP_SZ);
        return (uint32_t)sp_lg2(r + r / 2);
    };
    take(n);
    for (uint32_t k = 0; k < 64; k++) {
        take(sp_last_at_most(n, f1, k));
        take(sp_last_at_most(n, f2, k));
    }
    most.n = n;
    return most;
}

// Every device buffer's size, from the SRS lengths: the one function behind both the check
// that a shape fits and the allocation.
struct sp_layout {
    size_t domain;
    // one input set
    size_t abc, input, aux, words;
    // the rest, once
    size_t sc_a, sc_b, offsets, tiles;
    size_t split_words[3], split_offsets[3], split_tiles[3];   // L, A, B
    size_t tail_sc, tail_g1, tail_g2;
    size_t msm_bytes, hist, digits, temps;                       // shared by the MSMs
    size_t parts;                                                // batch-addition partial sums
    size_t acc_g1, acc_g2;                                       // window accumulator entries
    size_t results_bytes;
    sp_msm_plan plan_h;
    // Residency (issue 32): the points of each query kept on the device (a prefix), the points
    // of one streamed chunk in G1 and in G2, and each of the two staging buffers (0: nothing
    // streams).
    size_t n[SP_QUERIES], res[SP_QUERIES];
    size_t stage_g1, stage_g2, stage_bytes;
    // The compact layout (`sp_residency::piece`): the points of one tail piece (0: the full
    // layout), and where A's and B's gathered scalars start in an input set's `abc`.
    size_t piece, sc_a_at, sc_b_at;
    bool compact() const { return piece != 0; }

    static size_t point_bytes(int q) { return q == SP_Q_B2 ? sizeof(affine_fp2_t) : sizeof(affine_t); }
    bool streams() const { return stage_bytes != 0; }
    size_t resident_bytes() const
    {
        size_t b = 0;
        for (int q = 0; q < SP_QUERIES; q++)
            b += res[q] * point_bytes(q);
        return b;
    }
    size_t streamed_bytes() const
    {
        size_t b = 0;
        for (int q = 0; q < SP_QUERIES; q++)
            b += (n[q] - res[q]) * point_bytes(q);
        return b;
    }

    size_t set_bytes() const
    {
        return (abc + input + aux) * sizeof(fr_t) + words * sizeof(uint64_t);
    }
    size_t once_bytes() const
    {
        size_t b = (sc_a + sc_b + tail_sc) * sizeof(fr_t) + (offsets + tiles) * 4;
        for (int q = 0; q < 3; q++)
            b += 2 * split_words[q] * 8 + (split_offsets[q] + split_tiles[q]) * 4;
        b += tail_g1 * sizeof(affine_t) + tail_g2 * sizeof(affine_fp2_t);
        b += msm_bytes + (hist + digits) * 4 + temps * sizeof(uint2);
        b += parts * (sizeof(bucket_t) + sizeof(bucket_fp2_t));
        b += SP_G1_JOBS * (acc_g1 + 2 * parts) * sizeof(bucket_t);
        b += (acc_g2 + 2 * parts) * sizeof(bucket_fp2_t);
        b += results_bytes + 2 * sizeof(sp_blind);   // the results, the flights' blinding input
        b += 2 * stage_bytes;
        return b;
    }
};

static size_t sp_nz(size_t n) { return n ? n : 1; }

// A flight's page-locked counts: the big-scalar totals of L, A and B, then (compact layout)
// from SP_BOUNDS on, per query SP_MAX_PIECES + 1 entries: the big count before each of its
// pieces, then (written by the host) the total.
static const size_t SP_BOUNDS = 16;
static const size_t SP_COUNTS_BYTES = 4096;

// A streamed chunk's points are a multiple of this: whole tiles of the split bitmaps' prefix
// sums (SP_TILE words of 64 bits), so that a chunk's gather and batch addition start on a tile.
static const size_t SP_CHUNK_ALIGN = (size_t)SP_TILE * 64;

// The most tail pieces of one query in the compact layout: each piece's count of big scalars
// comes to the host with the query's total (a flight's page-locked `counts`).
static const size_t SP_MAX_PIECES = 256;
static_assert((SP_BOUNDS + 3 * (SP_MAX_PIECES + 1)) * sizeof(uint32_t) <= SP_COUNTS_BYTES,
              "a flight's counts hold every piece's bound");

static sp_layout sp_layout_of(const sp_srs& s, int sms, uint32_t wbits_h, uint32_t chunks_h,
                              const sp_residency* r)
{
    sp_layout l{};
    const size_t n5[SP_QUERIES] = {s.n_h, s.n_l, s.n_a, s.n_b, s.n_b};
    bool streams = false;
    for (int q = 0; q < SP_QUERIES; q++) {
        l.n[q] = n5[q];
        l.res[q] = r ? std::min(r->resident[q], n5[q]) : n5[q];
        streams |= l.res[q] < n5[q];
    }
    if (streams) {
        // at least one chunk of G2 points per buffer; chunks of whole tiles
        size_t bytes = std::max(r->stage_bytes, SP_CHUNK_ALIGN * sizeof(affine_fp2_t));
        l.stage_g1 = bytes / sizeof(affine_t) / SP_CHUNK_ALIGN * SP_CHUNK_ALIGN;
        l.stage_g2 = bytes / sizeof(affine_fp2_t) / SP_CHUNK_ALIGN * SP_CHUNK_ALIGN;
        l.stage_bytes = std::max(l.stage_g1 * sizeof(affine_t), l.stage_g2 * sizeof(affine_fp2_t));
        for (int q = SP_Q_L; q <= SP_Q_B1; q++)
            if (l.res[q] < n5[q])
                l.res[q] = l.res[q] / l.stage_g1 * l.stage_g1;
        if (l.res[SP_Q_B2] < n5[SP_Q_B2])
            l.res[SP_Q_B2] = l.res[SP_Q_B2] / l.stage_g2 * l.stage_g2;
    }
    uint32_t lg_domain = sp_lg2(s.n_h - 1) + 1;
    l.domain = (size_t)1 << lg_domain;
    size_t nmax = std::max(std::max(s.n_l, s.n_a), s.n_b);
    if (r && r->piece) {
        // two domain vectors, a (then h) and b (then c, then A's scalars), and B's scalars
        // after them; tail pieces of whole tiles, at most SP_MAX_PIECES of a query
        l.sc_a_at = l.domain;
        l.sc_b_at = l.domain + std::max(l.domain, s.n_a);
        l.abc = l.sc_b_at + sp_nz(s.n_b);
        size_t least = (nmax + SP_MAX_PIECES - 1) / SP_MAX_PIECES;
        size_t piece = std::max(r->piece, least);
        l.piece = (piece + SP_CHUNK_ALIGN - 1) / SP_CHUNK_ALIGN * SP_CHUNK_ALIGN;
    } else {
        l.abc = 3 * l.domain;
        l.sc_a = sp_nz(s.n_a);
        l.sc_b = sp_nz(s.n_b);
    }
    l.input = sp_nz(s.n_inputs);
    l.aux = sp_nz(s.n_l);
    l.words = sp_nz(2 * sp_words(s.n_l) + sp_words(s.n_inputs));
    size_t maxw = std::max(sp_words(s.n_l), sp_words(s.n_inputs)) + 1;
    l.offsets = maxw;
    l.tiles = sp_tiles(maxw) + 1;
    const size_t n_q[3] = {s.n_l, s.n_a, s.n_b};
    for (int q = 0; q < 3; q++) {
        l.split_words[q] = sp_nz(sp_split_words(n_q[q]));
        l.split_offsets[q] = sp_words(n_q[q]) + 1;
        l.split_tiles[q] = sp_tiles(sp_words(n_q[q])) + 1;
    }
    // a tail holds at most half its query's (or piece's) points: more big scalars than that
    // take a plain MSM
    size_t tail_n = l.compact() ? std::min(nmax, l.piece) : nmax;
    l.tail_sc = tail_n / 2 + 1;
    l.tail_g1 = tail_n / 2 + 1;
    l.tail_g2 = (l.compact() ? std::min(s.n_b, l.piece) : s.n_b) / 2 + 1;

    // The H MSM by default: its points are resident, so one chunk (digits for all n points at
    // once) and two bits more per window than sppark's choice, at most 14, from 2^19 points up.
    // Measured on an H200 at 2^20 (BENCHMARKS.md, the window sweep of `gpu_check --wbits-h`):
    // 14 bits in 1 chunk 13.3 ms against sppark's 12 bits in 4 chunks 18.5 ms, the same bytes.
    if (!wbits_h && !chunks_h && s.n_h >= ((size_t)1 << 19)) {
        wbits_h = std::min(sp_plan(s.n_h).wbits + 2, 14u);
        chunks_h = 1;
    }
    // A streamed H takes its points in chunks of at most one staging buffer; the resident
    // prefix is whole chunks (a chunk is read from the device only when it lies in the prefix).
    if (l.res[SP_Q_H] < s.n_h) {
        size_t need = (s.n_h + l.stage_g1 - 1) / l.stage_g1;
        size_t have = chunks_h ? chunks_h : sp_plan(s.n_h, wbits_h).batch;
        chunks_h = (uint32_t)std::max(need, have);
    }
    l.plan_h = sp_plan(s.n_h, wbits_h, chunks_h);
    if (l.res[SP_Q_H] < s.n_h)
        l.res[SP_Q_H] = l.res[SP_Q_H] / l.plan_h.stride * l.plan_h.stride;
    size_t b_g1 = l.plan_h.buckets, b_g2 = 0;
    size_t digits = l.plan_h.digits, temps = l.plan_h.temps;
    for (int q = 0; q < 3; q++) {
        sp_msm_plan c = sp_cover(n_q[q]);
        b_g1 = std::max(b_g1, c.buckets);
        if (q == 2)
            b_g2 = c.buckets;
        digits = std::max(digits, c.digits);
        temps = std::max(temps, c.temps);
    }
    l.msm_bytes = sp_nz(std::max(b_g1 * sizeof(bucket_t), b_g2 * sizeof(bucket_fp2_t)));
    l.hist = sp_nz(std::max(b_g1, b_g2));
    l.digits = sp_nz(digits);
    l.temps = sp_nz(temps);
    l.parts = (size_t)sms * BATCH_ADD_BLOCK_SIZE / WARP_SZ;
    l.acc_g1 = (size_t)SP_NW_MAX * 2 * SP_NT(bucket_t);
    l.acc_g2 = (size_t)SP_NW_MAX * 2 * SP_NT(bucket_fp2_t);
    l.results_bytes = (SP_NW_MAX + 1) * (SP_G1_JOBS * sizeof(bucket_t) + sizeof(bucket_fp2_t))
                    + sizeof(sp_dev_sums);
    return l;
}

// Device memory that frees itself; sized in elements of T.
template<class T> struct sp_buf {
    T* ptr = nullptr;
    size_t len = 0;
    void alloc(size_t n)
    {
        len = n;
        if (n) CUDA_OK(cudaMalloc(&ptr, n * sizeof(T)));
    }
    ~sp_buf() { if (ptr) (void)cudaFree(ptr); }
    size_t bytes() const { return len * sizeof(T); }
};

class sp_ntt : public NTT {
public:
    using NTT::NTT_internal;
};

// A circuit's matrices resident on the device, for witness-only proofs
// (`splitprover_gpu_set_matrices`): each of A, B, C in CSR, the coefficients, the witness
// layout's bitmap and rank table, the shape's density words (A-aux, B-input, B-aux, in the
// order of an input set's `words`).
struct sp_dev_matrices {
    sp_buf<uint64_t> row_start[3], terms[3];
    sp_buf<fr_t> coeffs;
    sp_buf<uint64_t> is_bit, bits_before, words;
    size_t rows = 0, n_bits = 0;
    size_t popcount[3] = {};
    bool ready = false;
    size_t bytes() const
    {
        size_t b = coeffs.bytes() + is_bit.bytes() + bits_before.bytes() + words.bytes();
        for (int q = 0; q < 3; q++)
            b += row_start[q].bytes() + terms[q].bytes();
        return b;
    }
};

// One input set: what the copy stream writes for a proof.
struct sp_set {
    sp_buf<fr_t> abc;          // 3 * domain: a, b, c, then h in place of a
    sp_buf<fr_t> input, aux;
    sp_buf<uint64_t> words;    // density words: a_aux, b_input, b_aux
};

// One query's 0/1 split: ones and big bitmaps, the prefix sums of `big` for the tail gathers.
struct sp_split_buf {
    sp_buf<uint64_t> ones, big;
    sp_buf<uint32_t> offsets, tiles;
};

// One MSM's device accumulators.
template<class B> struct sp_job_buf {
    sp_buf<typename B::mem_t> acc_w, acc_ones, split;
};

// Timing events of one proof, on the copy stream (COPY0, COPY1) and the compute stream.
// `vec` (a, b, c landed on the device) let each NTT start as soon as its own vector is in.
enum { EV_COPY0, EV_COPY1, EV_START, EV_GATHER, EV_NTT, EV_L, EV_A, EV_B1, EV_B2, EV_H,
       EV_SIDE0, EV_SIDE1, EV_DONE, EV_COUNT };

// What the host records of one MSM, for its final sums and its window combination.
struct sp_job_rec {
    uint32_t nwins = 0, wbits = 0;
    bool pippenger = false, split = false;
};

// The shape of a proof's back half: per query (L, A, B) `SP_PLAIN` for a plain MSM over all
// its scalars, otherwise the size its tail MSM runs at (`sp_tail_size`; 0: no tail).
static const size_t SP_PLAIN = SIZE_MAX;
// The compact layout's query whose tail exceeds its tail buffers: taken in pieces.
static const size_t SP_PIECES = SIZE_MAX - 2;
struct sp_back_key {
    size_t tail[3] = {SP_PLAIN - 1, SP_PLAIN - 1, SP_PLAIN - 1};   // matches no real shape
    bool operator==(const sp_back_key& o) const
    {
        return tail[0] == o.tail[0] && tail[1] == o.tail[1] && tail[2] == o.tail[2];
    }
};

// A proof in flight: two alternate, so that one proof's events and host results are read
// while the next one's are being recorded.
struct sp_flight {
    cudaEvent_t ev[EV_COUNT] = {};
    cudaEvent_t vec[3] = {};           // copy stream: a, b, c copied
    cudaEvent_t assign = nullptr;      // copy stream: the assignment and the bitmaps copied
    cudaEvent_t counted = nullptr;     // the split counts are on the host
    cudaEvent_t done = nullptr;        // the last proof of a batch is done (a blocking wait)
    uint32_t* counts = nullptr;        // page-locked: the big-scalar counts of L, A, B
    unsigned char* results = nullptr;  // page-locked: the final sums
    sp_blind* blind = nullptr;         // page-locked: this proof's blinding input to `sp_side`
    sp_blind* d_blind = nullptr;       // its device copy
    uint32_t nwins[SP_JOBS] = {}, wbits[SP_JOBS] = {};
    sp_components host_sums;           // the diagnostic's sums (`splitprover_gpu_prove_batch`)
    double cpu_issue = 0, cpu_wait = 0; // this proof's host CPU so far (ms), for its phases
    cudaEvent_t stream0 = nullptr, stream1 = nullptr;   // the streaming stream: first chunk
                                                        // copy started, last one landed
};

// CPU milliseconds of the calling thread.
static double sp_cpu_ms()
{
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// Adds the calling thread's CPU time from construction to destruction to `acc`.
struct sp_cpu_span {
    double& acc;
    double t0;
    explicit sp_cpu_span(double& a) : acc(a), t0(sp_cpu_ms()) {}
    ~sp_cpu_span() { acc += sp_cpu_ms() - t0; }
};

// Page-locks [ptr, ptr + len) for the copy when CUDA accepts it (not every mapping can be).
struct sp_host_lock {
    void* ptr = nullptr;
    bool ok = false;
    sp_host_lock(const void* p, size_t len)
    {
        if (len && cudaHostRegister(const_cast<void*>(p), len, cudaHostRegisterPortable
                                                         | cudaHostRegisterReadOnly)
                   == cudaSuccess) {
            ptr = const_cast<void*>(p);
            ok = true;
        } else {
            (void)cudaGetLastError();
        }
    }
    ~sp_host_lock() { if (ok) (void)cudaHostUnregister(ptr); }
};

struct GpuContext {
    std::mutex mtx;
    const gpu_t& gpu;
    sp_srs lens;               // lengths only (host pointers cleared after the upload)
    uint32_t lg_domain;
    size_t domain;
    fr_t z_inv;                // 1 / (g^domain - 1): the vanishing polynomial on the coset
    sp_layout lay;
    int nsets = 1;
    int sms = 0;
    // sppark's accumulate and bitmap batch addition keep a work counter in a static device
    // array indexed by this number: contexts of one process (tests, a sweep) get their own.
    uint32_t sid = 0;
    dim3 acc_block_g1, acc_block_g2;   // accumulate's block size (its maximum), per group

    sp_buf<affine_t> d_h, d_l, d_a, d_b_g1;
    sp_buf<affine_fp2_t> d_b_g2;

    sp_set sets[2];
    sp_buf<fr_t> d_sc_a, d_sc_b;
    sp_buf<uint32_t> d_offsets, d_tiles;
    sp_split_buf split[3];
    sp_buf<fr_t> d_tail_sc;
    sp_buf<affine_t> d_tail_g1;
    sp_buf<affine_fp2_t> d_tail_g2;
    sp_buf<unsigned char> d_msm;   // buckets of the Pippenger in progress
    sp_buf<uint32_t> d_hist, d_digits;
    sp_buf<uint2> d_temps;
    sp_buf<bucket_t::mem_t> d_part_g1;
    sp_buf<bucket_fp2_t::mem_t> d_part_g2;
    sp_job_buf<bucket_t> job_g1[SP_G1_JOBS];
    sp_job_buf<bucket_fp2_t> job_g2;
    sp_buf<unsigned char> d_results;

    sp_dev_matrices mat;   // witness-only proofs: the circuit's matrices

    // SRS streaming (issue 32, `lay.streams()`): the points past each query's resident prefix
    // (`lay.res`) are copied from the page-locked host image (`lens`' pointers, kept;
    // `image_lock`) into the staging buffers in turn on `s_stream`. A copy waits for its
    // buffer's `consumed` (the last kernel that read its previous chunk); the kernels reading it
    // wait for its `landed`.
    sp_buf<unsigned char> stage[2];
    std::unique_ptr<stream_t> s_stream;
    cudaEvent_t landed[2] = {}, consumed[2] = {};
    uint64_t stage_next = 0;
    std::atomic<uint64_t> streamed_total{0};
    cudaEvent_t* stream_mark = nullptr;   // the flight's stream0, recorded at its first copy
    std::unique_ptr<sp_host_lock> image_lock;

    std::unique_ptr<stream_t> s_main, s_n1, s_n2, s_copy;
    // The side stream (highest priority: its single block must start while the H MSM fills the
    // device): the final sums of L, A, B_G1, B_G2 and `sp_side`.
    cudaStream_t s_side = nullptr;
    bool device_finish = false;
    sp_buf<sp_blind> d_blind;          // one per flight
    cudaEvent_t ev_fork = nullptr, ev_join1 = nullptr, ev_join2 = nullptr;
    cudaEvent_t ev_side_fork = nullptr, ev_side_join = nullptr;
    cudaEvent_t ev_batch = nullptr;
    cudaEvent_t released[2] = {};      // an input set's last reader is done
    sp_flight fl[2];
    void* pinned = nullptr;

    // The front half of a proof (NTTs, gathers, splits, H MSM) captured once per input set and
    // flight (the buffers and events it names) and replayed with one launch. `key` is what the
    // capture depends on beyond those: B's input popcount (an offset into B's scalars) and the
    // length of a/b/c (where their zero padding starts).
    struct front_graph {
        cudaGraphExec_t exec = nullptr;
        std::pair<size_t, size_t> key{0, 0};
    };
    front_graph front[2][2];   // [set][flight]
    // The back half (L, A, B_G1, B_G2 MSMs, final sums) captured per input set, flight and
    // shape (`sp_back_key`: per query a plain MSM or the padded size of its tail), once that
    // shape has come twice (`recent`), a few shapes per set and flight, the least recently used
    // replaced. `rec` is what the host keeps of the captured MSMs (window counts and sizes).
    struct back_graph {
        cudaGraphExec_t exec = nullptr;
        sp_back_key key;
        sp_job_rec rec[SP_JOBS];
        uint64_t used = 0;
    };
    static const int BACK_GRAPHS = 4;
    back_graph back[2][2][BACK_GRAPHS];   // [set][flight][shape]
    sp_back_key recent[8];
    uint32_t recent_next = 0;   // where the next shape seen once goes in `recent`
    uint64_t back_clock = 0;    // the back graphs' use order (least recently used replaced)
    bool graphs = true;        // false: by option, or after a capture failed (graph_error)
    bool capturing = false;    // a half is being captured: host-visible events are graph nodes
    std::string graph_error;

    GpuContext(const gpu_t& g) : gpu(g) {}
    ~GpuContext()
    {
        for (auto* s : {s_main.get(), s_n1.get(), s_n2.get(), s_copy.get(), s_stream.get()})
            if (s) (void)cudaStreamSynchronize(*s);
        if (s_side) {
            (void)cudaStreamSynchronize(s_side);
            (void)cudaStreamDestroy(s_side);
        }
        for (cudaEvent_t e : {ev_fork, ev_join1, ev_join2, ev_side_fork, ev_side_join, ev_batch,
                              released[0], released[1], landed[0], landed[1], consumed[0],
                              consumed[1]})
            if (e) (void)cudaEventDestroy(e);
        for (auto& f : fl) {
            for (cudaEvent_t e : f.ev)
                if (e) (void)cudaEventDestroy(e);
            for (cudaEvent_t e : f.vec)
                if (e) (void)cudaEventDestroy(e);
            if (f.assign) (void)cudaEventDestroy(f.assign);
            if (f.counted) (void)cudaEventDestroy(f.counted);
            if (f.done) (void)cudaEventDestroy(f.done);
            if (f.stream0) (void)cudaEventDestroy(f.stream0);
            if (f.stream1) (void)cudaEventDestroy(f.stream1);
        }
        if (pinned) (void)cudaFreeHost(pinned);
        for (auto& row : front)
            for (auto& g : row)
                if (g.exec) (void)cudaGraphExecDestroy(g.exec);
        for (auto& row : back)
            for (auto& f : row)
                for (auto& g : f)
                    if (g.exec) (void)cudaGraphExecDestroy(g.exec);
        image_lock.reset();   // after every stream that copied from the image is idle
    }
};

// An event record or wait that, while the front half is captured, becomes a graph node on an
// event the host or the copy stream sees (rather than a dependency inside the capture).
static void sp_record_ext(const GpuContext& ctx, cudaEvent_t e, cudaStream_t s)
{
    CUDA_OK(ctx.capturing ? cudaEventRecordWithFlags(e, s, cudaEventRecordExternal)
                          : cudaEventRecord(e, s));
}
static void sp_wait_ext(const GpuContext& ctx, cudaStream_t s, cudaEvent_t e)
{
    CUDA_OK(cudaStreamWaitEvent(s, e, ctx.capturing ? cudaEventWaitExternal : 0));
}

// sppark's CUDA_OK throws the negated CUDA code; errors leave here with the CUDA code itself
// (what the Rust side tests for "no GPU" and for sticky errors).
static RustError sp_error(const cuda_error& e, const char* what)
{
    std::string msg = std::string(what) + ": " + e.what();
    return RustError{e.code() < 0 ? -e.code() : e.code(), msg};
}

template<class T>
static void sp_upload_points(sp_buf<T>& dst, const T* src, size_t n, stream_t& s)
{
    dst.alloc(n);
    if (n)
        CUDA_OK(cudaMemcpyAsync(dst.ptr, src, n * sizeof(T), cudaMemcpyHostToDevice, s));
}

static void sp_event(cudaEvent_t* e, unsigned flags)
{
    CUDA_OK(cudaEventCreateWithFlags(e, flags));
}

static std::string sp_mib(size_t b) { return std::to_string(b >> 20) + " MiB"; }

// From this domain size up (lg2) the device finishes a proof by default (`sp_side`): the H MSM
// (13 ms at 2^20 on an H200) then outlasts the side stream's chains (about 7 ms), so they cost
// no device time and save the host its window sums and most of the blinding.
#define SP_DEVICE_FINISH_LG 20

// Device memory left free beside a second input set (NTT twiddles, the runtime's own needs).
static const size_t SP_RESERVE = (size_t)1 << 30;

static std::atomic<uint32_t> sp_next_sid{0};

extern "C"
RustError::by_value splitprover_gpu_create(const sp_srs* srs, const void* image,
                                           size_t image_len, int device,
                                           const sp_options* opts, GpuContext** out,
                                           sp_upload* stats)
{
    *out = nullptr;
    if (!ngpus())
        return RustError{cudaErrorNoDevice, "no CUDA device"};
    if (device < 0 || (size_t)device >= ngpus())
        return RustError{cudaErrorInvalidDevice, "no CUDA device with that ordinal"};
    if (srs->n_h < 2)
        return RustError{cudaErrorInvalidValue, "the SRS's H query has fewer than 2 points"};
    if (opts->wbits_h && (opts->wbits_h < 10 || opts->wbits_h > 18))
        return RustError{cudaErrorInvalidValue, "the H window size must be 10 to 18 bits"};
    if (opts->chunks_h > 64)
        return RustError{cudaErrorInvalidValue, "the H MSM takes 1 to 64 chunks"};
    if (opts->finish < 0 || opts->finish > 2)
        return RustError{cudaErrorInvalidValue, "finish: 0 (by size), 1 (device) or 2 (host)"};

    GpuContext* ctx = nullptr;
    try {
        const gpu_t& gpu = select_gpu(device);
        gpu.select();
        ctx = new GpuContext(gpu);
        ctx->lens = *srs;
        ctx->lg_domain = sp_lg2(srs->n_h - 1) + 1;
        ctx->domain = (size_t)1 << ctx->lg_domain;
        ctx->sms = gpu.sm_count();
        ctx->sid = sp_next_sid.fetch_add(1) % std::min(MSM_NSTREAMS, BATCH_ADD_NSTREAMS);
        fr_t z = group_gen;
        for (uint32_t i = 0; i < ctx->lg_domain; i++)
            z ^= 2;
        ctx->z_inv = (z - fr_t::one()).reciprocal();

        // Refuse a shape that cannot fit, with the numbers, before allocating anything; take
        // the second input set only when it fits with room to spare.
        const sp_layout& L = ctx->lay = sp_layout_of(*srs, ctx->sms, opts->wbits_h,
                                                     opts->chunks_h, &opts->res);
        size_t srs_bytes = L.resident_bytes();
        size_t one_set = L.once_bytes() + L.set_bytes();
        size_t free_b = 0, total_b = 0;
        CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
        if (srs_bytes + one_set > free_b) {
            std::string msg = "the SRS needs " + sp_mib(srs_bytes)
                + " of device memory and a proof " + sp_mib(one_set)
                + " more, but the device has " + sp_mib(free_b) + " free of "
                + sp_mib(total_b);
            delete ctx;
            return RustError{cudaErrorMemoryAllocation, msg};
        }
        // the compact layout makes c, A's and B's scalars inside the proof's front half, with a
        // copy from the slot and host waits in between: kernel by kernel, one input set
        ctx->graphs = !opts->no_graphs && !L.compact();
        ctx->nsets = opts->double_buffer && !L.compact()
                     && srs_bytes + one_set + L.set_bytes() + SP_RESERVE <= free_b ? 2 : 1;

        ctx->s_main.reset(new stream_t(gpu.id()));
        ctx->s_n1.reset(new stream_t(gpu.id()));
        ctx->s_n2.reset(new stream_t(gpu.id()));
        ctx->s_copy.reset(new stream_t(gpu.id()));
        if (L.streams())
            ctx->s_stream.reset(new stream_t(gpu.id()));
        int least = 0, greatest = 0;
        CUDA_OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        CUDA_OK(cudaStreamCreateWithPriority(&ctx->s_side, cudaStreamNonBlocking, greatest));
        ctx->device_finish = opts->finish == 1
                             || (opts->finish == 0 && ctx->lg_domain >= SP_DEVICE_FINISH_LG);
        stream_t& s = *ctx->s_copy;

        auto t0 = std::chrono::steady_clock::now();
        {
            // Kept page-locked for the context's life when part of the SRS streams from it.
            auto lock = std::make_unique<sp_host_lock>(image, image_len);
            stats->pinned = lock->ok;
            sp_upload_points(ctx->d_h, srs->h, L.res[SP_Q_H], s);
            sp_upload_points(ctx->d_l, srs->l, L.res[SP_Q_L], s);
            sp_upload_points(ctx->d_a, srs->a, L.res[SP_Q_A], s);
            sp_upload_points(ctx->d_b_g1, srs->b_g1, L.res[SP_Q_B1], s);
            sp_upload_points(ctx->d_b_g2, srs->b_g2, L.res[SP_Q_B2], s);
            s.sync();
            if (L.streams())
                ctx->image_lock = std::move(lock);
        }
        stats->upload_ms = std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - t0).count();
        if (!L.streams()) {
            ctx->lens.h = ctx->lens.l = ctx->lens.a = ctx->lens.b_g1 = nullptr;
            ctx->lens.b_g2 = nullptr;
        }
        stats->resident_bytes = srs_bytes;
        stats->streamed_bytes = L.streamed_bytes();
        stats->stream_gbps = 0;
        if (L.streams()) {
            for (int k = 0; k < 2; k++) {
                ctx->stage[k].alloc(L.stage_bytes);
                sp_event(&ctx->landed[k], cudaEventDisableTiming);
                sp_event(&ctx->consumed[k], cudaEventDisableTiming);
                CUDA_OK(cudaEventRecord(ctx->consumed[k], *ctx->s_stream));
            }
            // The copy rate the streaming gets: one staging buffer's worth of the first
            // streamed query, timed on the streaming stream.
            int q = 0;
            while (L.res[q] == L.n[q])
                q++;
            const void* from[SP_QUERIES] = {srs->h, srs->l, srs->a, srs->b_g1, srs->b_g2};
            size_t bytes = std::min(L.stage_bytes, (L.n[q] - L.res[q]) * L.point_bytes(q));
            cudaEvent_t e0, e1;
            sp_event(&e0, cudaEventDefault);
            sp_event(&e1, cudaEventDefault);
            stream_t& c = *ctx->s_stream;
            CUDA_OK(cudaEventRecord(e0, c));
            CUDA_OK(cudaMemcpyAsync(ctx->stage[0].ptr,
                                    (const unsigned char*)from[q] + L.res[q] * L.point_bytes(q),
                                    bytes, cudaMemcpyHostToDevice, c));
            CUDA_OK(cudaEventRecord(e1, c));
            c.sync();
            float ms = 0;
            (void)cudaEventElapsedTime(&ms, e0, e1);
            (void)cudaEventDestroy(e0);
            (void)cudaEventDestroy(e1);
            stats->stream_gbps = ms > 0 ? bytes / (ms * 1e6) : 0;
        }

        for (int k = 0; k < ctx->nsets; k++) {
            sp_set& st = ctx->sets[k];
            st.abc.alloc(L.abc);
            st.input.alloc(L.input);
            st.aux.alloc(L.aux);
            st.words.alloc(L.words);
        }
        ctx->d_sc_a.alloc(L.sc_a);
        ctx->d_sc_b.alloc(L.sc_b);
        ctx->d_offsets.alloc(L.offsets);
        ctx->d_tiles.alloc(L.tiles);
        for (int q = 0; q < 3; q++) {
            ctx->split[q].ones.alloc(L.split_words[q]);
            ctx->split[q].big.alloc(L.split_words[q]);
            ctx->split[q].offsets.alloc(L.split_offsets[q]);
            ctx->split[q].tiles.alloc(L.split_tiles[q]);
        }
        ctx->d_tail_sc.alloc(L.tail_sc);
        ctx->d_tail_g1.alloc(L.tail_g1);
        ctx->d_tail_g2.alloc(L.tail_g2);
        ctx->d_msm.alloc(L.msm_bytes);
        ctx->d_hist.alloc(L.hist);
        ctx->d_digits.alloc(L.digits);
        ctx->d_temps.alloc(L.temps);
        ctx->d_part_g1.alloc(L.parts);
        ctx->d_part_g2.alloc(L.parts);
        for (auto& j : ctx->job_g1) {
            j.acc_w.alloc(L.acc_g1);
            j.acc_ones.alloc(L.parts);
            j.split.alloc(L.parts);
        }
        ctx->job_g2.acc_w.alloc(L.acc_g2);
        ctx->job_g2.acc_ones.alloc(L.parts);
        ctx->job_g2.split.alloc(L.parts);
        ctx->d_results.alloc(L.results_bytes);
        ctx->d_blind.alloc(2);

        // Page-locked host memory of the two flights: counts, the blinding input, the results.
        size_t counts_b = SP_COUNTS_BYTES, blind_b = (sizeof(sp_blind) + 63) / 64 * 64;
        size_t per_flight = counts_b + blind_b + L.results_bytes;
        CUDA_OK(cudaMallocHost(&ctx->pinned, 2 * per_flight));
        for (int f = 0; f < 2; f++) {
            unsigned char* base = (unsigned char*)ctx->pinned + f * per_flight;
            ctx->fl[f].counts = (uint32_t*)base;
            ctx->fl[f].blind = (sp_blind*)(base + counts_b);
            ctx->fl[f].d_blind = ctx->d_blind.ptr + f;
            ctx->fl[f].results = base + counts_b + blind_b;
            // The events a host thread waits on while the device works block it instead of
            // spinning: `counted` every proof, `done` only for the last of a batch (a proof
            // before it is finished by the time the host reads it: EV_DONE, not blocking).
            for (int e = 0; e < EV_COUNT; e++)
                sp_event(&ctx->fl[f].ev[e], cudaEventDefault);
            sp_event(&ctx->fl[f].counted, cudaEventBlockingSync | cudaEventDisableTiming);
            sp_event(&ctx->fl[f].done, cudaEventBlockingSync | cudaEventDisableTiming);
            for (auto& e : ctx->fl[f].vec)
                sp_event(&e, cudaEventDisableTiming);
            sp_event(&ctx->fl[f].assign, cudaEventDisableTiming);
            sp_event(&ctx->fl[f].stream0, cudaEventDefault);
            sp_event(&ctx->fl[f].stream1, cudaEventDefault);
        }
        sp_event(&ctx->ev_fork, cudaEventDisableTiming);
        sp_event(&ctx->ev_side_fork, cudaEventDisableTiming);
        sp_event(&ctx->ev_side_join, cudaEventDisableTiming);
        sp_event(&ctx->ev_join1, cudaEventDisableTiming);
        sp_event(&ctx->ev_join2, cudaEventDisableTiming);
        sp_event(&ctx->ev_batch, cudaEventDefault);
        for (auto& e : ctx->released) {
            sp_event(&e, cudaEventDisableTiming);
            CUDA_OK(cudaEventRecord(e, *ctx->s_main));
        }

        cudaFuncAttributes attr;
        CUDA_OK(cudaFuncGetAttributes(&attr, accumulate<bucket_t, affine_t::mem_t>));
        ctx->acc_block_g1 = dim3(attr.maxThreadsPerBlock);
        CUDA_OK(cudaFuncGetAttributes(&attr, accumulate<bucket_fp2_t, affine_fp2_t::mem_t>));
        ctx->acc_block_g2 = dim3(attr.maxThreadsPerBlock);

        size_t scratch = L.once_bytes() + ctx->nsets * L.set_bytes();
        stats->scratch_bytes = scratch;
        stats->input_sets = ctx->nsets;
        stats->wbits_h = L.plan_h.wbits;
        stats->chunks_h = (uint32_t)L.plan_h.batch;
        stats->device_finish = ctx->device_finish;
        ctx->s_main->sync();
    } catch (const cuda_error& e) {
        delete ctx;
        return sp_error(e, "setting up the GPU prover");
    } catch (const std::bad_alloc&) {
        delete ctx;
        return RustError{cudaErrorMemoryAllocation, "setting up the GPU prover: out of host memory"};
    }
    *out = ctx;
    return RustError{cudaSuccess};
}

// Device bytes a circuit's matrices take once resident (what `splitprover_gpu_set_matrices`
// allocates), from their dimensions alone (rows, nnz, n_coeffs, n_inputs, n_aux; no pointer is
// read): the coefficients, the witness layout's bitmap and rank table, the density words, the
// CSR rows and terms of A, B and C.
static size_t sp_matrices_bytes(const sp_matrices& m)
{
    size_t w_aux = sp_words(m.n_aux), w_inp = sp_words(m.n_inputs);
    size_t b = m.n_coeffs * sizeof(fr_t) + (2 * w_aux + 1) * 8 + (2 * w_aux + w_inp) * 8;
    for (int q = 0; q < 3; q++)
        b += (m.rows + 1 + m.nnz[q]) * 8;
    return b;
}

extern "C" size_t splitprover_gpu_matrices_bytes(const sp_matrices* m)
{
    return sp_matrices_bytes(*m);
}

// Uploads a circuit's matrices and witness layout for witness-only proofs (issue 31), once per
// context; `bytes` gets the device memory they take. Refused, with the numbers, when their shape
// is not the SRS's or the device has not the room.
extern "C"
RustError::by_value splitprover_gpu_set_matrices(GpuContext* ctx, const sp_matrices* m,
                                                 size_t* bytes)
{
    std::lock_guard<std::mutex> guard(ctx->mtx);
    const sp_srs& L = ctx->lens;
    sp_dev_matrices& M = ctx->mat;
    if (M.ready)
        return RustError{cudaErrorInvalidValue, "this context has its matrices already"};
    if (m->n_inputs != L.n_inputs || m->n_aux != L.n_l)
        return RustError{cudaErrorInvalidValue,
                         "the matrices' inputs and aux variables are not the SRS's"};
    if (m->rows > ctx->domain || m->aux_words != (m->n_aux + 63) / 64 || m->n_bits > m->n_aux
        || m->n_coeffs < 2)
        return RustError{cudaErrorInvalidValue, "the matrices' lengths do not hold together"};
    if (L.n_inputs + m->popcount[0] != L.n_a || m->popcount[1] + m->popcount[2] != L.n_b)
        return RustError{cudaErrorInvalidValue, "the matrices' densities are not the SRS's"};
    size_t stage = (m->n_aux - m->n_bits) * sizeof(fr_t) + (m->n_bits + 63) / 64 * 8;
    if (stage > ctx->domain * sizeof(fr_t))
        return RustError{cudaErrorInvalidValue,
                         "a packed witness does not fit the third of an input set it is staged in"};
    size_t w_aux = sp_words(L.n_l), w_inp = sp_words(L.n_inputs);
    size_t need = sp_matrices_bytes(*m);
    try {
        ctx->gpu.select();
        size_t free_b = 0, total_b = 0;
        CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
        if (need > free_b)
            return RustError{cudaErrorMemoryAllocation,
                             "the matrices need " + sp_mib(need) + " of device memory, but the "
                             "device has " + sp_mib(free_b) + " free of " + sp_mib(total_b)};
        stream_t& s = *ctx->s_copy;
        for (int q = 0; q < 3; q++) {
            M.row_start[q].alloc(m->rows + 1);
            s.HtoD(M.row_start[q].ptr, m->row_start[q], m->rows + 1);
            M.terms[q].alloc(m->nnz[q]);
            if (m->nnz[q])
                s.HtoD(M.terms[q].ptr, m->terms[q], m->nnz[q]);
        }
        M.coeffs.alloc(m->n_coeffs);
        s.HtoD(M.coeffs.ptr, reinterpret_cast<const fr_t*>(m->coeffs), m->n_coeffs);
        M.is_bit.alloc(sp_nz(m->aux_words));
        if (m->aux_words)
            s.HtoD(M.is_bit.ptr, m->is_bit, m->aux_words);
        M.bits_before.alloc(m->aux_words + 1);
        s.HtoD(M.bits_before.ptr, m->bits_before, m->aux_words + 1);
        M.words.alloc(sp_nz(2 * w_aux + w_inp));
        if (w_aux) {
            s.HtoD(M.words.ptr, m->density[0], w_aux);
            s.HtoD(M.words.ptr + w_aux + w_inp, m->density[2], w_aux);
        }
        if (w_inp)
            s.HtoD(M.words.ptr + w_aux, m->density[1], w_inp);
        s.sync();
        M.rows = m->rows;
        M.n_bits = m->n_bits;
        for (int q = 0; q < 3; q++)
            M.popcount[q] = m->popcount[q];
        M.ready = true;
        *bytes = M.bytes();
    } catch (const cuda_error& e) {
        return sp_error(e, "uploading the matrices to the GPU");
    }
    return RustError{cudaSuccess};
}

// SRS bytes the context has copied from the host image so far (streamed chunks).
extern "C" uint64_t splitprover_gpu_streamed_total(const GpuContext* ctx)
{
    return ctx->streamed_total.load(std::memory_order_relaxed);
}

extern "C" void splitprover_gpu_destroy(GpuContext* ctx)
{
    if (!ctx) return;
    ctx->gpu.select();
    delete ctx;
}

static void sp_check_launch() { CUDA_OK(cudaGetLastError()); }

static void sp_fork(cudaEvent_t e, stream_t& from, stream_t& to)
{
    CUDA_OK(cudaEventRecord(e, from));
    CUDA_OK(cudaStreamWaitEvent(to, e, 0));
}

static int sp_blocks(const GpuContext& ctx, size_t threads, int per_sm)
{
    return (int)std::max<size_t>(1, std::min<size_t>((threads + 255) / 256,
                                                     (size_t)ctx.sms * per_sm));
}

// Exclusive prefix counts of the set bits of words[0..nwords): per word in `offsets`, per tile in
// `tiles`, the total in tiles[ntiles].
static void sp_scan(const uint64_t* words, size_t nwords, uint32_t* offsets, uint32_t* tiles,
                    stream_t& s)
{
    size_t ntiles = sp_tiles(nwords);
    sp_tile_scan<<<(unsigned)ntiles, SP_TILE, 0, s>>>(offsets, tiles, words, nwords);
    sp_check_launch();
    sp_tiles_scan<<<1, 32, 0, s>>>(tiles, ntiles);
    sp_check_launch();
}

template<class T>
static void sp_gather_launch(GpuContext& ctx, T* dst, const T* src, const uint64_t* words,
                             size_t nwords, const uint32_t* offsets, const uint32_t* tiles,
                             stream_t& s, size_t base = 0)
{
    sp_gather<T><<<sp_blocks(ctx, nwords, 8), 256, 0, s>>>(dst, src, words, offsets, tiles,
                                                           nwords, base);
    sp_check_launch();
}

// Gathers into dst the elements of src (on the device) whose bit is set in words[0..nwords).
static void sp_gather_dense(GpuContext& ctx, fr_t* dst, const fr_t* src, const uint64_t* words,
                            size_t nwords, stream_t& s)
{
    if (!nwords) return;
    sp_scan(words, nwords, ctx.d_offsets.ptr, ctx.d_tiles.ptr, s);
    sp_gather_launch(ctx, dst, src, words, nwords, ctx.d_offsets.ptr, ctx.d_tiles.ptr, s);
}

// Marks the ones and the big scalars of d_sc[0..n) in query q's split buffers, with the prefix
// sums of `big`, and queues the count of big scalars to counts[q] on the host.
static void sp_classify_query(GpuContext& ctx, int q, const fr_t* d_sc, size_t n,
                              uint32_t* counts, stream_t& s)
{
    sp_split_buf& sb = ctx.split[q];
    size_t padded = sp_split_words(n) * 64;
    fr_t fr_one = fr_t::one();
    const uint64_t* one = (const uint64_t*)&fr_one;
    sp_classify<<<sp_blocks(ctx, padded, 16), 256, 0, s>>>((uint32_t*)sb.ones.ptr,
        (uint32_t*)sb.big.ptr, d_sc, n, padded, one[0], one[1], one[2], one[3]);
    sp_check_launch();
    size_t nwords = sp_words(n);
    sp_scan(sb.big.ptr, nwords, sb.offsets.ptr, sb.tiles.ptr, s);
    CUDA_OK(cudaMemcpyAsync(&counts[q], sb.tiles.ptr + sp_tiles(nwords), sizeof(uint32_t),
                            cudaMemcpyDeviceToHost, s));
    if (ctx.lay.compact()) {
        // the big count before each piece: the tile prefix at its start (pieces are whole
        // tiles), one every piece / SP_CHUNK_ALIGN tiles
        size_t piece = ctx.lay.piece, npieces = (n + piece - 1) / piece;
        CUDA_OK(cudaMemcpy2DAsync(counts + SP_BOUNDS + q * (SP_MAX_PIECES + 1), sizeof(uint32_t),
                                  sb.tiles.ptr, piece / SP_CHUNK_ALIGN * sizeof(uint32_t),
                                  sizeof(uint32_t), npieces, cudaMemcpyDeviceToHost, s));
    }
}

// Where an MSM reads its points: `dev` holds [0, resident) on the device, `host` (page-locked)
// the whole query, streamed past the prefix (issue 32). A device-only source (a tail's gathered
// points) has `resident` SIZE_MAX.
template<class A> struct sp_src {
    const A* dev;
    const A* host;
    size_t resident;
};
template<class A> static sp_src<A> sp_on_device(const A* dev) { return {dev, nullptr, SIZE_MAX}; }

// The source of G1 query q (SP_Q_H .. SP_Q_B1): its resident prefix and its host points.
static sp_src<affine_t> sp_src_g1(const GpuContext& ctx, int q)
{
    const sp_buf<affine_t>* dev[] = {&ctx.d_h, &ctx.d_l, &ctx.d_a, &ctx.d_b_g1};
    const affine_t* host[] = {ctx.lens.h, ctx.lens.l, ctx.lens.a, ctx.lens.b_g1};
    return {dev[q]->ptr, host[q], ctx.lay.res[q]};
}

// The points [off, off + num) of `src` on the device for kernels on stream `s`: in place when
// they lie in the resident prefix, otherwise copied now into the next staging buffer on the
// streaming stream, once that buffer's previous chunk is consumed, with `s` waiting for the
// copy. `slot` is the staging buffer (-1: resident), for `sp_consumed` after the last kernel on
// `s` that reads the chunk.
template<class A>
static const A* sp_fetch(GpuContext& ctx, const sp_src<A>& src, size_t off, size_t num,
                         stream_t& s, int& slot)
{
    slot = -1;
    if (off + num <= src.resident)
        return src.dev + off;
    size_t bytes = num * sizeof(A);
    if (!ctx.lay.streams() || !src.host || bytes > ctx.stage[0].bytes())
        throw cuda_error{cudaErrorInvalidValue,
                         std::string("a streamed chunk exceeds the staging buffers sized for it")};
    slot = (int)(ctx.stage_next++ & 1);
    stream_t& c = *ctx.s_stream;
    CUDA_OK(cudaStreamWaitEvent(c, ctx.consumed[slot], 0));
    if (ctx.stream_mark) {
        CUDA_OK(cudaEventRecord(*ctx.stream_mark, c));
        ctx.stream_mark = nullptr;
    }
    CUDA_OK(cudaMemcpyAsync(ctx.stage[slot].ptr, src.host + off, bytes, cudaMemcpyHostToDevice,
                            c));
    CUDA_OK(cudaEventRecord(ctx.landed[slot], c));
    CUDA_OK(cudaStreamWaitEvent(s, ctx.landed[slot], 0));
    ctx.streamed_total += bytes;
    return reinterpret_cast<const A*>(ctx.stage[slot].ptr);
}

static void sp_consumed(GpuContext& ctx, int slot, stream_t& s)
{
    if (slot >= 0)
        CUDA_OK(cudaEventRecord(ctx.consumed[slot], s));
}

// The accumulate kernel's block size for a bucket type.
template<class B> static dim3 sp_acc_block(const GpuContext& ctx)
{
    if constexpr (B::degree == 1)
        return ctx.acc_block_g1;
    else
        return ctx.acc_block_g2;
}

// Pippenger over the points of `src` [0..n) and d_sc[0..n) with plan p, as sppark's
// msm_t::invoke runs it for device-resident points and scalars, chunk by chunk (a chunk past a
// streamed source's resident prefix copied in as the previous one computes): signed digits and
// their sort, the batch addition of window 0's +-1 digits, the bucket accumulation and the row
// integration; then each chunk's row sums and partial sums are added into the job's
// accumulators (its first chunk overwrites them when `fresh`). All on stream s, nothing waited
// for. `coop_blocks` (0: one per SM) is the grid of the bucket accumulation, a cooperative
// launch whose blocks must all be resident at once: one SM fewer leaves room for `sp_side`'s
// block, which runs beside the H MSM for milliseconds.
template<class B, class A>
static void sp_pippenger(GpuContext& ctx, sp_job_buf<B>& job, typename B::mem_t* d_part,
                         const sp_src<A>& src, const fr_t* d_sc, const sp_msm_plan& p,
                         stream_t& s, int coop_blocks = 0, bool fresh = true)
{
    typedef typename B::mem_t bucket_h;
    typedef typename A::mem_t affine_h;
    if (p.buckets * sizeof(B) > ctx.d_msm.bytes() || p.buckets > ctx.d_hist.len
        || p.digits > ctx.d_digits.len || p.temps > ctx.d_temps.len
        || p.nwins > SP_NW_MAX)
        throw cuda_error{cudaErrorInvalidValue,
                         std::string("an MSM plan exceeds the scratch sized for it")};
    const uint32_t row_sz = 1U << (p.wbits - 1);
    bucket_h* buckets = (bucket_h*)ctx.d_msm.ptr;
    vec2d_t<uint32_t> hist{ctx.d_hist.ptr, row_sz};
    vec2d_t<uint32_t> digits{ctx.d_digits.ptr, (uint32_t)p.stride};
    vec2d_t<uint2> temps{ctx.d_temps.ptr, (uint32_t)p.stride};
    const uint32_t nbits = (uint32_t)fr_t::bit_length();
    const uint32_t top = nbits - p.wbits * (p.nwins - 1);
    // sppark: a grid of the largest power of two not above a third of the SMs for the digits
    uint32_t grid = ctx.sms / 3;
    while (grid & (grid - 1))
        grid -= (grid & (0 - grid));
    grid = std::max(grid, 1u);
    const size_t sort_shared = sizeof(uint32_t) << DIGIT_BITS;
    const int nparts = (int)ctx.lay.parts;

    for (size_t c = 0; c < p.batch; c++) {
        size_t off = c * p.stride;
        if (off >= p.n)
            break;
        size_t num = std::min(p.stride, p.n - off);
        breakdown<<<2 * grid, 1024, sizeof(fr_t) * 1024, s>>>(digits, d_sc + off, num,
                                                             p.nwins, p.wbits, true);
        sp_check_launch();
        uint32_t win;
        for (win = 0; win < p.nwins - 1; win += 2)
            s.launch_coop(splitprover_msm_sort, dim3(grid, 2), dim3(SORT_BLOCKDIM), sort_shared,
                          digits, num, win, temps, hist, p.wbits - 1, p.wbits - 1,
                          win == p.nwins - 2 ? top - 1 : p.wbits - 1);
        if (win < p.nwins)
            s.launch_coop(splitprover_msm_sort, dim3(grid, 1), dim3(SORT_BLOCKDIM), sort_shared,
                          digits, num, win, temps, hist, p.wbits - 1, top - 1, 0u);

        int slot;
        const affine_h* pts = (const affine_h*)sp_fetch(ctx, src, off, num, s, slot);
        batch_addition<B><<<ctx.sms, BATCH_ADD_BLOCK_SIZE, 0, s>>>(d_part, pts, num,
                                                                   digits[0], hist[0][0]);
        sp_check_launch();
        s.launch_coop(accumulate<B, affine_h>, dim3(coop_blocks ? coop_blocks : ctx.sms),
                      sp_acc_block<B>(ctx), (size_t)0,
                      buckets, p.nwins, p.wbits, const_cast<affine_h*>(pts), digits, hist,
                      ctx.sid);
        sp_consumed(ctx, slot, s);
        integrate<B><<<p.nwins, MSM_NTHREADS, sizeof(B) * MSM_NTHREADS / B::degree, s>>>(
            buckets, p.nwins, p.wbits, nbits);
        sp_check_launch();
        size_t items = ((size_t)p.nwins * 2 * SP_NT(B) + nparts) * B::degree;
        sp_fold<B><<<sp_blocks(ctx, items, 4), 256, 0, s>>>(job.acc_w.ptr, buckets, row_sz,
            p.nwins, job.acc_ones.ptr, d_part, (uint32_t)nparts, fresh && c == 0);
        sp_check_launch();
    }
}

// One query's MSM: a plain Pippenger when tail == SP_PLAIN, otherwise the batch addition of the
// points whose scalar is one (query q's bitmap) and a Pippenger over the big scalars' points,
// gathered into `tail_pts` (the tail scalars are gathered too unless `scalars_ready`: B_G2 reuses
// B_G1's). The tail MSM runs over `tail` (at least the big count) scalars, the gathered ones
// and zeros, so that its plan and launches depend on `tail` only and not on the count itself.
// A streamed query's points past its resident prefix come in chunks of `stage` points (whole
// tiles of the split's bitmaps): the batch addition accumulates chunk by chunk, and each
// chunk's big points are gathered into their places in the tail.
template<class B, class A>
static sp_job_rec sp_msm_query(GpuContext& ctx, sp_job_buf<B>& job, typename B::mem_t* d_part,
                               const sp_src<A>& src, size_t stage, const fr_t* d_sc, size_t n,
                               int q, size_t tail, A* tail_pts, bool scalars_ready, stream_t& s)
{
    typedef typename A::mem_t affine_h;
    sp_job_rec rec;
    if (!n)
        return rec;
    if (tail == SP_PLAIN) {
        sp_msm_plan p = sp_plan(n);
        if (n > src.resident)
            p = sp_plan(n, 0, (uint32_t)std::max(p.batch, (n + stage - 1) / stage));
        sp_pippenger(ctx, job, d_part, src, d_sc, p, s);
        rec.nwins = p.nwins;
        rec.wbits = p.wbits;
        rec.pippenger = true;
        return rec;
    }
    if (tail && (tail > ctx.d_tail_sc.len || tail > n / 2 + 1))
        throw cuda_error{cudaErrorInvalidValue,
                         std::string("a tail MSM exceeds the scratch sized for it")};
    const sp_split_buf& sb = ctx.split[q];
    size_t nwords = sp_words(n);
    if (tail && !scalars_ready) {
        sp_gather_launch(ctx, ctx.d_tail_sc.ptr, d_sc, sb.big.ptr, nwords, sb.offsets.ptr,
                         sb.tiles.ptr, s);
        // the big count is the scan's total, after the tile sums
        sp_zero_past<<<sp_blocks(ctx, tail / 8 + 1, 4), 256, 0, s>>>(
            ctx.d_tail_sc.ptr, sb.tiles.ptr + sp_tiles(nwords), tail);
        sp_check_launch();
    }
    // the resident prefix in one piece, then the streamed chunks
    for (size_t off = 0; off < n;) {
        // (a partly resident query's prefix is whole chunks: `sp_layout_of`)
        size_t num = off == 0 && src.resident ? std::min(n, src.resident)
                                              : std::min(stage, n - off);
        int slot;
        const affine_h* pts = (const affine_h*)sp_fetch(ctx, src, off, num, s, slot);
        s.launch_coop(batch_addition<B>, dim3(ctx.sms), dim3(BATCH_ADD_BLOCK_SIZE),
                      (size_t)0, job.split.ptr, pts, (uint32_t)num,
                      (const uint32_t*)sb.ones.ptr + off / 32, off != 0, ctx.sid);
        if (tail) {
            size_t w0 = off / 64;
            sp_gather_launch(ctx, (affine_h*)tail_pts, pts, sb.big.ptr + w0, sp_words(num),
                             sb.offsets.ptr + w0, sb.tiles.ptr + w0 / SP_TILE, s);
        }
        sp_consumed(ctx, slot, s);
        off += num;
    }
    rec.split = true;
    if (tail) {
        sp_msm_plan p = sp_plan(tail);
        sp_pippenger(ctx, job, d_part, sp_on_device<A>(tail_pts), ctx.d_tail_sc.ptr, p, s);
        rec.nwins = p.nwins;
        rec.wbits = p.wbits;
        rec.pippenger = true;
    }
    return rec;
}

// A query's MSM in the compact layout when its tail does not fit the tail buffers
// (`SP_PIECES`): its pieces of `lay.piece` points in turn. A piece's ones are added by the
// batch addition (accumulating over the whole query), its big scalars' points gathered into
// `tail_pts` chunk by chunk as they come, then its big scalars gathered too and summed by a
// Pippenger into the job's accumulators; a piece with more big scalars than half its points
// takes a plain Pippenger over it instead. Every Pippenger of the query has one window size,
// so that their window sums add up, and chunks no longer than the largest one's. `bounds[k]`:
// the big count before piece k (`sp_classify_query`), bounds[npieces] the total.
static size_t sp_tail_size(size_t big, size_t cap);

template<class B, class A>
static sp_job_rec sp_msm_pieces(GpuContext& ctx, sp_job_buf<B>& job, typename B::mem_t* d_part,
                                const sp_src<A>& src, size_t stage, const fr_t* d_sc, size_t n,
                                int q, const uint32_t* bounds, A* tail_pts, size_t tail_cap,
                                stream_t& s)
{
    typedef typename A::mem_t affine_h;
    sp_job_rec rec;
    const size_t piece = ctx.lay.piece;
    if (!n || !piece)
        return rec;
    const size_t npieces = (n + piece - 1) / piece;
    const sp_split_buf& sb = ctx.split[q];
    auto len_of = [&](size_t k) { return std::min(piece, n - k * piece); };
    auto big_of = [&](size_t k) { return (size_t)(bounds[k + 1] - bounds[k]); };
    auto plain = [&](size_t k) { return big_of(k) > len_of(k) / 2; };
    auto msm_size = [&](size_t k) {
        return plain(k) ? len_of(k) : sp_tail_size(big_of(k), len_of(k) / 2);
    };
    if (npieces > SP_MAX_PIECES || bounds[0] != 0)
        throw cuda_error{cudaErrorInvalidValue, std::string("a query's pieces are miscounted")};
    size_t most = 1;
    for (size_t k = 0; k < npieces; k++) {
        if (bounds[k + 1] < bounds[k] || big_of(k) > len_of(k))
            throw cuda_error{cudaErrorInvalidValue,
                             std::string("a piece's split count exceeds its points")};
        most = std::max(most, msm_size(k));
    }
    const sp_msm_plan ref = sp_plan(most);
    auto plan_of = [&](size_t m, bool streamed) {
        size_t chunks = (m + ref.stride - 1) / ref.stride;
        if (streamed)
            chunks = std::max(chunks, (m + stage - 1) / stage);
        return sp_plan(m, ref.wbits, (uint32_t)std::max<size_t>(chunks, 1));
    };
    for (size_t k = 0; k < npieces; k++) {
        const size_t p0 = k * piece, len = len_of(k), big = big_of(k);
        // the piece as a source of its own: its part of the resident prefix, its host points
        const size_t res = src.resident > p0 ? src.resident - p0 : 0;
        const sp_src<A> sub{res ? src.dev + p0 : nullptr, src.host ? src.host + p0 : nullptr,
                            res};
        if (plain(k)) {
            sp_pippenger(ctx, job, d_part, sub, d_sc + p0, plan_of(len, len > res), s, 0,
                         !rec.pippenger);
            rec.pippenger = true;
            continue;
        }
        // the resident part in one go, then the streamed chunks (whole tiles, as the prefix)
        for (size_t off = 0; off < len;) {
            size_t num = off < res ? std::min(len, res) - off : std::min(stage, len - off);
            int slot;
            const affine_h* pts = (const affine_h*)sp_fetch(ctx, sub, off, num, s, slot);
            s.launch_coop(batch_addition<B>, dim3(ctx.sms), dim3(BATCH_ADD_BLOCK_SIZE),
                          (size_t)0, job.split.ptr, pts, (uint32_t)num,
                          (const uint32_t*)sb.ones.ptr + (p0 + off) / 32, rec.split, ctx.sid);
            rec.split = true;
            if (big) {
                size_t w0 = (p0 + off) / 64;
                sp_gather_launch(ctx, (affine_h*)tail_pts, pts, sb.big.ptr + w0, sp_words(num),
                                 sb.offsets.ptr + w0, sb.tiles.ptr + w0 / SP_TILE, s,
                                 bounds[k]);
            }
            sp_consumed(ctx, slot, s);
            off += num;
        }
        if (!big)
            continue;
        const size_t t = msm_size(k);
        if (t > tail_cap || t > ctx.d_tail_sc.len)
            throw cuda_error{cudaErrorInvalidValue,
                             std::string("a tail piece exceeds the scratch sized for it")};
        const size_t w0 = p0 / 64;
        sp_gather_launch(ctx, ctx.d_tail_sc.ptr, d_sc + p0, sb.big.ptr + w0, sp_words(len),
                         sb.offsets.ptr + w0, sb.tiles.ptr + w0 / SP_TILE, s, bounds[k]);
        if (t > big)
            CUDA_OK(cudaMemsetAsync(ctx.d_tail_sc.ptr + big, 0, (t - big) * sizeof(fr_t), s));
        sp_pippenger(ctx, job, d_part, sp_on_device<A>(tail_pts), ctx.d_tail_sc.ptr,
                     plan_of(t, false), s, 0, !rec.pippenger);
        rec.pippenger = true;
    }
    if (rec.pippenger) {
        rec.nwins = ref.nwins;
        rec.wbits = ref.wbits;
    }
    return rec;
}

template<class B>
static sp_final_job<B> sp_final_of(GpuContext& ctx, sp_job_buf<B>& job, const sp_job_rec& rec,
                                   typename B::mem_t* out)
{
    sp_final_job<B> f{};
    f.out = out;
    f.acc = job.acc_w.ptr;
    f.nwins = rec.nwins;
    f.wbits = rec.wbits;
    if (rec.pippenger) {
        f.parts[0] = job.acc_ones.ptr;
        f.nparts[0] = (uint32_t)ctx.lay.parts;
    }
    if (rec.split) {
        f.parts[1] = job.split.ptr;
        f.nparts[1] = (uint32_t)ctx.lay.parts;
    }
    return f;
}

static bucket_t::mem_t* sp_result_g1(unsigned char* base, int job)
{
    return (bucket_t::mem_t*)(base + (size_t)job * (SP_NW_MAX + 1) * sizeof(bucket_t));
}
static bucket_fp2_t::mem_t* sp_result_g2(unsigned char* base)
{
    return (bucket_fp2_t::mem_t*)(base + (size_t)SP_G1_JOBS * (SP_NW_MAX + 1) * sizeof(bucket_t));
}
// `sp_side`'s output, at the end of the results.
static sp_dev_sums* sp_dev_out(unsigned char* base, const sp_layout& lay)
{
    return (sp_dev_sums*)(base + lay.results_bytes - sizeof(sp_dev_sums));
}

// A witness-only proof's inputs on the copy stream (issue 31): the inputs, then the packed aux
// staged in the third of `abc` that c takes later, unpacked into the set's aux; the density
// words from the resident matrices; then a = A w, b = B w and c = C w, each vector's event
// recorded as its copy's would be. c's product overwrites the staging only after the unpack
// read it (one stream). Kernels on this stream share the SMs with the previous proof's MSMs.
static void sp_issue_witness(GpuContext& ctx, const sp_assignment& a, sp_set& st,
                             sp_flight& fl)
{
    stream_t& s = *ctx.s_copy;
    const sp_srs& L = ctx.lens;
    const sp_dev_matrices& M = ctx.mat;
    size_t dom = ctx.domain;
    if (L.n_inputs)
        s.HtoD(st.input.ptr, a.input, L.n_inputs);
    // staged in c's place, or b's in the compact layout (b's product is written after the
    // unpack read it: one stream)
    fr_t* stage = st.abc.ptr + (ctx.lay.compact() ? 1 : 2) * dom;
    uint64_t* bits = reinterpret_cast<uint64_t*>(stage + a.non_bits_len);
    if (a.non_bits_len)
        s.HtoD(stage, a.non_bits, a.non_bits_len);
    if (a.bit_words)
        s.HtoD(bits, a.bit_values, a.bit_words);
    if (L.n_l)
        sp_unpack<<<sp_blocks(ctx, L.n_l, 16), 256, 0, s>>>(
            st.aux.ptr, L.n_l, M.is_bit.ptr, M.bits_before.ptr, bits, stage,
            M.coeffs.ptr + SP_ID_ONE);
    CUDA_OK(cudaGetLastError());
    if (M.words.len)
        CUDA_OK(cudaMemcpyAsync(st.words.ptr, M.words.ptr, M.words.bytes(),
                                cudaMemcpyDeviceToDevice, s));
    CUDA_OK(cudaEventRecord(fl.assign, s));
    // the compact layout makes c after a * b (`sp_issue_front_compact`)
    for (int q = 0; q < (ctx.lay.compact() ? 2 : 3); q++) {
        sp_spmv<<<sp_blocks(ctx, M.rows, 8), 256, 0, s>>>(
            st.abc.ptr + q * dom, M.rows, M.row_start[q].ptr, M.terms[q].ptr, M.coeffs.ptr,
            st.input.ptr, L.n_inputs, st.aux.ptr);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaEventRecord(fl.vec[q], s));
    }
}

// The copies of one proof on the copy stream, once its input set's previous reader is done:
// the blinding input of `sp_side` (`blind`, or zeros: the plain sums), the assignment and the
// bitmaps first (the gathers and splits need them, and the host waits for the split counts),
// then a, b and c, each NTT waiting for its own vector.
static void sp_issue_copy(GpuContext& ctx, const sp_assignment& a, const sp_blind* blind,
                          int set, sp_flight& fl)
{
    fl.cpu_issue = fl.cpu_wait = 0;
    sp_cpu_span cpu(fl.cpu_issue);
    stream_t& s = *ctx.s_copy;
    const sp_srs& L = ctx.lens;
    sp_set& st = ctx.sets[set];
    CUDA_OK(cudaStreamWaitEvent(s, ctx.released[set], 0));
    CUDA_OK(cudaEventRecord(fl.ev[EV_COPY0], s));
    if (ctx.device_finish) {
        // the flight's previous proof is finished (its host results were read), so neither
        // copy of its blinding input is still in use
        if (blind)
            *fl.blind = *blind;
        else
            memset((void*)fl.blind, 0, sizeof(sp_blind));
        CUDA_OK(cudaMemcpyAsync(fl.d_blind, fl.blind, sizeof(sp_blind), cudaMemcpyHostToDevice,
                                s));
    }
    size_t w_aux = sp_words(L.n_l), w_inp = sp_words(L.n_inputs);
    if (a.witness) {
        sp_issue_witness(ctx, a, st, fl);
        CUDA_OK(cudaEventRecord(fl.ev[EV_COPY1], s));
        return;
    }
    if (L.n_inputs)
        s.HtoD(st.input.ptr, a.input, L.n_inputs);
    if (L.n_l)
        s.HtoD(st.aux.ptr, a.aux, L.n_l);
    if (w_aux) {
        s.HtoD(st.words.ptr, a.a_aux.words, w_aux);
        s.HtoD(st.words.ptr + w_aux + w_inp, a.b_aux.words, w_aux);
    }
    if (w_inp)
        s.HtoD(st.words.ptr + w_aux, a.b_input.words, w_inp);
    CUDA_OK(cudaEventRecord(fl.assign, s));
    size_t n = a.abc_len, dom = ctx.domain;
    const fr_t* src[3] = {a.a, a.b, a.c};
    // only copies here: the zero padding up to the domain is a kernel (a memset), which would
    // wait for SMs behind the current proof's MSMs; the front half writes it. The compact
    // layout copies c later, into b's place (`sp_issue_front_compact`).
    for (int i = 0; i < (ctx.lay.compact() ? 2 : 3); i++) {
        fr_t* dst = st.abc.ptr + i * dom;
        if (n)
            s.HtoD(dst, src[i], n);
        CUDA_OK(cudaEventRecord(fl.vec[i], s));
    }
    CUDA_OK(cudaEventRecord(fl.ev[EV_COPY1], s));
}

// Where A's (q = 1) and B's (q = 2) gathered scalars are: buffers of their own, or in the
// compact layout the input set's, in b's place and after it.
static fr_t* sp_scalars(GpuContext& ctx, int set, int q)
{
    if (ctx.lay.compact())
        return ctx.sets[set].abc.ptr + (q == 1 ? ctx.lay.sc_a_at : ctx.lay.sc_b_at);
    return q == 1 ? ctx.d_sc_a.ptr : ctx.d_sc_b.ptr;
}

// A's and B's scalars gathered by their densities, then the three splits (their counts queued
// to the host).
static void sp_issue_gathers(GpuContext& ctx, const sp_assignment& a, int set, sp_flight& fl)
{
    stream_t& m = *ctx.s_main;
    const sp_srs& L = ctx.lens;
    sp_set& st = ctx.sets[set];
    // A's scalars: the inputs, then the aux A uses; B's: the inputs and aux B uses
    size_t w_aux = sp_words(L.n_l), w_inp = sp_words(L.n_inputs);
    const uint64_t* d_w_a = st.words.ptr;
    const uint64_t* d_w_bi = d_w_a + w_aux;
    const uint64_t* d_w_ba = d_w_bi + w_inp;
    fr_t* sc_a = sp_scalars(ctx, set, 1);
    fr_t* sc_b = sp_scalars(ctx, set, 2);
    if (L.n_inputs)
        CUDA_OK(cudaMemcpyAsync(sc_a, st.input.ptr, L.n_inputs * sizeof(fr_t),
                                cudaMemcpyDeviceToDevice, m));
    sp_gather_dense(ctx, sc_a + L.n_inputs, st.aux.ptr, d_w_a, w_aux, m);
    sp_gather_dense(ctx, sc_b, st.input.ptr, d_w_bi, w_inp, m);
    sp_gather_dense(ctx, sc_b + a.b_input.popcount, st.aux.ptr, d_w_ba, w_aux, m);
    // the splits of L, A and B: only their counts go to the host
    const fr_t* sc[3] = {st.aux.ptr, sc_a, sc_b};
    const size_t nq[3] = {L.n_l, L.n_a, L.n_b};
    for (int q = 0; q < 3; q++)
        if (nq[q])
            sp_classify_query(ctx, q, sc[q], nq[q], fl.counts, m);
    sp_record_ext(ctx, fl.counted, m);
}

// The front half of a proof in the compact layout (kernel by kernel, never captured): a's and
// b's NTTs, a * b into a's place, then c into b's place (copied from the slot on the copy
// stream, or the matrices' product), its NTTs and the quotient h in a's place; then A's and B's
// scalars gathered into b's place and after it, and the splits. The events keep their stream
// order: EV_GATHER marks the quotient done, EV_NTT the splits (`sp_finish` names them).
static void sp_issue_front_compact(GpuContext& ctx, const sp_assignment& a, int set,
                                   sp_flight& fl)
{
    sp_cpu_span cpu(fl.cpu_issue);
    stream_t& m = *ctx.s_main;
    sp_set& st = ctx.sets[set];
    size_t dom = ctx.domain;
    fr_t* d_a = st.abc.ptr;
    fr_t* d_b = d_a + dom;
    sp_wait_ext(ctx, m, fl.assign);
    sp_record_ext(ctx, fl.ev[EV_START], m);
    sp_wait_ext(ctx, m, fl.vec[0]);
    CUDA_OK(cudaEventRecord(ctx.ev_fork, m));
    CUDA_OK(cudaStreamWaitEvent(*ctx.s_n1, ctx.ev_fork, 0));
    sp_wait_ext(ctx, *ctx.s_n1, fl.vec[1]);
    // the witness path's products have the rows' length; a copied a or b has abc_len
    auto pad = [&](fr_t* v, stream_t& s) {
        if (a.abc_len < dom)
            CUDA_OK(cudaMemsetAsync(v + a.abc_len, 0, (dom - a.abc_len) * sizeof(fr_t), s));
    };
    auto to_coset = [&](fr_t* v, stream_t& s) {
        pad(v, s);
        sp_ntt::NTT_internal(v, ctx.lg_domain, NTT::InputOutputOrder::NR,
                             NTT::Direction::inverse, NTT::Type::standard, s);
        sp_ntt::NTT_internal(v, ctx.lg_domain, NTT::InputOutputOrder::RN,
                             NTT::Direction::forward, NTT::Type::coset, s);
    };
    to_coset(d_a, m);
    to_coset(d_b, *ctx.s_n1);
    sp_fork(ctx.ev_join1, *ctx.s_n1, m);
    sp_mul_assign<<<ctx.sms, 1024, 0, m>>>(d_a, d_b, dom);
    sp_check_launch();
    if (a.witness) {
        const sp_dev_matrices& M = ctx.mat;
        sp_spmv<<<sp_blocks(ctx, M.rows, 8), 256, 0, m>>>(
            d_b, M.rows, M.row_start[2].ptr, M.terms[2].ptr, M.coeffs.ptr, st.input.ptr,
            ctx.lens.n_inputs, st.aux.ptr);
        sp_check_launch();
    } else {
        // c from the slot, on the copy stream once b's place is free
        stream_t& c = *ctx.s_copy;
        CUDA_OK(cudaEventRecord(ctx.ev_fork, m));
        CUDA_OK(cudaStreamWaitEvent(c, ctx.ev_fork, 0));
        if (a.abc_len)
            c.HtoD(d_b, a.c, a.abc_len);
        CUDA_OK(cudaEventRecord(fl.vec[2], c));
        CUDA_OK(cudaStreamWaitEvent(m, fl.vec[2], 0));
    }
    to_coset(d_b, m);
    sp_sub_scale<<<ctx.sms, 1024, 0, m>>>(d_a, d_b, ctx.z_inv, dom);
    sp_check_launch();
    sp_ntt::NTT_internal(d_a, ctx.lg_domain, NTT::InputOutputOrder::NN,
                         NTT::Direction::inverse, NTT::Type::coset, m);
    sp_record_ext(ctx, fl.ev[EV_GATHER], m);
    sp_issue_gathers(ctx, a, set, fl);
    sp_record_ext(ctx, fl.ev[EV_NTT], m);
}

// The front half of a proof: the density gathers and the three splits first (their counts
// queued to the host, which then issues the back half while the NTTs run), then the quotient's
// NTTs, each of a, b, c starting once its own copy has landed.
static void sp_issue_front(GpuContext& ctx, const sp_assignment& a, int set, sp_flight& fl)
{
    sp_cpu_span cpu(fl.cpu_issue);
    stream_t& m = *ctx.s_main;
    sp_set& st = ctx.sets[set];
    size_t dom = ctx.domain;
    sp_wait_ext(ctx, m, fl.assign);
    sp_record_ext(ctx, fl.ev[EV_START], m);
    sp_issue_gathers(ctx, a, set, fl);
    sp_record_ext(ctx, fl.ev[EV_GATHER], m);

    // the quotient's coefficients, in place of a; b and c on their own streams
    fr_t* d_a = st.abc.ptr;
    fr_t* d_b = d_a + dom;
    fr_t* d_c = d_b + dom;
    sp_wait_ext(ctx, m, fl.vec[0]);
    CUDA_OK(cudaEventRecord(ctx.ev_fork, m));
    CUDA_OK(cudaStreamWaitEvent(*ctx.s_n1, ctx.ev_fork, 0));
    CUDA_OK(cudaStreamWaitEvent(*ctx.s_n2, ctx.ev_fork, 0));
    sp_wait_ext(ctx, *ctx.s_n1, fl.vec[1]);
    sp_wait_ext(ctx, *ctx.s_n2, fl.vec[2]);
    stream_t* ss[3] = {&m, ctx.s_n1.get(), ctx.s_n2.get()};
    fr_t* dd[3] = {d_a, d_b, d_c};
    for (int i = 0; i < 3; i++) {
        // a, b, c zero-padded to the domain (the copy wrote the first abc_len)
        if (a.abc_len < dom)
            CUDA_OK(cudaMemsetAsync(dd[i] + a.abc_len, 0, (dom - a.abc_len) * sizeof(fr_t),
                                    *ss[i]));
        sp_ntt::NTT_internal(dd[i], ctx.lg_domain, NTT::InputOutputOrder::NR,
                             NTT::Direction::inverse, NTT::Type::standard, *ss[i]);
        sp_ntt::NTT_internal(dd[i], ctx.lg_domain, NTT::InputOutputOrder::RN,
                             NTT::Direction::forward, NTT::Type::coset, *ss[i]);
    }
    sp_fork(ctx.ev_join1, *ctx.s_n1, m);
    sp_fork(ctx.ev_join2, *ctx.s_n2, m);
    sp_mul_assign<<<ctx.sms, 1024, 0, m>>>(d_a, d_b, dom);
    sp_check_launch();
    sp_sub_scale<<<ctx.sms, 1024, 0, m>>>(d_a, d_c, ctx.z_inv, dom);
    sp_check_launch();
    sp_ntt::NTT_internal(d_a, ctx.lg_domain, NTT::InputOutputOrder::NN,
                         NTT::Direction::inverse, NTT::Type::coset, m);
    sp_record_ext(ctx, fl.ev[EV_NTT], m);
}

// Captures what `issue` queues on the compute stream into `exec`. On failure (why returned,
// nothing queued) graphs are off for the context from now on.
template<class F> static std::string sp_capture(GpuContext& ctx, cudaGraphExec_t& exec,
                                                const char* what, F&& issue)
{
    stream_t& m = *ctx.s_main;
    cudaGraph_t graph = nullptr;
    std::string why;
    CUDA_OK(cudaStreamBeginCapture(m, cudaStreamCaptureModeRelaxed));
    ctx.capturing = true;
    try {
        issue();
    } catch (const cuda_error& e) {
        why = std::string("capturing the ") + what + ": " + e.what();
    }
    ctx.capturing = false;
    cudaError_t rc = cudaStreamEndCapture(m, &graph);
    if (why.empty() && rc != cudaSuccess)
        why = std::string("ending the capture of the ") + what + ": " + cudaGetErrorString(rc);
    if (why.empty()) {
        rc = cudaGraphInstantiate(&exec, graph, 0);
        if (rc != cudaSuccess) {
            exec = nullptr;
            why = std::string("instantiating the ") + what + ": " + cudaGetErrorString(rc);
        }
    }
    if (graph)
        (void)cudaGraphDestroy(graph);
    if (!why.empty()) {
        (void)cudaGetLastError();
        ctx.graphs = false;
        ctx.graph_error = why;
    }
    return why;
}

// The front half of proof `a` on input set `set` with flight `f`: one launch of its captured
// graph (captured now if this set and flight have none for `a`'s key), or kernel by kernel
// when graphs are off. A capture or instantiation that fails turns graphs off for the context
// (why: `graph_error`) and the proof goes on kernel by kernel; nothing was queued by it.
static bool sp_launch_front(GpuContext& ctx, const sp_assignment& a, int set, int f)
{
    sp_flight& fl = ctx.fl[f];
    fl.nwins[SP_JOB_H] = ctx.lay.plan_h.nwins;
    fl.wbits[SP_JOB_H] = ctx.lay.plan_h.wbits;
    if (ctx.lay.compact()) {
        sp_issue_front_compact(ctx, a, set, fl);
        return false;
    }
    if (!ctx.graphs) {
        sp_issue_front(ctx, a, set, fl);
        return false;
    }
    stream_t& m = *ctx.s_main;
    GpuContext::front_graph& g = ctx.front[set][f];
    std::pair<size_t, size_t> key{a.b_input.popcount, a.abc_len};
    if (!g.exec || g.key != key) {
        if (g.exec) {
            (void)cudaGraphExecDestroy(g.exec);
            g.exec = nullptr;
        }
        if (!sp_capture(ctx, g.exec, "front half", [&] { sp_issue_front(ctx, a, set, fl); })
                 .empty()) {
            sp_issue_front(ctx, a, set, fl);
            return false;
        }
        g.key = key;
    }
    sp_cpu_span cpu(fl.cpu_issue);
    CUDA_OK(cudaGraphLaunch(g.exec, m));
    return true;
}

// The diagnostic: one window sum from integrate's 2 * NT partial sums of a row (summed over the
// chunks on the device), on the host, with sppark's own loop (`msm_t::integrate_row`).
template<class B, class P>
static P sp_host_window(const B* row, uint32_t lsbits)
{
    const uint32_t NT = SP_NT(B);
    const uint32_t nthrbits = (uint32_t)sp_lg2(NT);
    size_t i = NT - 1;
    if (lsbits - 1 <= nthrbits) {
        size_t mask = (1U << (nthrbits - (lsbits - 1))) - 1;
        B res, acc = row[2 * i + 1];
        if (mask)
            res.inf();
        else
            res = acc;
        while (i--) {
            acc.add(row[2 * i + 1]);
            if ((i & mask) == 0)
                res.add(acc);
        }
        return P(res);
    }
    P res = P(row[2 * i]);
    B acc = row[2 * i + 1];
    while (i--) {
        P raise = P(acc);
        for (size_t j = 0; j < lsbits - 1 - nthrbits; j++)
            raise.dbl();
        res.add(raise);
        res.add(P(row[2 * i]));
        if (i)
            acc.add(row[2 * i + 1]);
    }
    return res;
}

// The diagnostic: one MSM's sum from its device accumulators (waited for), reduced on the host
// as sppark's `collect` reduces (the windows by `sp_host_window`, Horner, the partial sums one by
// one), instead of by `sp_final`: the same buckets, the other reduction.
template<class B, class P>
static void sp_host_sum(GpuContext& ctx, P& out, const sp_job_buf<B>& job, const sp_job_rec& rec)
{
    const size_t per_row = 2 * SP_NT(B), nparts = ctx.lay.parts;
    const uint32_t nbits = (uint32_t)fr_t::bit_length();
    std::vector<B> acc_w(std::max<size_t>(1, rec.nwins * per_row)), ones(nparts), split(nparts);
    stream_t& m = *ctx.s_main;
    if (rec.pippenger) {
        CUDA_OK(cudaMemcpyAsync(acc_w.data(), job.acc_w.ptr, rec.nwins * per_row * sizeof(B),
                                cudaMemcpyDeviceToHost, m));
        CUDA_OK(cudaMemcpyAsync(ones.data(), job.acc_ones.ptr, nparts * sizeof(B),
                                cudaMemcpyDeviceToHost, m));
    }
    if (rec.split)
        CUDA_OK(cudaMemcpyAsync(split.data(), job.split.ptr, nparts * sizeof(B),
                                cudaMemcpyDeviceToHost, m));
    CUDA_OK(cudaStreamSynchronize(m));
    out.inf();
    for (uint32_t y = rec.nwins; y-- > 0;) {
        if (y != rec.nwins - 1)
            for (uint32_t i = 0; i < rec.wbits; i++)
                out.dbl();
        uint32_t lsbits = y == rec.nwins - 1 ? nbits - y * rec.wbits : rec.wbits;
        out.add(sp_host_window<B, P>(&acc_w[y * per_row], lsbits));
    }
    B one;
    one.inf();
    for (size_t k = 0; k < nparts; k++) {
        if (rec.pippenger)
            one.add(ones[k]);
        if (rec.split)
            one.add(split[k]);
    }
    out.add(P(one));
}

// The size a tail MSM over `big` scalars (at most `cap`) runs at: `big` rounded up to a
// sixteenth of its power of two (at most 6.25 % more scalars, all zero), so that proofs of one
// circuit share a few shapes and their back halves replay a captured graph.
static size_t sp_tail_size(size_t big, size_t cap)
{
    if (!big)
        return 0;
    size_t step = std::max<size_t>(((size_t)1 << sp_lg2(big)) / 16, 1);
    return std::min((big + step - 1) / step * step, cap);
}

// The back half's launches for shape `key`: the L, A, B_G1 and B_G2 MSMs, then the H MSM on the
// compute stream while the side stream reduces the other four (their final sums, and with
// `device_finish` the window chains and the blinding of `sp_side`); H's final sums, the input
// set released, everything copied to the flight's host results. Fills rec[L..B2].
static void sp_issue_back_kernels(GpuContext& ctx, int set, sp_flight& fl,
                                  const sp_back_key& key, sp_job_rec* rec)
{
    stream_t& m = *ctx.s_main;
    cudaStream_t side = ctx.s_side;
    const sp_srs& L = ctx.lens;
    sp_set& st = ctx.sets[set];
    const sp_layout& lay = ctx.lay;
    ctx.stream_mark = lay.streams() ? &fl.stream0 : nullptr;
    const size_t c1 = lay.stage_g1, c2 = lay.stage_g2;   // chunk points
    const fr_t* sc_a = sp_scalars(ctx, set, 1);
    const fr_t* sc_b = sp_scalars(ctx, set, 2);
    // query q's MSM: in pieces (compact layout, `bounds` from the flight's counts) or whole
    auto msm = [&](auto& job, auto* d_part, const auto& src, size_t chunk, const fr_t* sc,
                   size_t n, int q, auto* tail_pts, size_t tail_cap, bool scalars_ready) {
        if (key.tail[q] == SP_PIECES)
            return sp_msm_pieces(ctx, job, d_part, src, chunk, sc, n, q,
                                 fl.counts + SP_BOUNDS + q * (SP_MAX_PIECES + 1), tail_pts,
                                 tail_cap, m);
        return sp_msm_query(ctx, job, d_part, src, chunk, sc, n, q, key.tail[q], tail_pts,
                            scalars_ready, m);
    };
    rec[SP_JOB_L] = msm(ctx.job_g1[SP_JOB_L], ctx.d_part_g1.ptr, sp_src_g1(ctx, SP_Q_L), c1,
                        st.aux.ptr, L.n_l, 0, ctx.d_tail_g1.ptr, ctx.d_tail_g1.len, false);
    sp_record_ext(ctx, fl.ev[EV_L], m);
    rec[SP_JOB_A] = msm(ctx.job_g1[SP_JOB_A], ctx.d_part_g1.ptr, sp_src_g1(ctx, SP_Q_A), c1,
                        sc_a, L.n_a, 1, ctx.d_tail_g1.ptr, ctx.d_tail_g1.len, false);
    sp_record_ext(ctx, fl.ev[EV_A], m);
    rec[SP_JOB_B1] = msm(ctx.job_g1[SP_JOB_B1], ctx.d_part_g1.ptr, sp_src_g1(ctx, SP_Q_B1), c1,
                         sc_b, L.n_b, 2, ctx.d_tail_g1.ptr, ctx.d_tail_g1.len, false);
    sp_record_ext(ctx, fl.ev[EV_B1], m);
    // the same split serves G2 (the tail scalars gathered for B_G1 are still in place, unless
    // taken in pieces: each piece gathers its own)
    rec[SP_JOB_B2] = msm(ctx.job_g2, ctx.d_part_g2.ptr,
                         sp_src<affine_fp2_t>{ctx.d_b_g2.ptr, L.b_g2, lay.res[SP_Q_B2]}, c2,
                         sc_b, L.n_b, 2, ctx.d_tail_g2.ptr, ctx.d_tail_g2.len, true);
    sp_record_ext(ctx, fl.ev[EV_B2], m);

    // The side stream: the four MSMs' final sums (each job's accumulators and result area are
    // its own, which the H MSM does not touch), then `sp_side`.
    CUDA_OK(cudaEventRecord(ctx.ev_side_fork, m));
    CUDA_OK(cudaStreamWaitEvent(side, ctx.ev_side_fork, 0));
    sp_record_ext(ctx, fl.ev[EV_SIDE0], side);
    const uint32_t nbits = (uint32_t)fr_t::bit_length();
    sp_final_batch<bucket_t> g1{};
    g1.nbits = nbits;
    uint32_t blocks = 0;
    for (int j = SP_JOB_L; j < SP_G1_JOBS; j++) {
        g1.job[g1.njobs++] = sp_final_of(ctx, ctx.job_g1[j], rec[j],
                                         sp_result_g1(ctx.d_results.ptr, j));
        blocks += rec[j].nwins + 1;
    }
    sp_final<bucket_t><<<blocks, MSM_NTHREADS, 0, side>>>(g1);
    sp_check_launch();
    sp_final_batch<bucket_fp2_t> g2{};
    g2.nbits = nbits;
    g2.job[0] = sp_final_of(ctx, ctx.job_g2, rec[SP_JOB_B2], sp_result_g2(ctx.d_results.ptr));
    g2.njobs = 1;
    sp_final<bucket_fp2_t><<<rec[SP_JOB_B2].nwins + 1, MSM_NTHREADS, 0, side>>>(g2);
    sp_check_launch();
    if (ctx.device_finish) {
        sp_side_args args{};
        for (int q = 0; q < 3; q++) {
            args.w[q] = sp_result_g1(ctx.d_results.ptr, SP_JOB_L + q);
            args.nwins[q] = rec[SP_JOB_L + q].nwins;
            args.wbits[q] = rec[SP_JOB_L + q].wbits;
        }
        args.w2 = sp_result_g2(ctx.d_results.ptr);
        args.nwins[3] = rec[SP_JOB_B2].nwins;
        args.wbits[3] = rec[SP_JOB_B2].wbits;
        args.blind = fl.d_blind;
        args.out = sp_dev_out(ctx.d_results.ptr, ctx.lay);
        sp_side<<<1, 4 * WARP_SZ, 0, side>>>(args);
        sp_check_launch();
    }
    sp_record_ext(ctx, fl.ev[EV_SIDE1], side);

    // H: the first domain - 1 coefficients (the last is zero for a valid witness)
    sp_pippenger(ctx, ctx.job_g1[SP_JOB_H], ctx.d_part_g1.ptr, sp_src_g1(ctx, SP_Q_H),
                 st.abc.ptr, ctx.lay.plan_h, m, ctx.device_finish ? std::max(ctx.sms - 1, 1) : 0);
    if (lay.streams()) {
        if (ctx.stream_mark) {   // nothing was copied after all (every chunk resident)
            CUDA_OK(cudaEventRecord(fl.stream0, *ctx.s_stream));
            ctx.stream_mark = nullptr;
        }
        CUDA_OK(cudaEventRecord(fl.stream1, *ctx.s_stream));
    }
    sp_record_ext(ctx, fl.ev[EV_H], m);
    sp_record_ext(ctx, ctx.released[set], m);
    sp_final_batch<bucket_t> gh{};
    gh.nbits = nbits;
    gh.job[0] = sp_final_of(ctx, ctx.job_g1[SP_JOB_H], rec[SP_JOB_H],
                            sp_result_g1(ctx.d_results.ptr, SP_JOB_H));
    gh.njobs = 1;
    sp_final<bucket_t><<<rec[SP_JOB_H].nwins + 1, MSM_NTHREADS, 0, m>>>(gh);
    sp_check_launch();
    CUDA_OK(cudaEventRecord(ctx.ev_side_join, side));
    CUDA_OK(cudaStreamWaitEvent(m, ctx.ev_side_join, 0));
    CUDA_OK(cudaMemcpyAsync(fl.results, ctx.d_results.ptr, ctx.lay.results_bytes,
                            cudaMemcpyDeviceToHost, m));
    sp_record_ext(ctx, fl.ev[EV_DONE], m);
}

// The back half of shape `key` on input set `set` with flight `f` as one graph launch: replayed
// when captured before, captured now when the shape came before (a shape seen once costs no
// capture). False: nothing queued, the caller launches kernel by kernel.
static bool sp_launch_back(GpuContext& ctx, int set, int f, const sp_back_key& key,
                           sp_job_rec* rec)
{
    auto& row = ctx.back[set][f];
    GpuContext::back_graph* g = nullptr;
    for (auto& c : row)
        if (c.exec && c.key == key)
            g = &c;
    if (!g) {
        bool seen = false;
        for (const auto& k : ctx.recent)
            seen |= k == key;
        if (!seen) {
            ctx.recent[ctx.recent_next++ % 8] = key;
            return false;
        }
        g = &row[0];
        for (auto& c : row)
            if (!c.exec || c.used < g->used)
                g = &c;
        if (g->exec) {
            (void)cudaGraphExecDestroy(g->exec);
            g->exec = nullptr;
        }
        // rec[H] (the front half's plan) is an input of the final sums, and the same always
        sp_flight& fl = ctx.fl[f];
        if (!sp_capture(ctx, g->exec, "back half",
                        [&] { sp_issue_back_kernels(ctx, set, fl, key, rec); }).empty())
            return false;
        g->key = key;
        for (int j = 0; j < SP_JOBS; j++)
            g->rec[j] = rec[j];
    } else {
        for (int j = SP_JOB_L; j < SP_JOBS; j++)
            rec[j] = g->rec[j];
    }
    g->used = ++ctx.back_clock;
    CUDA_OK(cudaGraphLaunch(g->exec, *ctx.s_main));
    return true;
}

// The rest of a proof, once the split counts are on the host: its shape from the counts, then
// the back half (one graph launch where it can, kernel by kernel otherwise).
static bool sp_issue_back(GpuContext& ctx, int set, int f, bool host_sums)
{
    sp_flight& fl = ctx.fl[f];
    const sp_srs& L = ctx.lens;
    {
        sp_cpu_span wait(fl.cpu_wait);
        CUDA_OK(cudaEventSynchronize(fl.counted));
    }
    sp_cpu_span cpu(fl.cpu_issue);
    const size_t nq[3] = {L.n_l, L.n_a, L.n_b};
    sp_back_key key;
    for (int q = 0; q < 3; q++) {
        size_t big = nq[q] ? fl.counts[q] : 0;
        if (big > nq[q])
            throw cuda_error{cudaErrorInvalidValue, std::string("a split count exceeds its query")};
        // a query with more big scalars than half gets a plain MSM
        key.tail[q] = big > nq[q] / 2 ? SP_PLAIN : sp_tail_size(big, nq[q] / 2);
        // the compact layout's tail buffers hold a piece's: a larger tail goes in pieces, the
        // query's total closing its pieces' bounds
        size_t cap = std::min(ctx.d_tail_sc.len,
                              q == 2 ? std::min(ctx.d_tail_g1.len, ctx.d_tail_g2.len)
                                     : ctx.d_tail_g1.len);
        if (ctx.lay.compact() && key.tail[q] != SP_PLAIN && key.tail[q] > cap) {
            key.tail[q] = SP_PIECES;
            size_t npieces = (nq[q] + ctx.lay.piece - 1) / ctx.lay.piece;
            fl.counts[SP_BOUNDS + q * (SP_MAX_PIECES + 1) + npieces] = (uint32_t)big;
        }
    }
    sp_job_rec rec[SP_JOBS];
    rec[SP_JOB_H].nwins = fl.nwins[SP_JOB_H];
    rec[SP_JOB_H].wbits = fl.wbits[SP_JOB_H];
    rec[SP_JOB_H].pippenger = true;
    // the diagnostic reads the accumulators after each proof: kernel by kernel
    // a back half that streams SRS chunks (copies on another stream from host memory) is
    // launched kernel by kernel: at the sizes that stream, launches are a small cost
    bool graph = ctx.graphs && !ctx.lay.streams() && !host_sums
                 && sp_launch_back(ctx, set, f, key, rec);
    if (!graph)
        sp_issue_back_kernels(ctx, set, fl, key, rec);
    for (int j = 0; j < SP_JOBS; j++) {
        fl.nwins[j] = rec[j].nwins;
        fl.wbits[j] = rec[j].wbits;
    }
    if (host_sums) {
        // the diagnostic waits here, before the next proof's MSMs overwrite the accumulators
        point_t* g1[SP_G1_JOBS] = {&fl.host_sums.h, &fl.host_sums.l, &fl.host_sums.a,
                                   &fl.host_sums.b_g1};
        for (int j = 0; j < SP_G1_JOBS; j++)
            sp_host_sum(ctx, *g1[j], ctx.job_g1[j], rec[j]);
        sp_host_sum(ctx, fl.host_sums.b_g2, ctx.job_g2, rec[SP_JOB_B2]);
    }
    return graph;
}

// One MSM's window sums as the device wrote them (host buckets): `nwins` windows of `wbits`
// bits, then the ones.
template<class B> struct sp_windows {
    const B* r;
    uint32_t nwins, wbits;
};

// out = the sum of the MSMs in m[0..k) from their window sums, in one chain of doublings: going
// down the bit positions, each MSM's window is added at its own position (window y of a w-bit
// plan at bit y * w), so the doublings are those of the longest plan alone (Horner for k = 1;
// h + l, which a proof only uses summed, for k = 2).
template<class B, class P>
static void sp_horner(P& out, const sp_windows<B>* m, int k)
{
    out.inf();
    uint32_t top = 0;
    bool any = false;
    for (int j = 0; j < k; j++)
        if (m[j].nwins) {
            top = std::max(top, (m[j].nwins - 1) * m[j].wbits);
            any = true;
        }
    if (any)
        for (uint32_t bit = top + 1; bit-- > 0;) {
            if (bit != top)
                out.dbl();
            for (int j = 0; j < k; j++)
                if (m[j].nwins && bit % m[j].wbits == 0 && bit / m[j].wbits < m[j].nwins)
                    out.add(P(m[j].r[bit / m[j].wbits]));
        }
    for (int j = 0; j < k; j++)
        out.add(P(m[j].r[m[j].nwins]));
}

static double sp_elapsed(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, from, to));
    return ms;
}

// A point of `sp_side`'s output as a Jacobian one (Z = 1; the identity, all zero, gets Z = 0).
template<class P, class F> static P sp_jacobian(const sp_aff_mem<F>& a)
{
    Affine_t<F> p(a.X, a.Y);
    P j;
    j = p;
    return j;
}

// Waits for a flight's results and turns them into the five sums and the phase times. Finished
// on the host: every window chain here, and with `merge_hl` out.h is h + l and out.l the
// identity (one chain of doublings less). Finished on the device: H's chain here, the rest read
// from `sp_side`'s output. `last`: the proof's `done` was recorded (a blocking wait); otherwise
// it is finished already.
static void sp_finish(const GpuContext& ctx, sp_flight& fl, sp_components& out, sp_phases& ph,
                      bool merge_hl, bool last)
{
    {
        sp_cpu_span wait(fl.cpu_wait);
        CUDA_OK(cudaEventSynchronize(last ? fl.done : fl.ev[EV_DONE]));
    }
    double cpu0 = sp_cpu_ms();
    auto t0 = std::chrono::steady_clock::now();
    const bucket_t* r1 = (const bucket_t*)fl.results;
    point_t* g1[SP_G1_JOBS] = {&out.h, &out.l, &out.a, &out.b_g1};
    sp_windows<bucket_t> w1[SP_G1_JOBS];
    for (int j = 0; j < SP_G1_JOBS; j++)
        w1[j] = {r1 + (size_t)j * (SP_NW_MAX + 1), fl.nwins[j], fl.wbits[j]};
    if (ctx.device_finish) {
        sp_horner(out.h, &w1[SP_JOB_H], 1);
        out.dev = *sp_dev_out(fl.results, ctx.lay);
        out.l = sp_jacobian<point_t>(out.dev.l);
        out.a = sp_jacobian<point_t>(out.dev.a);
        out.b_g1 = sp_jacobian<point_t>(out.dev.b1);
        out.b_g2 = sp_jacobian<point_fp2_t>(out.dev.b2);
        out.finished = 1;
    } else {
        int j0 = 0;
        if (merge_hl) {
            sp_horner(out.h, &w1[SP_JOB_H], 2);   // H and L are adjacent jobs
            out.l.inf();
            j0 = SP_JOB_L + 1;
        }
        for (int j = j0; j < SP_G1_JOBS; j++)
            sp_horner(*g1[j], &w1[j], 1);
        const sp_windows<bucket_fp2_t> w2{
            (const bucket_fp2_t*)(fl.results
                                  + (size_t)SP_G1_JOBS * (SP_NW_MAX + 1) * sizeof(bucket_t)),
            fl.nwins[SP_JOB_B2], fl.wbits[SP_JOB_B2]};
        sp_horner(out.b_g2, &w2, 1);
        memset((void*)&out.dev, 0, sizeof(out.dev));
        out.finished = 0;
    }
    out.pad = 0;
    ph.host_sums = std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - t0).count();
    const cudaEvent_t* e = fl.ev;
    ph.copy_in = sp_elapsed(e[EV_COPY0], e[EV_COPY1]);
    ph.gather = sp_elapsed(e[EV_START], e[EV_GATHER]);
    ph.ntt = sp_elapsed(e[EV_GATHER], e[EV_NTT]);
    if (ctx.lay.compact())   // the quotient first, then the gathers and splits
        std::swap(ph.gather, ph.ntt);
    ph.msm_l = sp_elapsed(e[EV_NTT], e[EV_L]);
    ph.msm_a = sp_elapsed(e[EV_L], e[EV_A]);
    ph.msm_b_g1 = sp_elapsed(e[EV_A], e[EV_B1]);
    ph.msm_b_g2 = sp_elapsed(e[EV_B1], e[EV_B2]);
    ph.msm_h = sp_elapsed(e[EV_B2], e[EV_H]);
    ph.final_sums = sp_elapsed(e[EV_H], e[EV_DONE]);
    ph.side = sp_elapsed(e[EV_SIDE0], e[EV_SIDE1]);
    ph.compute = sp_elapsed(e[EV_START], e[EV_DONE]);
    ph.stream = ctx.lay.streams() ? sp_elapsed(fl.stream0, fl.stream1) : 0;
    ph.span = sp_elapsed(e[EV_COPY0], e[EV_DONE]);
    ph.cpu_issue = fl.cpu_issue;
    ph.cpu_wait = fl.cpu_wait;
    ph.cpu_finish = sp_cpu_ms() - cpu0;
}

static bool sp_matches(const GpuContext& ctx, const sp_assignment& a)
{
    const sp_srs& L = ctx.lens;
    if (a.witness) {
        // the packed aux must be the layout's, and it is staged in c's third of `abc`
        const sp_dev_matrices& M = ctx.mat;
        size_t stage = a.non_bits_len * sizeof(fr_t) + a.bit_words * sizeof(uint64_t);
        return M.ready && a.input_len == L.n_inputs && a.abc_len == M.rows
            && a.non_bits_len + M.n_bits == L.n_l && a.bit_words == (M.n_bits + 63) / 64
            && stage <= ctx.domain * sizeof(fr_t)
            && a.a_aux.popcount == M.popcount[0] && a.b_input.popcount == M.popcount[1]
            && a.b_aux.popcount == M.popcount[2];
    }
    return a.abc_len <= ctx.domain && a.aux_len == L.n_l && a.input_len == L.n_inputs
        && a.a_aux.bit_len == L.n_l && a.b_aux.bit_len == L.n_l
        && a.b_input.bit_len == L.n_inputs
        && L.n_inputs + a.a_aux.popcount == L.n_a
        && a.b_input.popcount + a.b_aux.popcount == L.n_b;
}

// Proves n circuits in order (`host_sums`, when not null, also gets every proof's five sums
// reduced on the host from the same device accumulators: a diagnostic). With two input sets,
// proof i+1's copies run on the copy stream while proof i computes; each proof's window
// combination and blinding run on the host while the device computes the next. The host order
// below is what makes that safe with plain events, and waits on the device once per proof:
//   copy(0); for i: front(i); back(i); finish(i-1); copy(i+1)
//   - back(i) waits for proof i's split counts, recorded on the compute stream after all of
//     back(i-1): finish(i-1) then finds proof i-1 done and does not block;
//   - copy(i+1) writes input set (i+1) % nsets after waiting for `released` of that set, whose
//     last record (back(i-1) with two sets, back(i) with one) is already queued;
//   - front(i) waits for copy(i)'s last event, recorded before;
//   - flight (i % 2)'s events, host results and blinding input are re-recorded by copy(i+2),
//     front(i+2) and back(i+2), all queued after finish(i) read them (proof i done: its side
//     stream joined the compute stream before `done`).
// `blind` (null: the plain sums) holds each proof's blinding input when the device finishes
// (`sp_upload::device_finish`); it is not read otherwise.
extern "C"
RustError::by_value splitprover_gpu_prove_batch(GpuContext* ctx, const sp_assignment* asgs,
                                                size_t n, const sp_blind* blind,
                                                sp_components* out, sp_phases* ph,
                                                sp_batch_times* times, sp_on_proof on_proof,
                                                void* user, sp_components* host_sums)
{
    std::lock_guard<std::mutex> guard(ctx->mtx);
    // The Rust side checks all of this; checked again so that no call reads out of bounds.
    for (size_t i = 0; i < n; i++)
        if (!sp_matches(*ctx, asgs[i]))
            return RustError{cudaErrorInvalidValue, "the assignment does not match the SRS"};
    if (!n)
        return RustError{cudaSuccess};

    try {
        ctx->gpu.select();
        const int nsets = ctx->nsets;
        // a proof blinded by the callback uses h and l only summed
        const bool merge_hl = on_proof != nullptr && host_sums == nullptr;
        times->input_sets = nsets;
        times->front_graphs = 0;
        times->back_graphs = 0;
        times->graph_error[0] = 0;
        CUDA_OK(cudaEventRecord(ctx->ev_batch, *ctx->s_copy));
        sp_issue_copy(*ctx, asgs[0], blind, 0, ctx->fl[0]);
        for (size_t i = 0; i < n; i++) {
            int set = (int)(i % nsets);
            if (sp_launch_front(*ctx, asgs[i], set, (int)(i % 2)))
                times->front_graphs++;
            if (sp_issue_back(*ctx, set, (int)(i % 2), host_sums != nullptr))
                times->back_graphs++;
            if (i + 1 == n)
                CUDA_OK(cudaEventRecord(ctx->fl[i % 2].done, *ctx->s_main));
            if (i > 0) {
                sp_finish(*ctx, ctx->fl[(i - 1) % 2], out[i - 1], ph[i - 1], merge_hl, false);
                if (host_sums)
                    host_sums[i - 1] = ctx->fl[(i - 1) % 2].host_sums;
                if (on_proof)
                    on_proof(user, i - 1, &out[i - 1]);
            }
            if (i + 1 < n)
                sp_issue_copy(*ctx, asgs[i + 1], blind ? blind + i + 1 : nullptr,
                              (int)((i + 1) % nsets), ctx->fl[(i + 1) % 2]);
        }
        sp_flight& last = ctx->fl[(n - 1) % 2];
        sp_finish(*ctx, last, out[n - 1], ph[n - 1], merge_hl, true);
        if (host_sums)
            host_sums[n - 1] = last.host_sums;
        if (on_proof)
            on_proof(user, n - 1, &out[n - 1]);
        times->gpu = sp_elapsed(ctx->ev_batch, last.ev[EV_DONE]);
        snprintf(times->graph_error, sizeof(times->graph_error), "%s", ctx->graph_error.c_str());
    } catch (const cuda_error& e) {
        for (auto* s : {ctx->s_main.get(), ctx->s_n1.get(), ctx->s_n2.get(), ctx->s_copy.get(),
                        ctx->s_stream.get()})
            if (s) (void)cudaStreamSynchronize(*s);
        (void)cudaStreamSynchronize(ctx->s_side);
        ctx->stream_mark = nullptr;
        (void)cudaGetLastError();
        return sp_error(e, "proving on the GPU");
    }
    return RustError{cudaSuccess};
}

// ---------------------------------------------------------------------------------------------
// Host-only checks of the sizing and of the window weights (no GPU needed: kernels/tests/gpu.rs)

extern "C" void splitprover_gpu_msm_plan(size_t n, uint32_t wbits, uint32_t chunks,
                                         sp_msm_plan* out)
{
    *out = sp_plan(n, wbits, chunks);
}

extern "C" size_t splitprover_gpu_tail_size(size_t big, size_t cap)
{
    return sp_tail_size(big, cap);
}

extern "C" void splitprover_gpu_msm_cover(size_t n, sp_msm_plan* out)
{
    *out = sp_cover(n);
}

// What `splitprover_gpu_create` would allocate for an SRS of these lengths (its pointers are not
// read) on a device of `sms` multiprocessors: the device-memory planner's figures
// (kernels::backend::plan), in bytes.
struct sp_layout_bytes {
    size_t srs_h, srs_l, srs_a, srs_b_g1, srs_b_g2;   // the SRS queries, resident
    size_t set;                                       // one input set
    size_t once;                                      // scratch allocated once
    size_t h_digits;                                  // the H MSM's digits, part of `once`
    size_t reserve;                                   // left free beside a second input set
    uint32_t wbits_h, chunks_h;                       // the H MSM's plan
    size_t resident[SP_QUERIES];                      // points kept per query
    size_t streamed;                                  // SRS bytes copied for every proof
    size_t stage;                                     // the two staging buffers, in `once`
    size_t piece;                                     // compact: a tail piece's points; else 0
};

extern "C" void splitprover_gpu_layout(const sp_srs* srs, int sms, uint32_t wbits_h,
                                       uint32_t chunks_h, const sp_residency* res,
                                       sp_layout_bytes* out)
{
    sp_layout l = sp_layout_of(*srs, sms, wbits_h, chunks_h, res);
    size_t* bytes[SP_QUERIES] = {&out->srs_h, &out->srs_l, &out->srs_a, &out->srs_b_g1,
                                 &out->srs_b_g2};
    for (int q = 0; q < SP_QUERIES; q++) {
        out->resident[q] = l.res[q];
        *bytes[q] = l.res[q] * sp_layout::point_bytes(q);
    }
    out->streamed = l.streamed_bytes();
    out->stage = 2 * l.stage_bytes;
    out->set = l.set_bytes();
    out->once = l.once_bytes();
    out->h_digits = l.plan_h.digits * sizeof(uint32_t);
    out->reserve = SP_RESERVE;
    out->wbits_h = l.plan_h.wbits;
    out->chunks_h = (uint32_t)l.plan_h.batch;
    out->piece = l.piece;
}

// A witness-only proof's device arithmetic on the host, from the same templates: the aux of a
// packed witness unpacked into `aux` (n_aux), then A w, B w, C w into `abc` (3 rows). For the
// no-GPU tests, against kernels::witness::expand.
extern "C" void splitprover_gpu_witness_check(const sp_matrices* m, const fr_t* input,
                                              const uint64_t* bit_values, const fr_t* non_bits,
                                              fr_t* aux, fr_t* abc)
{
    const fr_t* coeffs = reinterpret_cast<const fr_t*>(m->coeffs);
    const fr_t& one = coeffs[SP_ID_ONE];
    for (size_t i = 0; i < m->n_aux; i++)
        aux[i] = sp_unpack_aux(i, m->is_bit, m->bits_before, bit_values, non_bits, one);
    for (int q = 0; q < 3; q++)
        for (size_t r = 0; r < m->rows; r++)
            abc[q * m->rows + r] = sp_eval_row(m->row_start[q], m->terms[q], r, coeffs, input,
                                               m->n_inputs, aux, one);
}

// sppark's host-side row integration (`msm_t::integrate_row`) over integers modulo 2^64 instead
// of points, against the per-segment weights of `sp_window_term`, for random row sums, every
// window size from 10 to 18 bits with its full and its top window, and both groups' rows
// (256 and 128 segments). Returns the number of mismatches.
extern "C" uint32_t splitprover_gpu_window_check(uint64_t seed)
{
    uint64_t x = seed | 1;
    auto rnd = [&x]() { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x; };
    uint32_t bad = 0;
    const uint32_t nbits = (uint32_t)fr_t::bit_length();
    for (uint32_t nthrbits : {7u, 8u}) {
        const uint32_t NT = 1u << nthrbits;
        std::vector<uint64_t> P(NT), A(NT);
        for (uint32_t wbits = 10; wbits <= 18; wbits++) {
            uint32_t nwins = (nbits - 1) / wbits + 1;
            for (uint32_t lsbits : {wbits, nbits - (nwins - 1) * wbits}) {
                for (auto& v : P) v = rnd();
                for (auto& v : A) v = rnd();
                // the loop, as integrate_row runs it
                uint64_t want;
                size_t i = NT - 1;
                if (lsbits - 1 <= nthrbits) {
                    size_t mask = (1U << (nthrbits - (lsbits - 1))) - 1;
                    uint64_t acc = A[i], res = mask ? 0 : acc;
                    while (i--) {
                        acc += A[i];
                        if ((i & mask) == 0)
                            res += acc;
                    }
                    want = res;
                } else {
                    uint64_t res = P[i], acc = A[i];
                    while (i--) {
                        uint64_t raise = acc;
                        for (size_t j = 0; j < lsbits - 1 - nthrbits; j++)
                            raise += raise;
                        res += raise;
                        res += P[i];
                        if (i)
                            acc += A[i];
                    }
                    want = res;
                }
                // the weights
                uint64_t got = 0;
                for (uint32_t j = 0; j < NT; j++) {
                    uint32_t k;
                    bool use_p;
                    sp_window_term(j, lsbits, nthrbits, k, use_p);
                    got += (use_p ? P[j] : 0) + (uint64_t)k * A[j];
                }
                bad += got != want;
            }
        }
    }
    return bad;
}


// `sp_side`'s arithmetic on the host (the same templates, the host's field types), for the no-GPU
// tests: the window sums of L, A, B_G1 (`w1`: three runs of nwins[j] + 1 Jacobian points, the
// last of each the ones) and of B_G2 (`w2`), with `blind`, into `out`, in the order of `sp_side`.
extern "C" void splitprover_gpu_side_check(const point_t* w1, const point_fp2_t* w2,
                                           const uint32_t* nwins, const uint32_t* wbits,
                                           const sp_blind* blind, sp_dev_sums* out)
{
    static_assert(sizeof(sp_jac_mem<fp_t>) == sizeof(point_t), "blst_p1 is X, Y, Z");
    static_assert(sizeof(sp_jac_mem<fp2_t>) == sizeof(point_fp2_t), "blst_p2 is X, Y, Z");
    static_assert(sizeof(sp_blind) == 64 + 2 * 144 + 288, "the Rust mirror's size");
    static_assert(sizeof(sp_dev_sums) == 4 * 96 + 192, "the Rust mirror's size");
    auto xyzz_run = [](auto* pts, uint32_t len) {
        typedef std::remove_const_t<std::remove_pointer_t<decltype(pts)>> P;
        typedef std::conditional_t<std::is_same_v<P, point_t>, fp_t, fp2_t> F;
        std::vector<xyzz_t<F>> v(len);
        for (uint32_t i = 0; i < len; i++)
            v[i] = sp_from_jac(*reinterpret_cast<const sp_jac_mem<F>*>(&pts[i]));
        return v;
    };
    bucket_t p[3];
    const point_t* w = w1;
    for (int j = 0; j < 3; j++) {
        auto run = xyzz_run(w, nwins[j] + 1);
        w += nwins[j] + 1;
        sp_chain(p[j], run.data(), nwins[j], wbits[j]);
    }
    sp_addx(p[1], sp_from_jac(blind->pa));
    sp_addx(p[2], sp_from_jac(blind->pb1));
    auto run2 = xyzz_run(w2, nwins[3] + 1);
    bucket_fp2_t b2;
    sp_chain(b2, run2.data(), nwins[3], wbits[3]);
    sp_addx(b2, sp_from_jac(blind->pb2));
    bucket_t sa, rb;
    sp_mul(sa, p[1], blind->s);
    sp_mul(rb, p[2], blind->r);
    bucket_t x = p[0];
    sp_addx(x, sa);
    sp_addx(x, rb);
    fp_t ax, ay;
    sp_aff_mem<fp_t>* dst[4] = {&out->l, &out->a, &out->b1, &out->x};
    const bucket_t* src[4] = {&p[0], &p[1], &p[2], &x};
    for (int k = 0; k < 4; k++) {
        sp_affine(ax, ay, *src[k]);
        dst[k]->X = ax;
        dst[k]->Y = ay;
    }
    fp2_t bx, by;
    sp_affine(bx, by, b2);
    out->b2.X = bx;
    out->b2.Y = by;
}

#endif
