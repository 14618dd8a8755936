// gpu_layout.cuh: the FFI types (mirrored in kernels/src/backend/gpu.rs), the MSM plans
// and `sp_layout`, the one size function behind both the planner's figures and the allocation
// Part of gpu_prover.cu's one translation unit, included there in order after what it
// uses; not a standalone header.

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
// `matrices` nonzero: a witness-only circuit's matrix rows stream through the staging buffers
// too (`sp_issue_spmv`), which are then allocated even where every query is resident.
struct sp_residency {
    size_t resident[SP_QUERIES];
    size_t stage_bytes;
    size_t piece;
    size_t matrices;
};

struct sp_options {
    int double_buffer;   // 0: one input set (no copy overlap); otherwise two where memory allows
    uint32_t wbits_h;    // 0: sppark's window size for the H MSM; otherwise 10..=18
    uint32_t chunks_h;   // 0: sppark's chunking of the H MSM; otherwise 1..=64 chunks
    int no_graphs;       // nonzero: launch the front half kernel by kernel (no CUDA graph)
    int finish;          // 0: on the device from 2^20 up (SP_DEVICE_FINISH_LG); 1: device; 2: host
    int beside;          // L/A/B MSMs beside the NTTs: 0 from 2^26 up (SP_BESIDE_LG); 1: on; 2: off
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
    // The compact layout's pieces of a query of n points.
    size_t pieces(size_t n) const { return (n + piece - 1) / piece; }

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

// Query q's piece bounds in a flight's counts.
static uint32_t* sp_bounds(uint32_t* counts, int q)
{
    return counts + SP_BOUNDS + q * (SP_MAX_PIECES + 1);
}

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
    if (streams || (r && r->matrices)) {
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
    // once) and two bits more per window than sppark's choice, at most 16, from 2^19 points up:
    // 14 bits at 2^20, 15 at 2^21, 16 from 2^22. The window sweeps of `gpu_check --wbits-h`
    // (benchmarks/2026-12-01-h200/NOTES.md, benchmarks/2026-12-06-h100-windows/NOTES.md) chose them: one chunk beat sppark's chunks at 2^20, and with one
    // integration per MSM these windows were the fastest (or within 0.1 %) at 2^21, 2^22 and
    // 2^24, 16 bits beating 14 by 8 % at 2^22 and 17 % at 2^24, the same bytes.
    if (!wbits_h && !chunks_h && s.n_h >= ((size_t)1 << 19)) {
        wbits_h = std::min(sp_plan(s.n_h).wbits + 2, 16u);
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

