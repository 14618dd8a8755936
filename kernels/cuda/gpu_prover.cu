// splitprover's own CUDA Groth16 prover over sppark (BLS12-381).
//
// A `GpuContext` holds one SRS resident in device memory (H, L, A, B_G1, B_G2 uploaded once from
// the host SRS image), one multi-scalar-multiplication object per query (bucket memory allocated
// once) and the scratch buffers one proof needs. A proof then copies only the circuit's a/b/c
// evaluations, its assignment and its density bitmaps to the device, and runs there:
//   - the quotient H: iNTT, coset NTT of a, b and c, (a*b - c) / Z on the coset, coset iNTT;
//   - the density gathers: A's and B's scalars selected from the assignment by the bitmaps
//     (per-tile popcount prefix sums, a scan of the tile totals, a gather kernel);
//   - the five MSMs (H, L, A, B_G1 over G1; B_G2 over Fp2), with sppark's Pippenger.
// It returns the five unblinded sums as Jacobian points (the layout of blst's p1/p2, so of
// blstrs' projective points); the caller adds alpha/beta/delta with r and s.
//
// Every entry point returns a RustError: a CUDA failure or an allocation refused is an error
// value, never an abort. Entry points serialize on the context's mutex.

#include <chrono>
#include <mutex>
#include <vector>

#if defined(FEATURE_BLS12_381)
# include <ff/bls12-381-fp2.hpp>
#else
# error "only FEATURE_BLS12_381 is supported"
#endif

#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>

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
// launch failed with "invalid device function" on the H200.
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

// The density gather: out[k] = in[i] for the k-th set bit i of a bitmap, in three steps over
// tiles of SP_TILE words: per-tile exclusive prefix counts (`sp_tile_scan`), a scan of the tile
// totals (`sp_tiles_scan`, one block: at most a few thousand tiles up to 2^32 bits), then the
// gather itself (`sp_gather`), which adds the two.
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

