// gpu_proof.cuh: one proof's issue: its copies, front half (full or compact layout),
// back half (graphs or kernel by kernel) and its finish on the host
// Part of gpu_prover.cu's one translation unit, included there in order after what it
// uses; not a standalone header.

// out = M w for matrix q (0, 1, 2: A, B, C) of the witness in input set `st`, on stream `s`:
// one kernel over the resident matrix, or chunk by chunk through the staging buffers when the
// matrices stream (each chunk's offsets and terms copied on the streaming stream, the kernel
// waiting for them, the buffer free again once it ran).
static void sp_issue_spmv(GpuContext& ctx, int q, fr_t* out, const sp_set& st, stream_t& s)
{
    const sp_dev_matrices& M = ctx.mat;
    const size_t n_inputs = ctx.lens.n_inputs;
    if (!M.streamed) {
        sp_spmv<<<sp_blocks(ctx, M.rows, 8), 256, 0, s>>>(
            out, M.rows, M.row_start[q].ptr, M.terms[q].ptr, 0, M.coeffs.ptr, st.input.ptr,
            n_inputs, st.aux.ptr);
        CUDA_OK(cudaGetLastError());
        return;
    }
    stream_t& c = *ctx.s_stream;
    for (const sp_row_chunk& ch : M.chunks[q]) {
        int slot = -1;
        auto* d = reinterpret_cast<uint64_t*>(sp_stage_begin(ctx, ch.bytes(), slot));
        CUDA_OK(cudaMemcpyAsync(d, M.host_row_start[q] + ch.row0, (ch.rows + 1) * 8,
                                cudaMemcpyHostToDevice, c));
        if (ch.terms)
            CUDA_OK(cudaMemcpyAsync(d + ch.rows + 1, M.host_terms[q] + ch.t0, ch.terms * 8,
                                    cudaMemcpyHostToDevice, c));
        sp_stage_landed(ctx, slot, s, ch.bytes());
        sp_spmv<<<sp_blocks(ctx, ch.rows, 8), 256, 0, s>>>(
            out + ch.row0, ch.rows, d, d + ch.rows + 1, ch.t0, M.coeffs.ptr, st.input.ptr,
            n_inputs, st.aux.ptr);
        CUDA_OK(cudaGetLastError());
        sp_consumed(ctx, slot, s);
    }
}

// A witness-only proof's inputs on the copy stream (issue 31): the inputs, then the packed aux
// staged in the third of `abc` that c takes later (b's in the compact layout), unpacked into
// the set's aux; the density words from the resident matrices; then a = A w, b = B w and c = C w
// (the compact layout makes c in its front half), each vector's event recorded as its copy's
// would be. A product overwrites the staging only after the unpack read it (one stream).
// Kernels on this stream share the SMs with the previous proof's MSMs.
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
        sp_issue_spmv(ctx, q, st.abc.ptr + q * dom, st, s);
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

// v's first `len` values (a, b or c at the domain's points) zero-padded to the domain, then
// taken to the coset's points: an inverse NTT and a coset NTT, on stream s.
static void sp_to_coset(GpuContext& ctx, fr_t* v, size_t len, stream_t& s)
{
    if (len < ctx.domain)
        CUDA_OK(cudaMemsetAsync(v + len, 0, (ctx.domain - len) * sizeof(fr_t), s));
    sp_ntt::NTT_internal(v, ctx.lg_domain, NTT::InputOutputOrder::NR, NTT::Direction::inverse,
                         NTT::Type::standard, s);
    sp_ntt::NTT_internal(v, ctx.lg_domain, NTT::InputOutputOrder::RN, NTT::Direction::forward,
                         NTT::Type::coset, s);
}

