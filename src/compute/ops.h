// Element-wise and row-wise f32 operations of a transformer layer.
#pragma once
#include <cstdint>

namespace rapid::compute {

// out = x / rms(x) * (w or 1+w); x and out may alias. n elements.
void rms_norm(const float* x, const float* w, int64_t n, float eps, bool add_one, float* out);
// out = (x - mean) / sqrt(var + eps) * w + b (LayerNorm over n elements); x and out may alias.
void layer_norm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out);
// In-place softmax over n values (max-subtracted, f32).
void softmax(float* x, int64_t n);
// Σ x[i]² in double (the norms' reduction; eight chains, a fixed order).
double sum_squares(const float* x, int64_t n);
// out[i] = act(gate[i]) * up[i] with the active ISA's kernel (Kernels::silu_mul, gelu_tanh_mul).
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);
// gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, ±limit),
// out = g * sigmoid(alpha * g) * (u + 1).
void swiglu_oai_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);
// A gated MLP's activation, act(gate) * up.
struct GatedAct {
  enum Kind { Silu, GeluTanh, SwigluOai } kind = Silu;
  float alpha = 0, limit = 0;  // SwigluOai's
};
// Columns [r0, r1) of n tokens' gate and up rows (ld floats apart): g <- act(g + gate_bias) *
// (u + up_bias), element by element (biases may be null), so a matmul's region can apply it per
// chunk of output rows and any split gives the same values.
void gated_act_rows(const GatedAct& a, float* g, float* u, int64_t n, int64_t ld, int64_t r0, int64_t r1,
                    const float* gate_bias = nullptr, const float* up_bias = nullptr);
// x = x * Φ(x): the exact (erf) GELU of BERT's "gelu", in place.
void gelu_erf_inplace(float* x, int64_t n);
void add_inplace(float* y, const float* x, int64_t n);
void scale_inplace(float* y, float s, int64_t n);

}  // namespace rapid::compute
