// The arithmetic of witness-only slots (issue 31), on the device and, for the no-GPU tests
// (`splitprover_gpu_witness_check`), on the host from the same templates: one aux value
// unpacked from a packed witness, and one row of a pre-compiled matrix evaluated against the
// witness. The layouts are `kernels::witness` (packed witness, rank table) and `kernels::r1cs`
// (CSR matrices, coefficient ids); both are documented there.
#ifndef SPLITPROVER_WITNESS_CUH
#define SPLITPROVER_WITNESS_CUH

#include <cstddef>
#include <cstdint>
#include <vector>

// kernels::r1cs's coefficient ids of 1 and -1: no multiplication.
#define SP_ID_ONE 0u
#define SP_ID_MINUS_ONE 1u

__host__ __device__ __forceinline__ uint32_t sp_popc64(uint64_t x)
{
#ifdef __CUDA_ARCH__
    return (uint32_t)__popcll(x);
#else
    return (uint32_t)__builtin_popcountll(x);
#endif
}

// A field element's four 64-bit limbs (Montgomery form, fully reduced as blstrs keeps it): the
// comparisons below read them instead of the field type's `is_one`/`one()`, which read
// `__constant__` memory that nvcc's device-debug builds cannot fold.
template<class F> __host__ __device__ __forceinline__ const uint64_t* sp_limbs(const F& v)
{
    static_assert(sizeof(F) == 32, "a BLS12-381 scalar");
    return reinterpret_cast<const uint64_t*>(&v);
}

template<class F> __host__ __device__ __forceinline__ bool sp_same(const F& a, const F& b)
{
    const uint64_t *x = sp_limbs(a), *y = sp_limbs(b);
    return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

template<class F> __host__ __device__ __forceinline__ bool sp_is_zero(const F& a)
{
    const uint64_t* x = sp_limbs(a);
    return (x[0] | x[1] | x[2] | x[3]) == 0;
}

template<class F> __host__ __device__ __forceinline__ F sp_zero()
{
    F v;
    uint64_t* x = reinterpret_cast<uint64_t*>(&v);
    x[0] = x[1] = x[2] = x[3] = 0;
    return v;
}

// Aux variable `i` of a packed witness: `is_bit` marks the bit variables (one bit per aux
// variable), `bits_before[w]` counts the bit variables before word `w`, so `r` below is the
// number of bit variables before `i`: a bit variable is bit `r` of `bit_values` (`one` or
// zero), any other is `non_bits[i - r]`.
template<class F> __host__ __device__ __forceinline__
F sp_unpack_aux(size_t i, const uint64_t* is_bit, const uint64_t* bits_before,
                const uint64_t* bit_values, const F* non_bits, const F& one)
{
    size_t w = i >> 6;
    uint32_t b = (uint32_t)(i & 63);
    uint64_t word = is_bit[w];
    size_t r = (size_t)bits_before[w] + sp_popc64(word & ((1ull << b) - 1));
    if ((word >> b) & 1)
        return ((bit_values[r >> 6] >> (r & 63)) & 1) ? one : sp_zero<F>();
    return non_bits[i - r];
}

// Row `row` of a CSR matrix against w = (input, aux): each term packs its column (low 32 bits:
// an input below `n_inputs`, else aux `col - n_inputs`) and its coefficient id (high 32 bits,
// into `coeffs`; ids 0 and 1 are 1 and -1). A 0 or 1 value needs no multiplication: most
// witness values are bits. `terms` holds the matrix's terms from term `base` on (0: all of
// them; a streamed chunk's, `sp_row_chunk`).
template<class F> __host__ __device__ __forceinline__
F sp_eval_row(const uint64_t* row_start, const uint64_t* terms, uint64_t base, size_t row,
              const F* coeffs, const F* input, size_t n_inputs, const F* aux, const F& one)
{
    F acc = sp_zero<F>();
    for (uint64_t t = row_start[row], end = row_start[row + 1]; t < end; t++) {
        uint64_t term = terms[t - base];
        size_t col = (size_t)(uint32_t)term;
        uint32_t id = (uint32_t)(term >> 32);
        const F& v = col < n_inputs ? input[col] : aux[col - n_inputs];
        if (id == SP_ID_ONE)
            acc += v;
        else if (id == SP_ID_MINUS_ONE)
            acc -= v;
        else if (sp_same(v, one))
            acc += coeffs[id];
        else if (!sp_is_zero(v))
            acc += v * coeffs[id];
    }
    return acc;
}

// A run of a matrix's rows streamed as one piece (issue 32: matrices that do not stay on the
// device): rows [row0, row0 + rows), whose rows + 1 offsets and `terms` terms from term `t0`
// are copied into one staging buffer, offsets first.
struct sp_row_chunk {
    uint64_t row0, rows, t0, terms;
    size_t bytes() const { return (size_t)(rows + 1 + terms) * sizeof(uint64_t); }
};

// Cuts a CSR matrix of `rows` rows into chunks of at most `bytes` each, as many rows as fit
// (each chunk's end found by bisection: a chunk's bytes grow with its last row). False when one
// row alone does not fit.
static inline bool sp_row_chunks(const uint64_t* row_start, uint64_t rows, size_t bytes,
                                 std::vector<sp_row_chunk>& out)
{
    out.clear();
    auto size = [&](uint64_t r0, uint64_t r1) {   // rows [r0, r1)
        return (size_t)(r1 - r0 + 1 + row_start[r1] - row_start[r0]) * sizeof(uint64_t);
    };
    for (uint64_t r0 = 0; r0 < rows;) {
        if (size(r0, r0 + 1) > bytes)
            return false;
        uint64_t lo = r0 + 1, hi = rows;   // size(r0, lo) fits; find the last r1 that does
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo + 1) / 2;
            if (size(r0, mid) <= bytes)
                lo = mid;
            else
                hi = mid - 1;
        }
        out.push_back({r0, lo - r0, row_start[r0], row_start[lo] - row_start[r0]});
        r0 = lo;
    }
    return true;
}

// A circuit's matrices and witness layout as the host holds them (kernels::r1cs::R1cs,
// kernels::witness::WitnessLayout): what `splitprover_gpu_set_matrices` uploads and
// `splitprover_gpu_witness_check` reads. Mirrored field for field on the Rust side.
struct sp_matrices {
    const uint64_t* row_start[3];   // A, B, C: rows + 1 offsets each
    const uint64_t* terms[3];       // nnz[q] terms each
    uint64_t nnz[3];
    uint64_t rows;                  // n: constraints + inputs
    const void* coeffs;             // n_coeffs scalars (Montgomery), ids 0 and 1 are 1 and -1
    uint64_t n_coeffs;
    const uint64_t* is_bit;         // aux_words words
    const uint64_t* bits_before;    // aux_words + 1 entries
    uint64_t aux_words;
    uint64_t n_inputs, n_aux, n_bits;
    const uint64_t* density[3];     // A-aux, B-input, B-aux words (the shape's densities)
    uint64_t popcount[3];
};

#endif
