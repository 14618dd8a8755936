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
// at single-thread latency (milliseconds per chain:
// benchmarks/2026-12-04-h200-device-finish/NOTES.md); on the host blst does one in well under a millisecond but
// it is host CPU per proof. So the device finishes where the H MSM hides its chains: from 2^20
// up (`SP_DEVICE_FINISH_LG`), where the H MSM takes about twice as long as the chains; H's own
// chain, which nothing follows on the device, stays on the host.
// Everything else of sppark's host-side `collect` (the 256 partial sums of every window, the
// batch additions' 8 x SMs partial sums) is parallel work and done on the device.
//
// The MSMs drive sppark's kernels (breakdown, sort, integrate, batch_addition) and our variant
// of its accumulate (`sp_accumulate`) with exactly the window size, chunking and launch shapes
// that sppark's `msm_t` chooses for the same number of points (`sp_plan`), over device-resident
// points and scalars, without sppark's host vectors, device allocations and per-chunk host
// synchronisations, and with one row integration per MSM where sppark has one per chunk.
//
// Under a budget below what this layout takes with the whole SRS streamed, the compact layout
// (`sp_residency::piece`): two domain vectors per input set instead of three, c made (or copied
// from the slot) after a * b in b's place, A's and B's scalars gathered there after the
// quotient, the 0/1 split's tails taken in pieces (`sp_msm_pieces`); kernel by kernel, one set.
//
// Every entry point returns a RustError: a CUDA failure or an allocation refused is an error
// value, never an abort. Entry points serialize on the context's mutex.
//
// The translation unit: this file (the entry points) includes, in order, gpu_kernels.cuh (device
// kernels), gpu_layout.cuh (FFI types, MSM plans, the layout), gpu_context.cuh (buffers, the
// context), gpu_msm.cuh (the MSM drivers) and gpu_proof.cuh (one proof's issue and finish).

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

#include "gpu_kernels.cuh"

#ifndef __CUDA_ARCH__

#include "gpu_layout.cuh"
#include "gpu_context.cuh"


