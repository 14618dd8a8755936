// gpu_msm.cuh: the MSM drivers on the host side: scans and gathers, SRS chunks fetched
// through the staging buffers, Pippenger over sppark's kernels, a query's MSM whole or in pieces
// Part of gpu_prover.cu's one translation unit, included there in order after what it
// uses; not a standalone header.

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
        CUDA_OK(cudaMemcpy2DAsync(sp_bounds(counts, q), sizeof(uint32_t), sb.tiles.ptr,
                                  ctx.lay.piece / SP_CHUNK_ALIGN * sizeof(uint32_t),
                                  sizeof(uint32_t), ctx.lay.pieces(n), cudaMemcpyDeviceToHost,
                                  s));
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

// The next staging buffer, for a chunk of `bytes` copied on the streaming stream once the
// buffer's previous chunk is consumed (the copies follow on `ctx.s_stream`; then
// `sp_stage_landed`). `slot` gets the buffer, for `sp_consumed`.
static unsigned char* sp_stage_begin(GpuContext& ctx, size_t bytes, int& slot)
{
    if (!ctx.lay.streams() || bytes > ctx.stage[0].bytes())
        throw cuda_error{cudaErrorInvalidValue,
                         std::string("a streamed chunk exceeds the staging buffers sized for it")};
    slot = (int)(ctx.stage_next++ & 1);
    stream_t& c = *ctx.s_stream;
    CUDA_OK(cudaStreamWaitEvent(c, ctx.consumed[slot], 0));
    if (ctx.stream_mark) {
        CUDA_OK(cudaEventRecord(*ctx.stream_mark, c));
        ctx.stream_mark = nullptr;
    }
    return ctx.stage[slot].ptr;
}

// The chunk's copies into buffer `slot` are issued: stream `s` waits for them to land.
static void sp_stage_landed(GpuContext& ctx, int slot, stream_t& s, size_t bytes)
{
    CUDA_OK(cudaEventRecord(ctx.landed[slot], *ctx.s_stream));
    CUDA_OK(cudaStreamWaitEvent(s, ctx.landed[slot], 0));
    ctx.streamed_total += bytes;
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
    if (!src.host)
        throw cuda_error{cudaErrorInvalidValue,
                         std::string("a streamed chunk has no host image to come from")};
    unsigned char* d = sp_stage_begin(ctx, bytes, slot);
    CUDA_OK(cudaMemcpyAsync(d, src.host + off, bytes, cudaMemcpyHostToDevice, *ctx.s_stream));
    sp_stage_landed(ctx, slot, s, bytes);
    return reinterpret_cast<const A*>(d);
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
// their sort, the batch addition of window 0's +-1 digits (its partial sums added into the job's
// accumulators chunk by chunk) and the bucket accumulation, every chunk adding into the same
// buckets (`sp_accumulate`); then one row integration, whose row sums are added into the job's
// accumulators (the first chunk's partial sums and the row sums overwrite them when `fresh`).
// All on stream s, nothing waited for. `coop_blocks` (0: one per SM) is the grid of the bucket
// accumulation, a cooperative launch whose blocks must all be resident at once: one SM fewer
// leaves room for `sp_side`'s block, which runs beside the H MSM for milliseconds.
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
    if (!p.n)
        return;

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
        s.launch_coop(sp_accumulate<B, affine_h>, dim3(coop_blocks ? coop_blocks : ctx.sms),
                      sp_acc_block<B>(ctx), (size_t)0,
                      buckets, p.nwins, p.wbits, pts, digits, hist, ctx.sid, c != 0);
        sp_consumed(ctx, slot, s);
        // this chunk's +-1 digits (no windows: nwins 0)
        sp_fold<B><<<sp_blocks(ctx, (size_t)nparts * B::degree, 4), 256, 0, s>>>(
            job.acc_w.ptr, buckets, row_sz, 0, job.acc_ones.ptr, d_part, (uint32_t)nparts,
            fresh && c == 0);
        sp_check_launch();
    }
    integrate<B><<<p.nwins, MSM_NTHREADS, sizeof(B) * MSM_NTHREADS / B::degree, s>>>(
        buckets, p.nwins, p.wbits, nbits);
    sp_check_launch();
    // the row sums (no partial sums: nparts 0)
    size_t items = (size_t)p.nwins * 2 * SP_NT(B) * B::degree;
    sp_fold<B><<<sp_blocks(ctx, items, 4), 256, 0, s>>>(job.acc_w.ptr, buckets, row_sz,
        p.nwins, job.acc_ones.ptr, d_part, 0, fresh);
    sp_check_launch();
}

// The batch addition of query q's points [p0, p0 + len), point p0 being `src`'s first: its
// resident part in one go, then chunks of at most `stage` points (whole tiles, as the resident
// prefix: `sp_layout_of`), adding to what `job.split` holds when `accumulate` (else starting
// it). With `tail_pts`, each chunk's points whose scalar is big are gathered into it, the first
// at index `base` (the big count before p0).
template<class B, class A>
static void sp_split_run(GpuContext& ctx, sp_job_buf<B>& job, const sp_src<A>& src, int q,
                         size_t p0, size_t len, size_t stage, bool accumulate, A* tail_pts,
                         size_t base, stream_t& s)
{
    typedef typename A::mem_t affine_h;
    const sp_split_buf& sb = ctx.split[q];
    for (size_t off = 0; off < len;) {
        size_t num = off < src.resident ? std::min(len, src.resident) - off
                                        : std::min(stage, len - off);
        int slot;
        const affine_h* pts = (const affine_h*)sp_fetch(ctx, src, off, num, s, slot);
        s.launch_coop(batch_addition<B>, dim3(ctx.sms), dim3(BATCH_ADD_BLOCK_SIZE),
                      (size_t)0, job.split.ptr, pts, (uint32_t)num,
                      (const uint32_t*)sb.ones.ptr + (p0 + off) / 32, accumulate || off != 0,
                      ctx.sid);
        if (tail_pts) {
            size_t w0 = (p0 + off) / 64;
            sp_gather_launch(ctx, (affine_h*)tail_pts, pts, sb.big.ptr + w0, sp_words(num),
                             sb.offsets.ptr + w0, sb.tiles.ptr + w0 / SP_TILE, s, base);
        }
        sp_consumed(ctx, slot, s);
        off += num;
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
    sp_split_run(ctx, job, src, q, 0, n, stage, false, tail ? tail_pts : nullptr, 0, s);
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
    sp_job_rec rec;
    const size_t piece = ctx.lay.piece;
    if (!n || !piece)
        return rec;
    const size_t npieces = ctx.lay.pieces(n);
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
        sp_split_run(ctx, job, sub, q, p0, len, stage, rec.split, big ? tail_pts : nullptr,
                     bounds[k], s);
        rec.split = true;
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