// The quotient's coefficients in a's place, a holding a * b on the coset: (a * b - c) / Z
// there, then an inverse coset NTT, on stream m.
static void sp_quotient(GpuContext& ctx, fr_t* d_ab, const fr_t* d_c, stream_t& m)
{
    sp_sub_scale<<<ctx.sms, 1024, 0, m>>>(d_ab, d_c, ctx.z_inv, ctx.domain);
    sp_check_launch();
    sp_ntt::NTT_internal(d_ab, ctx.lg_domain, NTT::InputOutputOrder::NN, NTT::Direction::inverse,
                         NTT::Type::coset, m);
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
    sp_to_coset(ctx, d_a, a.abc_len, m);
    sp_to_coset(ctx, d_b, a.abc_len, *ctx.s_n1);
    sp_fork(ctx.ev_join1, *ctx.s_n1, m);
    sp_mul_assign<<<ctx.sms, 1024, 0, m>>>(d_a, d_b, dom);
    sp_check_launch();
    if (a.witness) {
        sp_issue_spmv(ctx, 2, d_b, st, m);
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
    sp_to_coset(ctx, d_b, a.abc_len, m);
    sp_quotient(ctx, d_a, d_b, m);
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
    for (int i = 0; i < 3; i++)   // (the copy wrote the first abc_len)
        sp_to_coset(ctx, dd[i], a.abc_len, *ss[i]);
    sp_fork(ctx.ev_join1, *ctx.s_n1, m);
    sp_fork(ctx.ev_join2, *ctx.s_n2, m);
    sp_mul_assign<<<ctx.sms, 1024, 0, m>>>(d_a, d_b, dom);
    sp_check_launch();
    sp_quotient(ctx, d_a, d_c, m);
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
// With `ctx.beside` the four MSMs go on `s_lab`, beside the quotient's NTTs still running on
// the compute stream: they need the gathers and splits alone, done once the host saw
// `counted` (which also follows the previous proof's whole back half on the compute stream),
// and H waits for them (one MSM scratch).
static void sp_issue_back_kernels(GpuContext& ctx, int set, sp_flight& fl,
                                  const sp_back_key& key, sp_job_rec* rec)
{
    stream_t& m = *ctx.s_main;
    stream_t& lab = ctx.beside ? *ctx.s_lab : m;
    cudaStream_t side = ctx.s_side;
    const sp_srs& L = ctx.lens;
    sp_set& st = ctx.sets[set];
    const sp_layout& lay = ctx.lay;
    ctx.stream_mark = lay.streams() ? &fl.stream0 : nullptr;
    if (ctx.beside)
        CUDA_OK(cudaStreamWaitEvent(lab, fl.counted, 0));
    const size_t c1 = lay.stage_g1, c2 = lay.stage_g2;   // chunk points
    const fr_t* sc_a = sp_scalars(ctx, set, 1);
    const fr_t* sc_b = sp_scalars(ctx, set, 2);
    // query q's MSM: in pieces (compact layout, `bounds` from the flight's counts) or whole
    auto msm = [&](auto& job, auto* d_part, const auto& src, size_t chunk, const fr_t* sc,
                   size_t n, int q, auto* tail_pts, size_t tail_cap, bool scalars_ready) {
        if (key.tail[q] == SP_PIECES)
            return sp_msm_pieces(ctx, job, d_part, src, chunk, sc, n, q,
                                 sp_bounds(fl.counts, q), tail_pts, tail_cap, lab);
        return sp_msm_query(ctx, job, d_part, src, chunk, sc, n, q, key.tail[q], tail_pts,
                            scalars_ready, lab);
    };
    rec[SP_JOB_L] = msm(ctx.job_g1[SP_JOB_L], ctx.d_part_g1.ptr, sp_src_g1(ctx, SP_Q_L), c1,
                        st.aux.ptr, L.n_l, 0, ctx.d_tail_g1.ptr, ctx.d_tail_g1.len, false);
    sp_record_ext(ctx, fl.ev[EV_L], lab);
    rec[SP_JOB_A] = msm(ctx.job_g1[SP_JOB_A], ctx.d_part_g1.ptr, sp_src_g1(ctx, SP_Q_A), c1,
                        sc_a, L.n_a, 1, ctx.d_tail_g1.ptr, ctx.d_tail_g1.len, false);
    sp_record_ext(ctx, fl.ev[EV_A], lab);
    rec[SP_JOB_B1] = msm(ctx.job_g1[SP_JOB_B1], ctx.d_part_g1.ptr, sp_src_g1(ctx, SP_Q_B1), c1,
                         sc_b, L.n_b, 2, ctx.d_tail_g1.ptr, ctx.d_tail_g1.len, false);
    sp_record_ext(ctx, fl.ev[EV_B1], lab);
    // the same split serves G2 (the tail scalars gathered for B_G1 are still in place, unless
    // taken in pieces: each piece gathers its own)
    rec[SP_JOB_B2] = msm(ctx.job_g2, ctx.d_part_g2.ptr,
                         sp_src<affine_fp2_t>{ctx.d_b_g2.ptr, L.b_g2, lay.res[SP_Q_B2]}, c2,
                         sc_b, L.n_b, 2, ctx.d_tail_g2.ptr, ctx.d_tail_g2.len, true);
    sp_record_ext(ctx, fl.ev[EV_B2], lab);

    // The side stream: the four MSMs' final sums (each job's accumulators and result area are
    // its own, which the H MSM does not touch), then `sp_side`.
    CUDA_OK(cudaEventRecord(ctx.ev_side_fork, lab));
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

    // H: the first domain - 1 coefficients (the last is zero for a valid witness), once the
    // quotient is done and the other MSMs left the scratch
    if (ctx.beside)
        sp_fork(ctx.ev_lab_join, lab, m);
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
            sp_bounds(fl.counts, q)[ctx.lay.pieces(nq[q])] = (uint32_t)big;
        }
    }
    sp_job_rec rec[SP_JOBS];
    rec[SP_JOB_H].nwins = fl.nwins[SP_JOB_H];
    rec[SP_JOB_H].wbits = fl.wbits[SP_JOB_H];
    rec[SP_JOB_H].pippenger = true;
    // the diagnostic reads the accumulators after each proof: kernel by kernel
    // a back half that streams SRS chunks (copies on another stream from host memory) is
    // launched kernel by kernel: at the sizes that stream, launches are a small cost
    // with `beside` its first four MSMs run beside the NTTs that the front half's graph left
    // running on the compute stream: kernel by kernel on their own stream
    bool graph = ctx.graphs && !ctx.beside && !ctx.lay.streams() && !host_sums
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
    // beside the NTTs (`ctx.beside`) L starts once the splits are counted, and H once the later
    // of the NTTs and B_G2 is done
    ph.msm_l = sp_elapsed(e[ctx.beside ? EV_GATHER : EV_NTT], e[EV_L]);
    ph.msm_a = sp_elapsed(e[EV_L], e[EV_A]);
    ph.msm_b_g1 = sp_elapsed(e[EV_A], e[EV_B1]);
    ph.msm_b_g2 = sp_elapsed(e[EV_B1], e[EV_B2]);
    bool ntt_last = ctx.beside && sp_elapsed(e[EV_B2], e[EV_NTT]) > 0;
    ph.msm_h = sp_elapsed(e[ntt_last ? EV_NTT : EV_B2], e[EV_H]);
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

