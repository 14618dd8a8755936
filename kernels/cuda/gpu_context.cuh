// gpu_context.cuh: device buffers, a proof's flight and `GpuContext`, with the event
// and error helpers the entry points share
// Part of gpu_prover.cu's one translation unit, included there in order after what it
// uses; not a standalone header.

// Device memory that frees itself; sized in elements of T.
template<class T> struct sp_buf {
    T* ptr = nullptr;
    size_t len = 0;
    void alloc(size_t n)
    {
        len = n;
        if (n) CUDA_OK(cudaMalloc(&ptr, n * sizeof(T)));
    }
    void reset()
    {
        if (ptr) (void)cudaFree(ptr);
        ptr = nullptr;
        len = 0;
    }
    ~sp_buf() { reset(); }
    size_t bytes() const { return len * sizeof(T); }
};

class sp_ntt : public NTT {
public:
    using NTT::NTT_internal;
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

// A circuit's matrices resident on the device, for witness-only proofs
// (`splitprover_gpu_set_matrices`): each of A, B, C in CSR, the coefficients, the witness
// layout's bitmap and rank table, the shape's density words (A-aux, B-input, B-aux, in the
// order of an input set's `words`).
struct sp_dev_matrices {
    sp_buf<uint64_t> row_start[3], terms[3];   // empty when streamed
    sp_buf<fr_t> coeffs;
    sp_buf<uint64_t> is_bit, bits_before, words;
    size_t rows = 0, n_bits = 0;
    size_t popcount[3] = {};
    bool ready = false;
    // Streamed (issue 32, a budget the resident matrices do not fit): each proof copies A's,
    // B's and C's rows and terms from the host arrays (kept page-locked, the caller keeping
    // them alive) through the SRS staging buffers, in `chunks` of at most one buffer each.
    bool streamed = false;
    const uint64_t* host_row_start[3] = {};
    const uint64_t* host_terms[3] = {};
    std::vector<sp_row_chunk> chunks[3];
    std::vector<std::unique_ptr<sp_host_lock>> locks;
    // Back to nothing uploaded (a failed upload is tried again from scratch).
    void reset()
    {
        for (int q = 0; q < 3; q++) {
            row_start[q].reset();
            terms[q].reset();
            chunks[q].clear();
            host_row_start[q] = host_terms[q] = nullptr;
        }
        coeffs.reset();
        is_bit.reset();
        bits_before.reset();
        words.reset();
        locks.clear();
        streamed = ready = false;
    }
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
    // `sp_accumulate` and sppark's bitmap batch addition keep a work counter in a static device
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
    // With `beside`, the L, A, B_G1 and B_G2 MSMs run on `s_lab` while the quotient's NTTs run
    // on the main stream (the NTTs stream memory, the MSMs multiply); the H MSM, on the main
    // stream, waits for both (`ev_lab_join`): they share the MSM scratch.
    std::unique_ptr<stream_t> s_lab;
    bool beside = false;
    cudaEvent_t ev_lab_join = nullptr;
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
        for (auto* s : {s_main.get(), s_n1.get(), s_n2.get(), s_copy.get(), s_stream.get(),
                        s_lab.get()})
            if (s) (void)cudaStreamSynchronize(*s);
        if (s_side) {
            (void)cudaStreamSynchronize(s_side);
            (void)cudaStreamDestroy(s_side);
        }
        for (cudaEvent_t e : {ev_fork, ev_join1, ev_join2, ev_side_fork, ev_side_join,
                              ev_lab_join, ev_batch, released[0], released[1], landed[0],
                              landed[1], consumed[0], consumed[1]})
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

// From this domain size up (lg2) the L, A, B_G1 and B_G2 MSMs run beside the quotient's NTTs by
// default (`GpuContext::beside`, not in the compact layout, whose A and B scalars live where the
// NTTs work): a little less device time per proof at 2^27, none saved at 2^24
// (benchmarks/2026-12-07-h100-gpu-vs-supraseal/NOTES.md), where the back half stays one graph launch after the front half's.
#define SP_BESIDE_LG 26

// Device memory left free beside a second input set (NTT twiddles, the runtime's own needs).
static const size_t SP_RESERVE = (size_t)1 << 30;

static std::atomic<uint32_t> sp_next_sid{0};
