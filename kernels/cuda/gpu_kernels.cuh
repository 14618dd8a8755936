// gpu_kernels.cuh: the prover's device kernels (vector arithmetic, the witness unpack and
// products, the bitmap scans and gathers, the 0/1 split, the final sums and `sp_side`)
// Part of gpu_prover.cu's one translation unit, included there in order after what it
// uses; not a standalone header.

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

// out = M w for one pre-compiled matrix (`sp_eval_row`), a row per thread: `rows` rows whose
// offsets are `row_start` and whose terms start at term `base` (a streamed chunk's; 0 and the
// whole matrix when resident).
__launch_bounds__(256)
__global__ void sp_spmv(fr_t* out, size_t rows, const uint64_t* row_start, const uint64_t* terms,
                        uint64_t base, const fr_t* coeffs, const fr_t* input, size_t n_inputs,
                        const fr_t* aux)
{
    // coefficient id 0 is 1 (kernels::r1cs)
    const fr_t one = coeffs[SP_ID_ONE];
    for (size_t r = threadIdx.x + (size_t)blockIdx.x * blockDim.x; r < rows;
         r += (size_t)blockDim.x * gridDim.x)
        out[r] = sp_eval_row(row_start, terms, base, r, coeffs, input, n_inputs, aux, one);
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

// A G1 chunk's bucket sums, lane by lane (`sp_accumulate` for degree 1). sppark gives a warp 32
// neighbouring buckets, one a lane, and the warp adds until its largest bucket is done: at
// 2^27 in 13 chunks a bucket of an 18-bit window holds about 79 points, the largest of 32 about
// 97, so a fifth of the lanes' additions are idle. Here a lane takes its next bucket from the
// shared counter as soon as its own is done (the lanes that are done at once take theirs with
// one atomic), and every pass of the loop adds one point in each lane that has one: the lanes
// stay together in the additions however unequal their buckets, until the counter runs out. A
// bucket starts from what the earlier chunks left in it (`add`), so its points are all mixed
// additions, where sppark's order added that sum last with a full addition. The sums are the
// same group elements, and so the proofs the same bytes (measured:
// benchmarks/2026-12-07-h200-lanes/NOTES.md).
template<class bucket_t, class affine_h>
__device__ __forceinline__ void sp_accumulate_lanes(typename bucket_t::mem_t* buckets_,
                                                    uint32_t nwins, uint32_t wbits,
                                                    const affine_h* points,
                                                    const vec2d_t<uint32_t>& digits,
                                                    const vec2d_t<uint32_t>& histogram,
                                                    uint32_t& counter, bool add)
{
    typedef typename bucket_t::affine_t affine_t;
    const uint32_t row_bits = wbits - 1;
    const uint32_t row_mask = (1U << row_bits) - 1;
    const uint32_t total = nwins << row_bits;
    vec2d_t<typename bucket_t::mem_t> buckets{buckets_, 1U << row_bits};
    bucket_t acc;
    uint32_t cur = total;   // the bucket `acc` sums; `total`: none
    const uint32_t* d = nullptr;
    uint32_t left = 0;      // the digits of `cur` not yet added
    bool live = true;       // the counter has not run out for this lane
    for (;;) {
        while (live && !left) {
            if (cur < total)
                buckets[cur >> row_bits][cur & row_mask] = acc;
            cur = total;
            cooperative_groups::coalesced_group g = cooperative_groups::coalesced_threads();
            uint32_t base = 0;
            if (g.thread_rank() == 0)
                base = atomicAdd(&counter, g.size());
            const uint32_t next = g.shfl(base, 0) + g.thread_rank();
            if (next >= total) {
                live = false;
                break;
            }
            const uint32_t y = next >> row_bits, x = next & row_mask;
            const uint32_t* h = &histogram[y][x];
            const uint32_t start = x ? h[-1] : 0;
            // bucket 0 of window 0 (the digits +-1) stays empty: the batch addition sums it
            const uint32_t len = next ? h[0] - start : 0;
            if (!len) {
                if (!add)
                    buckets[y][x].inf();
                continue;
            }
            d = &digits[y][start];
            left = len;
            cur = next;
            if (add)
                acc = buckets[y][x];
            else
                acc.inf();
        }
        if (!__any_sync(0xffffffffu, live))
            break;
        if (live) {
            const uint32_t digit = *d++;
            const affine_t p = points[digit & 0x7fffffff];
            acc.add(p, digit >> 31);
            left--;
        }
    }
}

// A chunk's bucket sums in sppark's order (`sp_accumulate` for G2): a warp takes a run of
// neighbouring buckets, a pair of lanes each, and adds until its largest one is done.
template<class bucket_t, class affine_h>
__device__ __forceinline__ void sp_accumulate_pairs(typename bucket_t::mem_t* buckets_,
                                                    uint32_t nwins, uint32_t wbits,
                                                    const affine_h* points,
                                                    const vec2d_t<uint32_t>& digits,
                                                    const vec2d_t<uint32_t>& histogram,
                                                    uint32_t& counter, bool add)
{
    typedef typename bucket_t::affine_t affine_t;
    const uint32_t row_bits = wbits - 1;
    vec2d_t<typename bucket_t::mem_t> buckets{buckets_, 1U << row_bits};
    const uint32_t degree = bucket_t::degree;
    const uint32_t lane = threadIdx.x % WARP_SZ;   // blocks are whole warps
    const uint32_t pt_lane = lane / degree;
    const uint32_t pts_per_warp = WARP_SZ / degree;

    __shared__ uint32_t first;
    if (threadIdx.x == 0)
        first = atomicAdd(&counter, blockDim.x / degree);
    __syncthreads();
    uint32_t x = first + threadIdx.x / degree;

    while (x < (nwins << row_bits)) {
        const uint32_t y = x >> row_bits;
        x &= (1U << row_bits) - 1;
        const uint32_t* h = &histogram[y][x];
        uint32_t end = h[0];
        // a run never crosses a window (rows are whole warps), so the previous point lane's end
        // is this bucket's start, and the run's first lane reads it from the histogram
        uint32_t start = __shfl_up_sync(0xffffffffu, end, degree);
        if (pt_lane == 0)
            start = x != 0 ? h[-1] : 0;
        uint32_t len = end - start;
        if (len && !(x == 0 && y == 0)) {
            const uint32_t* d = &digits[y][start];
            uint32_t digit = *d++;
            affine_t p = points[digit & 0x7fffffff];
            bucket_t bucket = p;
            bucket.cneg(digit >> 31);
            while (--len) {
                digit = *d++;
                p = points[digit & 0x7fffffff];
                if (sizeof(bucket) <= 128 || LARGE_L1_CODE_CACHE)
                    bucket.add(p, digit >> 31);
                else
                    bucket.uadd(p, digit >> 31);
            }
            if (add) {
                bucket_t before;
                before = buckets[y][x];
                sp_add(bucket, before);
            }
            buckets[y][x] = bucket;
        } else if (!add) {
            buckets[y][x].inf();
        }
        x = lane == 0 ? atomicAdd(&counter, pts_per_warp) : 0;
        x = __shfl_sync(0xffffffffu, x, 0) + pt_lane;
    }
}

// A Pippenger chunk's bucket sums: sppark's `accumulate` (msm/pippenger.cuh), a cooperative
// grid that takes buckets in warp-sized runs from a shared counter and adds each bucket's points
// (its digits are sorted, `histogram` holds each window's running counts), with one change: where
// `add` is set the sum is added to what the bucket holds, an earlier chunk's sum over the same
// window and bucket, and an empty bucket keeps it. So every chunk of one Pippenger fills the same
// buckets and the rows are integrated once, after the last chunk (`sp_pippenger`), not once a
// chunk: the integration runs one block per window, a few percent of the device
// (benchmarks/2026-12-06-h100-one-integration/NOTES.md). Bucket 0 of window 0 (the digits +-1) stays empty: the batch
// addition sums it. G1 buckets go lane by lane (`sp_accumulate_lanes`); G2's keep sppark's
// order, a pair of lanes a bucket. The template parameter is named as sppark's, whose
// block-size macro names it.
template<class bucket_t, class affine_h>
__launch_bounds__(ACCUMULATE_NTHREADS)
__global__ void sp_accumulate(typename bucket_t::mem_t* buckets_, uint32_t nwins, uint32_t wbits,
                              const affine_h* points, const vec2d_t<uint32_t> digits,
                              const vec2d_t<uint32_t> histogram, uint32_t sid, bool add)
{
#ifdef __CUDA_ARCH__   // the host pass sees blst's host types, which this body does not take
    static __device__ uint32_t next[MSM_NSTREAMS];
    uint32_t& counter = next[sid % MSM_NSTREAMS];
    if constexpr (bucket_t::degree == 1) {
        sp_accumulate_lanes<bucket_t>(buckets_, nwins, wbits, points, digits, histogram,
                                      counter, add);
    } else {
        sp_accumulate_pairs<bucket_t>(buckets_, nwins, wbits, points, digits, histogram,
                                      counter, add);
    }

    cooperative_groups::this_grid().sync();
    if (threadIdx.x + blockIdx.x == 0)
        counter = 0;
#endif
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

template __global__ void sp_accumulate<bucket_t, affine_t::mem_t>(bucket_t::mem_t*, uint32_t,
    uint32_t, const affine_t::mem_t*, const vec2d_t<uint32_t>, const vec2d_t<uint32_t>, uint32_t,
    bool);
template __global__ void sp_accumulate<bucket_fp2_t, affine_fp2_t::mem_t>(bucket_fp2_t::mem_t*,
    uint32_t, uint32_t, const affine_fp2_t::mem_t*, const vec2d_t<uint32_t>,
    const vec2d_t<uint32_t>, uint32_t, bool);
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