__global__ void sp_gather(fr_t* out, const fr_t* in, const uint64_t* words,
                          const uint32_t* offsets, const uint32_t* tile_sums, size_t nwords)
{
    for (size_t w = threadIdx.x + (size_t)blockIdx.x * blockDim.x; w < nwords;
         w += (size_t)blockDim.x * gridDim.x) {
        uint64_t word = words[w];
        size_t o = (size_t)tile_sums[w / SP_TILE] + offsets[w];
        while (word) {
            int j = __ffsll((long long)word) - 1;
            out[o++] = in[w * 64 + j];
            word &= word - 1;
        }
    }
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

// out[offsets...] = points[i] for the set bits i of `words`, as sp_gather for points.
template<class P>
__global__ void sp_gather_points(P* out, const P* in, const uint64_t* words,
                                 const uint32_t* offsets, const uint32_t* tile_sums,
                                 size_t nwords)
{
    for (size_t w = threadIdx.x + (size_t)blockIdx.x * blockDim.x; w < nwords;
         w += (size_t)blockDim.x * gridDim.x) {
        uint64_t word = words[w];
        size_t o = (size_t)tile_sums[w / SP_TILE] + offsets[w];
        while (word) {
            int j = __ffsll((long long)word) - 1;
            out[o++] = in[w * 64 + j];
            word &= word - 1;
        }
    }
}

template __global__ void sp_gather_points<affine_t::mem_t>(affine_t::mem_t*,
    const affine_t::mem_t*, const uint64_t*, const uint32_t*, const uint32_t*, size_t);
template __global__ void sp_gather_points<affine_fp2_t::mem_t>(affine_fp2_t::mem_t*,
    const affine_fp2_t::mem_t*, const uint64_t*, const uint32_t*, const uint32_t*, size_t);

#ifndef __CUDA_ARCH__

// ---------------------------------------------------------------------------------------------
// The FFI types (mirrored in kernels/src/backend/gpu.rs)

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

// One synthesized circuit (scalars in Montgomery form, as blstrs keeps them).
struct sp_assignment {
    const fr_t* a; const fr_t* b; const fr_t* c; size_t abc_len;
    const fr_t* input; size_t input_len;
    const fr_t* aux; size_t aux_len;
    sp_density a_aux, b_input, b_aux;
};

// The five unblinded sums, Jacobian (blst_p1 / blst_p2 layout).
struct sp_components {
    point_t h, l, a, b_g1;
    point_fp2_t b_g2;
};

// Milliseconds per phase of one proof (host clock, each phase ends with a stream sync).
struct sp_phases {
    double copy_in, ntt, gather, msm_h, msm_l, msm_a, msm_b_g1, msm_b_g2, total;
};

struct sp_upload {
    size_t resident_bytes;   // SRS points now in device memory
    size_t scratch_bytes;    // per-proof buffers and MSM buckets
    double upload_ms;        // host-to-device copy of the SRS
    int pinned;              // 1 when the SRS was page-locked for the copy
};

// The host types must have blst's layouts: the SRS image holds blst affine points and the
// results are read as blst Jacobian points.
static_assert(sizeof(affine_t) == 96, "G1 affine is blst_p1_affine");
static_assert(sizeof(affine_fp2_t) == 192, "G2 affine is blst_p2_affine");
static_assert(sizeof(point_t) == 144, "G1 Jacobian is blst_p1");
static_assert(sizeof(point_fp2_t) == 288, "G2 Jacobian is blst_p2");
static_assert(sizeof(fr_t) == 32, "Fr is blst_fr");

static int sp_lg2(size_t n) { int r = 0; while (n >>= 1) r++; return r; }

typedef msm_t<bucket_t, point_t, affine_t, scalar_t> msm_g1_t;
typedef msm_t<bucket_fp2_t, point_fp2_t, affine_fp2_t, scalar_t> msm_g2_t;

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

struct GpuContext {
    std::mutex mtx;
    const gpu_t& gpu;
    sp_srs lens;               // lengths only (host pointers cleared after the upload)
    uint32_t lg_domain;
    size_t domain;

    sp_buf<affine_t> d_h, d_l, d_a, d_b_g1;
    sp_buf<affine_fp2_t> d_b_g2;

    sp_buf<fr_t> d_abc;        // 3 * domain: a, b, c, then h in place of a
    sp_buf<fr_t> d_input, d_aux, d_sc_a, d_sc_b;
    sp_buf<uint64_t> d_words;  // density words: a_aux, b_input, b_aux
    sp_buf<uint32_t> d_offsets, d_tile_sums;
    // the 0/1 split: bitmaps over the largest query, the tail's scalars and points (at most
    // half of a query: a query with more big scalars gets a plain MSM)
    sp_buf<uint64_t> d_ones, d_big;
    sp_buf<fr_t> d_tail_sc;
    sp_buf<affine_t> d_tail_g1;
    sp_buf<affine_fp2_t> d_tail_g2;
    sp_buf<bucket_t::mem_t> d_batch_g1;
    sp_buf<bucket_fp2_t::mem_t> d_batch_g2;
    uint32_t* h_count = nullptr;   // page-locked: the tail's size read back

    msm_g1_t *msm_h = nullptr, *msm_l = nullptr, *msm_a = nullptr, *msm_b1 = nullptr;
    msm_g2_t *msm_b2 = nullptr;

    GpuContext(const gpu_t& g) : gpu(g) {}
    ~GpuContext()
    {
        delete msm_h; delete msm_l; delete msm_a; delete msm_b1; delete msm_b2;
        if (h_count) (void)cudaFreeHost(h_count);
    }
};

static RustError sp_error(const cuda_error& e, const char* what)
{
    std::string msg = std::string(what) + ": " + e.what();
    return RustError{e.code(), msg};
}

template<class T>
static void sp_upload_points(sp_buf<T>& dst, const T* src, size_t n, const gpu_t& gpu)
{
    dst.alloc(n);
    if (n)
        CUDA_OK(cudaMemcpyAsync(dst.ptr, src, n * sizeof(T), cudaMemcpyHostToDevice, gpu));
}

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

static size_t sp_words(size_t bits) { return (bits + 63) / 64; }
// u64 words of a split bitmap over n scalars: padded to 1024 bits (sppark's batch addition reads
// 32 u32 words at a time).
static size_t sp_split_words(size_t n) { return (n + 1023) / 1024 * 16; }

extern "C"
RustError::by_value splitprover_gpu_create(const sp_srs* srs, const void* image,
                                           size_t image_len, int device,
                                           GpuContext** out, sp_upload* stats)
{
    *out = nullptr;
    if (!ngpus())
        return RustError{cudaErrorNoDevice, "no CUDA device"};
    if (device < 0 || (size_t)device >= ngpus())
        return RustError{cudaErrorInvalidDevice, "no CUDA device with that ordinal"};
    if (srs->n_h < 2)
        return RustError{cudaErrorInvalidValue, "the SRS's H query has fewer than 2 points"};

    GpuContext* ctx = nullptr;
    try {
        const gpu_t& gpu = select_gpu(device);
        gpu.select();
        ctx = new GpuContext(gpu);
        ctx->lens = *srs;
        ctx->lg_domain = sp_lg2(srs->n_h - 1) + 1;
        ctx->domain = (size_t)1 << ctx->lg_domain;

        // Refuse a shape that cannot fit, with the numbers, before allocating anything.
        size_t srs_bytes = (srs->n_h + srs->n_l + srs->n_a + srs->n_b) * sizeof(affine_t)
                         + srs->n_b * sizeof(affine_fp2_t);
        size_t scratch = (3 * ctx->domain + srs->n_inputs + srs->n_l + srs->n_a + srs->n_b)
                         * sizeof(fr_t)
                       + (2 * sp_words(srs->n_l) + sp_words(srs->n_inputs)) * 8 * 2
                       + std::max(std::max(srs->n_l, srs->n_a), srs->n_b) / 2
                         * (sizeof(fr_t) + sizeof(affine_t))
                       + srs->n_b / 2 * sizeof(affine_fp2_t);
        size_t free_b = 0, total_b = 0;
        CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
        if (srs_bytes + scratch > free_b) {
            std::string msg = "the SRS needs " + std::to_string(srs_bytes >> 20)
                + " MiB of device memory and a proof " + std::to_string(scratch >> 20)
                + " MiB more, but the device has " + std::to_string(free_b >> 20) + " MiB free of "
                + std::to_string(total_b >> 20) + " MiB";
            delete ctx;
            return RustError{cudaErrorMemoryAllocation, msg};
        }

        auto t0 = std::chrono::steady_clock::now();
        {
            sp_host_lock lock(image, image_len);
            stats->pinned = lock.ok;
            sp_upload_points(ctx->d_h, srs->h, srs->n_h, gpu);
            sp_upload_points(ctx->d_l, srs->l, srs->n_l, gpu);
            sp_upload_points(ctx->d_a, srs->a, srs->n_a, gpu);
            sp_upload_points(ctx->d_b_g1, srs->b_g1, srs->n_b, gpu);
            sp_upload_points(ctx->d_b_g2, srs->b_g2, srs->n_b, gpu);
            gpu.sync();
        }
        stats->upload_ms = std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - t0).count();
        ctx->lens.h = ctx->lens.l = ctx->lens.a = ctx->lens.b_g1 = nullptr;
        ctx->lens.b_g2 = nullptr;
        stats->resident_bytes = ctx->d_h.bytes() + ctx->d_l.bytes() + ctx->d_a.bytes()
                              + ctx->d_b_g1.bytes() + ctx->d_b_g2.bytes();

        size_t n_aux = srs->n_l;
        size_t n_inp = srs->n_inputs;
        ctx->d_abc.alloc(3 * ctx->domain);
        ctx->d_input.alloc(n_inp ? n_inp : 1);
        ctx->d_aux.alloc(n_aux ? n_aux : 1);
        ctx->d_sc_a.alloc(srs->n_a ? srs->n_a : 1);
        ctx->d_sc_b.alloc(srs->n_b ? srs->n_b : 1);
        size_t nwords = 2 * sp_words(n_aux) + sp_words(n_inp);
        ctx->d_words.alloc(nwords ? nwords : 1);
        size_t maxw = std::max(sp_words(n_aux), sp_words(n_inp)) + 1;
        ctx->d_offsets.alloc(maxw);
        ctx->d_tile_sums.alloc((maxw + SP_TILE - 1) / SP_TILE + 1);
        size_t nmax = std::max(std::max(srs->n_l, srs->n_a), srs->n_b);
        size_t split_words = sp_split_words(nmax);
        ctx->d_ones.alloc(split_words);
        ctx->d_big.alloc(split_words);
        ctx->d_tail_sc.alloc(nmax / 2 + 1);
        ctx->d_tail_g1.alloc(nmax / 2 + 1);
        ctx->d_tail_g2.alloc(srs->n_b / 2 + 1);
        size_t nbuckets = (size_t)gpu.sm_count() * BATCH_ADD_BLOCK_SIZE / WARP_SZ;
        ctx->d_batch_g1.alloc(nbuckets);
        ctx->d_batch_g2.alloc(nbuckets);
        CUDA_OK(cudaMallocHost(&ctx->h_count, sizeof(uint32_t)));

        ctx->msm_h = new msm_g1_t(nullptr, srs->n_h, sizeof(affine_t), device);
        if (srs->n_l) ctx->msm_l = new msm_g1_t(nullptr, srs->n_l, sizeof(affine_t), device);
        if (srs->n_a) ctx->msm_a = new msm_g1_t(nullptr, srs->n_a, sizeof(affine_t), device);
        if (srs->n_b) {
            ctx->msm_b1 = new msm_g1_t(nullptr, srs->n_b, sizeof(affine_t), device);
            ctx->msm_b2 = new msm_g2_t(nullptr, srs->n_b, sizeof(affine_fp2_t), device);
        }
        stats->scratch_bytes = ctx->d_abc.bytes() + ctx->d_input.bytes() + ctx->d_aux.bytes()
                             + ctx->d_sc_a.bytes() + ctx->d_sc_b.bytes() + ctx->d_words.bytes()
                             + ctx->d_offsets.bytes() + ctx->d_tile_sums.bytes()
                             + ctx->d_ones.bytes() + ctx->d_big.bytes()
                             + ctx->d_tail_sc.bytes() + ctx->d_tail_g1.bytes()
                             + ctx->d_tail_g2.bytes() + ctx->d_batch_g1.bytes()
                             + ctx->d_batch_g2.bytes();
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

extern "C" void splitprover_gpu_destroy(GpuContext* ctx)
{
    if (!ctx) return;
    ctx->gpu.select();
    ctx->gpu.sync();
    delete ctx;
}

// Gathers into dst the elements of src (on the device) whose bit is set in the bitmap
// d_words[0..nwords).
static void sp_gather_dense(GpuContext& ctx, fr_t* dst, const fr_t* src,
                            const uint64_t* d_words, size_t nwords, stream_t& s)
{
    if (!nwords) return;
    size_t ntiles = (nwords + SP_TILE - 1) / SP_TILE;
    sp_tile_scan<<<(unsigned)ntiles, SP_TILE, 0, s>>>(ctx.d_offsets.ptr, ctx.d_tile_sums.ptr,
                                                     d_words, nwords);
    CUDA_OK(cudaGetLastError());
    sp_tiles_scan<<<1, 32, 0, s>>>(ctx.d_tile_sums.ptr, ntiles);
    CUDA_OK(cudaGetLastError());
    int blocks = (int)std::min<size_t>((nwords + 255) / 256, (size_t)ctx.gpu.sm_count() * 8);
    sp_gather<<<blocks, 256, 0, s>>>(dst, src, d_words, ctx.d_offsets.ptr, ctx.d_tile_sums.ptr,
                                     nwords);
    CUDA_OK(cudaGetLastError());
}

static void sp_msm_ok(RustError e)
{
    if (e.code != 0) {
        std::string msg = e.message ? e.message : "";
        free(e.message);
        throw cuda_error{e.code, "multi-scalar multiplication: " + msg};
    }
}

typedef std::chrono::steady_clock sp_clock;
static double sp_ms(sp_clock::time_point& t)
{
    auto now = sp_clock::now();
    double ms = std::chrono::duration<double, std::milli>(now - t).count();
    t = now;
    return ms;
}

// Marks the ones and the big scalars of d_sc[0..n) and, when the big ones are at most half,
// gathers them to ctx.d_tail_sc; leaves the prefix sums of `big` in d_offsets/d_tile_sums for
// the point gathers. Returns the number of big scalars, or SIZE_MAX when the query is better
// served by a plain MSM.
static size_t sp_split(GpuContext& ctx, const fr_t* d_sc, size_t n)
{
    stream_t& s = ctx.gpu;
    size_t words = sp_split_words(n);
    size_t padded = words * 64;
    fr_t fr_one = fr_t::one();
    const uint64_t* one = (const uint64_t*)&fr_one;
    int blocks = (int)std::min<size_t>((padded + 255) / 256, (size_t)ctx.gpu.sm_count() * 16);
    sp_classify<<<blocks, 256, 0, s>>>((uint32_t*)ctx.d_ones.ptr, (uint32_t*)ctx.d_big.ptr,
                                       d_sc, n, padded, one[0], one[1], one[2], one[3]);
    CUDA_OK(cudaGetLastError());
    size_t nwords = sp_words(n);
    size_t ntiles = (nwords + SP_TILE - 1) / SP_TILE;
    sp_tile_scan<<<(unsigned)ntiles, SP_TILE, 0, s>>>(ctx.d_offsets.ptr, ctx.d_tile_sums.ptr,
                                                     ctx.d_big.ptr, nwords);
    CUDA_OK(cudaGetLastError());
    sp_tiles_scan<<<1, 32, 0, s>>>(ctx.d_tile_sums.ptr, ntiles);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpyAsync(ctx.h_count, ctx.d_tile_sums.ptr + ntiles, sizeof(uint32_t),
                            cudaMemcpyDeviceToHost, s));
    s.sync();
    size_t big = *ctx.h_count;
    if (big > n / 2)
        return SIZE_MAX;
    int gblocks = (int)std::min<size_t>((nwords + 255) / 256, (size_t)ctx.gpu.sm_count() * 8);
    sp_gather<<<gblocks, 256, 0, s>>>(ctx.d_tail_sc.ptr, d_sc, ctx.d_big.ptr, ctx.d_offsets.ptr,
                                      ctx.d_tile_sums.ptr, nwords);
    CUDA_OK(cudaGetLastError());
    return big;
}

template<class A>
static void sp_gather_tail(GpuContext& ctx, A* tail, const A* points, size_t n)
{
    stream_t& s = ctx.gpu;
    size_t nwords = sp_words(n);
    int gblocks = (int)std::min<size_t>((nwords + 255) / 256, (size_t)ctx.gpu.sm_count() * 8);
    sp_gather_points<typename A::mem_t><<<gblocks, 256, 0, s>>>(
        (typename A::mem_t*)tail, (const typename A::mem_t*)points, ctx.d_big.ptr,
        ctx.d_offsets.ptr, ctx.d_tile_sums.ptr, nwords);
    CUDA_OK(cudaGetLastError());
}

// The sum of the points whose scalar is one (ctx.d_ones), by sppark's batch addition: one
// partial sum per warp on the device, added up here.
template<class bucket, class point>
static void sp_add_ones(GpuContext& ctx, point& out, const typename bucket::affine_t* points,
                        size_t n, sp_buf<typename bucket::mem_t>& d_buckets)
{
    stream_t& s = ctx.gpu;
    int sms = ctx.gpu.sm_count();
    s.launch_coop(batch_addition<bucket>, {sms, BATCH_ADD_BLOCK_SIZE},
                  d_buckets.ptr, (const typename bucket::affine_t::mem_t*)points, (uint32_t)n,
                  (const uint32_t*)ctx.d_ones.ptr, false, (uint32_t)0);
    std::vector<bucket> partial(d_buckets.len);
    s.DtoH(&partial[0], d_buckets.ptr, d_buckets.len);
    s.sync();
    out = sum_up(partial);
}

// sum scalars[i] points[i] over n points: split when the big scalars are at most half.
template<class bucket, class msm_type, class point, class affine>
static void sp_msm(GpuContext& ctx, msm_type* msm, point& out, const affine* d_pts,
                   const fr_t* d_sc, size_t n, size_t big, affine* d_tail,
                   sp_buf<typename bucket::mem_t>& d_buckets)
{
    out.inf();
    if (!n) return;
    if (big == SIZE_MAX) {
        sp_msm_ok(msm->invoke(out, dev_ptr_t<affine>(const_cast<affine*>(d_pts)), n,
                              dev_ptr_t<fr_t>(const_cast<fr_t*>(d_sc)), true));
        return;
    }
    if (big) {
        sp_gather_tail(ctx, d_tail, d_pts, n);
        ctx.gpu.sync();
        sp_msm_ok(msm->invoke(out, dev_ptr_t<affine>(d_tail), big,
                              dev_ptr_t<fr_t>(ctx.d_tail_sc.ptr), true));
    }
    point ones;
    sp_add_ones<bucket>(ctx, ones, d_pts, n, d_buckets);
    out.add(ones);
}

extern "C"
RustError::by_value splitprover_gpu_prove(GpuContext* ctx, const sp_assignment* asg,
                                          sp_components* out, sp_phases* ph)
{
    std::lock_guard<std::mutex> guard(ctx->mtx);
    const gpu_t& gpu = ctx->gpu;
    const sp_srs& L = ctx->lens;

    // The Rust side checks all of this; checked again so that no call reads out of bounds.
    if (asg->abc_len > ctx->domain || asg->aux_len != L.n_l || asg->input_len != L.n_inputs
        || asg->a_aux.bit_len != L.n_l || asg->b_aux.bit_len != L.n_l
        || asg->b_input.bit_len != L.n_inputs
        || L.n_inputs + asg->a_aux.popcount != L.n_a
        || asg->b_input.popcount + asg->b_aux.popcount != L.n_b)
        return RustError{cudaErrorInvalidValue, "the assignment does not match the SRS"};

    try {
        gpu.select();
        auto t_all = sp_clock::now();
        auto t = t_all;
        size_t n = asg->abc_len, dom = ctx->domain;
        fr_t* d_a = ctx->d_abc.ptr;
        fr_t* d_b = d_a + dom;
        fr_t* d_c = d_b + dom;

        // copies in: a, b, c (zero-padded to the domain), the assignment, the bitmaps
        const fr_t* src[3] = {asg->a, asg->b, asg->c};
        fr_t* dst[3] = {d_a, d_b, d_c};
        for (int i = 0; i < 3; i++) {
            gpu[i].HtoD(dst[i], src[i], n);
            if (n < dom)
                CUDA_OK(cudaMemsetAsync(dst[i] + n, 0, (dom - n) * sizeof(fr_t), gpu[i]));
        }
        size_t w_aux = sp_words(L.n_l), w_inp = sp_words(L.n_inputs);
        uint64_t* d_w_a = ctx->d_words.ptr;
        uint64_t* d_w_bi = d_w_a + w_aux;
        uint64_t* d_w_ba = d_w_bi + w_inp;
        gpu.HtoD(ctx->d_input.ptr, asg->input, L.n_inputs);
        gpu.HtoD(ctx->d_aux.ptr, asg->aux, L.n_l);
        gpu.HtoD(d_w_a, asg->a_aux.words, w_aux);
        gpu.HtoD(d_w_bi, asg->b_input.words, w_inp);
        gpu.HtoD(d_w_ba, asg->b_aux.words, w_aux);
        gpu.sync();
        ph->copy_in = sp_ms(t);

        // the quotient's coefficients, in place of a
        for (int i = 0; i < 3; i++) {
            sp_ntt::NTT_internal(dst[i], ctx->lg_domain, NTT::InputOutputOrder::NR,
                                 NTT::Direction::inverse, NTT::Type::standard, gpu[i]);
            sp_ntt::NTT_internal(dst[i], ctx->lg_domain, NTT::InputOutputOrder::RN,
                                 NTT::Direction::forward, NTT::Type::coset, gpu[i]);
        }
        gpu[1].sync();
        gpu[2].sync();
        fr_t z = group_gen;
        for (uint32_t i = 0; i < ctx->lg_domain; i++)
            z ^= 2;
        fr_t z_inv = (z - fr_t::one()).reciprocal();
        int sms = gpu.sm_count();
        sp_mul_assign<<<sms, 1024, 0, gpu[0]>>>(d_a, d_b, dom);
        CUDA_OK(cudaGetLastError());
        sp_sub_scale<<<sms, 1024, 0, gpu[0]>>>(d_a, d_c, z_inv, dom);
        CUDA_OK(cudaGetLastError());
        sp_ntt::NTT_internal(d_a, ctx->lg_domain, NTT::InputOutputOrder::NN,
                             NTT::Direction::inverse, NTT::Type::coset, gpu[0]);
        gpu[0].sync();
        ph->ntt = sp_ms(t);

        // A's scalars: the inputs, then the aux A uses; B's: the inputs and aux B uses
        CUDA_OK(cudaMemcpyAsync(ctx->d_sc_a.ptr, ctx->d_input.ptr, L.n_inputs * sizeof(fr_t),
                                cudaMemcpyDeviceToDevice, gpu));
        sp_gather_dense(*ctx, ctx->d_sc_a.ptr + L.n_inputs, ctx->d_aux.ptr, d_w_a, w_aux, gpu);
        sp_gather_dense(*ctx, ctx->d_sc_b.ptr, ctx->d_input.ptr, d_w_bi, w_inp, gpu);
        sp_gather_dense(*ctx, ctx->d_sc_b.ptr + asg->b_input.popcount, ctx->d_aux.ptr, d_w_ba,
                        w_aux, gpu);
        gpu.sync();
        ph->gather = sp_ms(t);

        // dev_ptr_t marks device memory for msm_t::invoke (the points are resident, the
        // scalars were made here); element types are the host ones, so that the inner call
        // takes the host-pointer overload with a null host pointer.
        typedef dev_ptr_t<affine_t> dpts;
        typedef dev_ptr_t<affine_fp2_t> dpts2;
        typedef dev_ptr_t<fr_t> dsc;

        // H: the first domain - 1 coefficients (the last is zero for a valid witness)
        sp_msm_ok(ctx->msm_h->invoke(out->h, dpts(ctx->d_h.ptr), L.n_h, dsc(d_a), true));
        ph->msm_h = sp_ms(t);
        // L, A, B: split into a tail MSM and a batch addition where that pays
        size_t big = L.n_l ? sp_split(*ctx, ctx->d_aux.ptr, L.n_l) : 0;
        sp_msm<bucket_t>(*ctx, ctx->msm_l, out->l, ctx->d_l.ptr, ctx->d_aux.ptr, L.n_l, big,
                         ctx->d_tail_g1.ptr, ctx->d_batch_g1);
        ph->msm_l = sp_ms(t);
        big = L.n_a ? sp_split(*ctx, ctx->d_sc_a.ptr, L.n_a) : 0;
        sp_msm<bucket_t>(*ctx, ctx->msm_a, out->a, ctx->d_a.ptr, ctx->d_sc_a.ptr, L.n_a, big,
                         ctx->d_tail_g1.ptr, ctx->d_batch_g1);
        ph->msm_a = sp_ms(t);
        big = L.n_b ? sp_split(*ctx, ctx->d_sc_b.ptr, L.n_b) : 0;
        sp_msm<bucket_t>(*ctx, ctx->msm_b1, out->b_g1, ctx->d_b_g1.ptr, ctx->d_sc_b.ptr, L.n_b,
                         big, ctx->d_tail_g1.ptr, ctx->d_batch_g1);
        ph->msm_b_g1 = sp_ms(t);
        // the same split serves G2 (d_ones, d_big and the tail scalars are still B's)
        sp_msm<bucket_fp2_t>(*ctx, ctx->msm_b2, out->b_g2, ctx->d_b_g2.ptr, ctx->d_sc_b.ptr,
                             L.n_b, big, ctx->d_tail_g2.ptr, ctx->d_batch_g2);
        ph->msm_b_g2 = sp_ms(t);
        ph->total = sp_ms(t_all);
    } catch (const cuda_error& e) {
        gpu.sync();
        (void)cudaGetLastError();
        return sp_error(e, "proving on the GPU");
    }
    return RustError{cudaSuccess};
}

#endif
