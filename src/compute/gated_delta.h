// Gated DeltaNet (Qwen3.5 / Qwen3-Next linear attention) kernels: the causal depthwise
// convolution over q/k/v, the gates, and the recurrent delta-rule step over an f32 state.
// Shapes follow mlx-lm's gated_delta.py: state [Hv][Dv][Dk], a value head hv reads key head
// hv / (Hv / Hk), or hv % Hk when the value heads are tiled (llama.cpp's GGUF order).
#pragma once
#include <cstdint>

namespace rapid::compute {

struct GatedDeltaShape {
  int64_t k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0;
  bool tiled = false;
  int64_t state_floats() const { return v_heads * v_dim * k_dim; }
  int64_t k_head(int64_t hv) const { return tiled ? hv % k_heads : hv / (v_heads / k_heads); }
};

// n tokens of a depthwise causal convolution with kernel K over C channels, then SiLU.
// w is [C][K] (tap j multiplies the input K-1-j steps back); state holds the previous K-1 inputs
// [K-1][C], oldest first, and is advanced past the n tokens. x, out are [n][C] (no aliasing).
// Only channels [c0, c1) are read and written (state included), so disjoint channel ranges can
// run in parallel tasks; each channel's result is the same whatever range it is computed in.
void causal_conv1d_silu(const float* w, int64_t C, int64_t K, float* state, const float* x,
                        int64_t n, float* out, int64_t c0, int64_t c1);
inline void causal_conv1d_silu(const float* w, int64_t C, int64_t K, float* state, const float* x,
                               int64_t n, float* out) {
  causal_conv1d_silu(w, C, K, state, x, n, out, 0, C);
}

// x ← x · scale / sqrt(Σx² + eps) (the reference's l2norm with the readout scale folded in).
void l2norm_scaled(float* x, int64_t n, float scale, float eps);

// Per value head: beta = sigmoid(b) and the decay g = exp(log_g), log_g = -exp(A_log) · softplus(a + dt_bias).
void gated_delta_gates(const float* a, const float* b, const float* A_log, const float* dt_bias,
                       int64_t v_heads, float* log_g, float* beta);

// One token of the recurrence for value heads [h0, h1): with S = state of head hv,
//   S ← g·S;  δ = β·(v − S·k);  S ← S + δ kᵀ;  y = S·q
// q, k [Hk][Dk] (normalized), v [Hv][Dv], log_g/beta [Hv]; y [Hv][Dv].
void gated_delta_step(const GatedDeltaShape& s, const float* q, const float* k, const float* v,
                      const float* log_g, const float* beta, float* state, float* y, int64_t h0, int64_t h1);

// n tokens of one sequence through the recurrence, bitwise equal to n gated_delta_step calls
// (the rows of a state evolve independently, so blocks of rows run through all n tokens while
// they sit in L1). Operands laid out as for gated_delta_chunked below.
void gated_delta_recurrent(const GatedDeltaShape& s, const float* qkv, int64_t ld, const float* log_g,
                           const float* beta, int64_t n, float* state, float* y, int64_t ldy, int64_t h0,
                           int64_t h1);

// The same recurrence over n tokens of one sequence in the chunk-parallel (WY) form
// (gated_delta_chunk.cpp): equal to n gated_delta_step calls up to f32 rounding. Token t's q, k,
// v start at qkv + t*ld (q at 0, k at Hk*Dk, v at 2*Hk*Dk); log_g/beta [n][Hv]; y row t at
// y + t*ldy. Chunks of kGatedDeltaChunk tokens from the first of the n.
constexpr int64_t kGatedDeltaChunk = 64;
void gated_delta_chunked(const GatedDeltaShape& s, const float* qkv, int64_t ld, const float* log_g,
                         const float* beta, int64_t n, float* state, float* y, int64_t ldy, int64_t h0, int64_t h1);

// out = rms_norm(x, w) · silu(z) over one head of n values (the gated output norm).
void gated_rms_norm(const float* x, const float* z, const float* w, int64_t n, float eps, float* out);

namespace gdn {
// One token over `n_rows` consecutive state rows of one head (Dk floats each): for each row r,
// row ← g·row; d = β(v[r] − row·k); row += d·k; y[r] = row·q. The scalar form computes exactly
// that; the SIMD forms (gated_delta_rows.h) reorder it to read each row once for both dots and
// write it once, accumulate in 16 lanes and reduce them in one fixed tree, so AVX2 and AVX-512
// agree bitwise with each other (and with the scalar form up to f32 rounding).
// `cold`: the rows are not in cache (a hint: the SIMD forms prefetch ahead; results unchanged).
using RowsStep = void (*)(float* rows, int64_t n_rows, const float* k, const float* q, int64_t dk, float g,
                          const float* v, float beta, float* y, bool cold);
RowsStep rows_step_scalar();
RowsStep rows_step_avx2();
RowsStep rows_step_avx512();

// x ← x·sigmoid(x) over n values (the conv's and the gated norm's SiLU). The AVX-512 form takes
// e^-x from a polynomial (avx512_exp.h, ~1 ulp) instead of std::exp: not bitwise the scalar one,
// but the same per element whatever the batch, and the same in prefill and decode.
using Silu = void (*)(float* x, int64_t n);
Silu silu_scalar();
Silu silu_avx512();
}  // namespace gdn

}  // namespace rapid::compute