// The copy rate, in GB/s, that streaming gets: one staging buffer's worth of the first query
// with points past its resident prefix, from there (else of H from its start: only the
// matrices' rows stream), timed on the streaming stream. The staging buffers are allocated.
static double sp_stream_rate(GpuContext& ctx, const sp_srs& srs)
{
    const sp_layout& L = ctx.lay;
    const void* from[SP_QUERIES] = {srs.h, srs.l, srs.a, srs.b_g1, srs.b_g2};
    int q = SP_Q_H;
    size_t first = 0;
    for (int k = 0; k < SP_QUERIES; k++)
        if (L.res[k] < L.n[k]) {
            q = k;
            first = L.res[k];
            break;
        }
    size_t bytes = std::min(L.stage_bytes, (L.n[q] - first) * L.point_bytes(q));
    cudaEvent_t e0, e1;
    sp_event(&e0, cudaEventDefault);
    sp_event(&e1, cudaEventDefault);
    stream_t& c = *ctx.s_stream;
    CUDA_OK(cudaEventRecord(e0, c));
    CUDA_OK(cudaMemcpyAsync(ctx.stage[0].ptr,
                            (const unsigned char*)from[q] + first * L.point_bytes(q), bytes,
                            cudaMemcpyHostToDevice, c));
    CUDA_OK(cudaEventRecord(e1, c));
    c.sync();
    float ms = 0;
    (void)cudaEventElapsedTime(&ms, e0, e1);
    (void)cudaEventDestroy(e0);
    (void)cudaEventDestroy(e1);
    return ms > 0 ? bytes / (ms * 1e6) : 0;
}

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
        ctx->beside = !L.compact()
                      && (opts->beside == 1
                          || (opts->beside == 0 && ctx->lg_domain >= SP_BESIDE_LG));
        if (ctx->beside)
            ctx->s_lab.reset(new stream_t(gpu.id()));
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
            if (L.streamed_bytes())
                ctx->image_lock = std::move(lock);
        }
        stats->upload_ms = std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - t0).count();
        if (!L.streamed_bytes()) {   // the image is not kept (staging for the matrices only)
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
            stats->stream_gbps = sp_stream_rate(*ctx, *srs);
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
        sp_event(&ctx->ev_lab_join, cudaEventDisableTiming);
        sp_event(&ctx->ev_join1, cudaEventDisableTiming);
        sp_event(&ctx->ev_join2, cudaEventDisableTiming);
        sp_event(&ctx->ev_batch, cudaEventDefault);
        for (auto& e : ctx->released) {
            sp_event(&e, cudaEventDisableTiming);
            CUDA_OK(cudaEventRecord(e, *ctx->s_main));
        }

        cudaFuncAttributes attr;
        CUDA_OK(cudaFuncGetAttributes(&attr, sp_accumulate<bucket_t, affine_t::mem_t>));
        ctx->acc_block_g1 = dim3(attr.maxThreadsPerBlock);
        CUDA_OK(cudaFuncGetAttributes(&attr, sp_accumulate<bucket_fp2_t, affine_fp2_t::mem_t>));
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
// read): the coefficients, the witness layout's bitmap and rank table, the density words, and
// unless `streamed` the CSR rows and terms of A, B and C.
static size_t sp_matrices_bytes(const sp_matrices& m, bool streamed)
{
    size_t w_aux = sp_words(m.n_aux), w_inp = sp_words(m.n_inputs);
    size_t b = m.n_coeffs * sizeof(fr_t) + (2 * w_aux + 1) * 8 + (2 * w_aux + w_inp) * 8;
    for (int q = 0; q < 3 && !streamed; q++)
        b += (m.rows + 1 + m.nnz[q]) * 8;
    return b;
}

extern "C" size_t splitprover_gpu_matrices_bytes(const sp_matrices* m, int streamed)
{
    return sp_matrices_bytes(*m, streamed != 0);
}

// Page-locks host arrays for streaming: ranges that share a page are locked as one (a page is
// registered once), each merged range on its own. A range CUDA refuses is copied from pageable
// memory (slower, same bytes).
static void sp_lock_ranges(std::vector<std::pair<const char*, size_t>> r,
                           std::vector<std::unique_ptr<sp_host_lock>>& out)
{
    const uintptr_t page = 4096;
    std::sort(r.begin(), r.end());
    for (size_t i = 0; i < r.size();) {
        if (!r[i].second) { i++; continue; }
        const char* lo = r[i].first;
        const char* hi = lo + r[i].second;
        size_t j = i + 1;
        for (; j < r.size(); j++) {
            if (!r[j].second)
                continue;
            if ((uintptr_t)r[j].first / page > ((uintptr_t)hi - 1) / page)
                break;
            hi = std::max(hi, r[j].first + r[j].second);
        }
        out.push_back(std::make_unique<sp_host_lock>(lo, (size_t)(hi - lo)));
        i = j;
    }
}

// Uploads a circuit's matrices and witness layout for witness-only proofs (issue 31), once per
// context; `bytes` gets the device memory they take. With `streamed` (issue 32) A's, B's and C's
// rows and terms stay on the host, page-locked, and every proof copies them through the SRS
// staging buffers: the caller keeps `m`'s arrays alive and unchanged for the context's life.
// Refused, with the numbers, when their shape is not the SRS's, the device has not the room, or
// (streamed) the context has no staging buffers or one row does not fit one.
extern "C"
RustError::by_value splitprover_gpu_set_matrices(GpuContext* ctx, const sp_matrices* m,
                                                 int streamed, size_t* bytes)
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
    if (streamed && !ctx->lay.streams())
        return RustError{cudaErrorInvalidValue,
                         "streamed matrices need a context whose plan streams the SRS (its "
                         "staging buffers carry them)"};
    size_t w_aux = sp_words(L.n_l), w_inp = sp_words(L.n_inputs);
    size_t need = sp_matrices_bytes(*m, streamed != 0);
    try {
        ctx->gpu.select();
        M.reset();
        size_t free_b = 0, total_b = 0;
        CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
        if (need > free_b)
            return RustError{cudaErrorMemoryAllocation,
                             "the matrices need " + sp_mib(need) + " of device memory, but the "
                             "device has " + sp_mib(free_b) + " free of " + sp_mib(total_b)};
        stream_t& s = *ctx->s_copy;
        if (streamed) {
            std::vector<std::pair<const char*, size_t>> ranges;
            for (int q = 0; q < 3; q++) {
                if (!sp_row_chunks(m->row_start[q], m->rows, ctx->stage[0].bytes(),
                                   M.chunks[q]))
                    return RustError{cudaErrorInvalidValue,
                                     std::string("a row of matrix ") + "ABC"[q]
                                     + " has more terms than a staging buffer of "
                                     + sp_mib(ctx->stage[0].bytes()) + " holds"};
                M.host_row_start[q] = m->row_start[q];
                M.host_terms[q] = m->terms[q];
                ranges.push_back({(const char*)m->row_start[q], (m->rows + 1) * 8});
                ranges.push_back({(const char*)m->terms[q], m->nnz[q] * 8});
            }
            sp_lock_ranges(std::move(ranges), M.locks);
            M.streamed = true;
        }
        for (int q = 0; q < 3 && !streamed; q++) {
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

#include "gpu_msm.cuh"
#include "gpu_proof.cuh"

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
// packed witness unpacked into `aux` (n_aux), then A w, B w, C w into `abc` (3 rows). With
// `stage_bytes` non-zero the matrices are taken as a streaming context takes them: cut into
// chunks of at most that many bytes (`sp_row_chunks`), each copied into a buffer of its own,
// offsets then terms, and evaluated from there. Returns the chunks taken (0 when a row does not
// fit a chunk; 3 without chunks). For the no-GPU tests, against kernels::witness::expand.
extern "C" size_t splitprover_gpu_witness_check(const sp_matrices* m, const fr_t* input,
                                                const uint64_t* bit_values,
                                                const fr_t* non_bits, size_t stage_bytes,
                                                fr_t* aux, fr_t* abc)
{
    const fr_t* coeffs = reinterpret_cast<const fr_t*>(m->coeffs);
    const fr_t& one = coeffs[SP_ID_ONE];
    for (size_t i = 0; i < m->n_aux; i++)
        aux[i] = sp_unpack_aux(i, m->is_bit, m->bits_before, bit_values, non_bits, one);
    size_t taken = 0;
    std::vector<sp_row_chunk> chunks;
    std::vector<uint64_t> stage;
    for (int q = 0; q < 3; q++) {
        if (stage_bytes == 0) {
            chunks.assign(1, sp_row_chunk{0, m->rows, 0, m->nnz[q]});
        } else if (!sp_row_chunks(m->row_start[q], m->rows, stage_bytes, chunks)) {
            return 0;
        }
        for (const sp_row_chunk& ch : chunks) {
            const uint64_t* rs = m->row_start[q] + ch.row0;
            const uint64_t* terms = m->terms[q] + ch.t0;
            if (stage_bytes) {
                stage.assign(rs, rs + ch.rows + 1);
                stage.insert(stage.end(), terms, terms + ch.terms);
                rs = stage.data();
                terms = stage.data() + ch.rows + 1;
            }
            for (size_t r = 0; r < ch.rows; r++)
                abc[q * m->rows + ch.row0 + r] = sp_eval_row(rs, terms, ch.t0, r, coeffs, input,
                                                             m->n_inputs, aux, one);
            taken++;
        }
    }
    return taken;
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
