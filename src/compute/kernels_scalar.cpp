// Portable reference kernels; also the semantics every SIMD kernel must reproduce.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compute/kernels.h"
#include "tensor/fp16.h"
#include "tensor/mxfp4.h"

namespace rapid::compute {
namespace {

float dot_f32(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
float dot_f16(const float* x, const uint16_t* w, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * tensor::f16_to_f32(w[i]);
  return s;
}
float dot_bf16(const float* x, const uint16_t* w, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * tensor::bf16_to_f32(w[i]);
  return s;
}
void axpy_f32(float a, const float* v, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * v[i];
}
void axpy_f16(float a, const uint16_t* v, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * tensor::f16_to_f32(v[i]);
}
void axpy_bf16(float a, const uint16_t* v, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * tensor::bf16_to_f32(v[i]);
}
void to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tensor::f32_to_f16(x[i]);
}
void to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tensor::f32_to_bf16(x[i]);
}

void from_f16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tensor::f16_to_f32(x[i]);
}
void from_bf16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tensor::bf16_to_f32(x[i]);
}

void quantize_act(const float* x, int64_t n, tensor::ActQ8* out) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    float d = amax / 127.0f, id = d != 0 ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      int q = static_cast<int>(std::nearbyint(x[j] * id));
      out[b].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = d;
    out[b].sum = sum;
  }
}

// The loop every scalar GGML dot shares: for each of the nt activation rows, add one weight
// block's contribution at a time (`add(acc, block, activations)`, the block's kPer activation
// blocks starting at `activations`), in block order.
template <class B, int kPer = 1, class Add>
void dot_rows(const void* wv, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out, Add add) {
  auto* w = static_cast<const B*>(wv);
  for (int t = 0; t < nt; ++t) {
    float acc = 0;
    for (int64_t i = 0; i < nb; ++i) add(acc, w[i], x + t * xs + i * kPer);
    out[t] = acc;
  }
}

void dot_q4_0(const void* wv, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  dot_rows<tensor::BlockQ4_0>(wv, x, xs, nb, nt, out, [](float& acc, const tensor::BlockQ4_0& w, const tensor::ActQ8* a) {
    int s = 0;
    for (int j = 0; j < 16; ++j) s += ((w.qs[j] & 0x0f) - 8) * a->qs[j] + ((w.qs[j] >> 4) - 8) * a->qs[j + 16];
    acc += tensor::f16_to_f32(w.d) * a->d * s;
  });
}

void dot_q4_1(const void* wv, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  dot_rows<tensor::BlockQ4_1>(wv, x, xs, nb, nt, out, [](float& acc, const tensor::BlockQ4_1& w, const tensor::ActQ8* a) {
    int s = 0;
    for (int j = 0; j < 16; ++j) s += (w.qs[j] & 0x0f) * a->qs[j] + (w.qs[j] >> 4) * a->qs[j + 16];
    acc += tensor::f16_to_f32(w.d) * a->d * s + tensor::f16_to_f32(w.m) * a->d * a->sum;
  });
}

void dot_q8_0(const void* wv, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  dot_rows<tensor::BlockQ8_0>(wv, x, xs, nb, nt, out, [](float& acc, const tensor::BlockQ8_0& w, const tensor::ActQ8* a) {
    int s = 0;
    for (int j = 0; j < 32; ++j) s += w.qs[j] * a->qs[j];
    acc += tensor::f16_to_f32(w.d) * a->d * s;
  });
}

// Q4_K and Q5_K: sub-block j = nibble half j&1 of qs[32*(j/2)..]; Q5_K adds a 5th bit, bit j of qh[l].
template <class B, bool kFifthBit>
void dot_k4(const void* wv, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  dot_rows<B, 8>(wv, x, xs, nb, nt, out, [](float& acc, const B& w, const tensor::ActQ8* a8) {
    float d = tensor::f16_to_f32(w.d), dmin = tensor::f16_to_f32(w.dmin);
    for (int j = 0; j < 8; ++j) {
      const tensor::ActQ8& a = a8[j];
      const uint8_t* q = w.qs + 32 * (j / 2);
      int sc, mn, s = 0;
      tensor::scale_min_k4(j, w.scales, sc, mn);
      for (int l = 0; l < 32; ++l) {
        int v = (j & 1) ? (q[l] >> 4) : (q[l] & 0x0f);
        if constexpr (kFifthBit) v |= ((w.qh[l] >> j) & 1) << 4;
        s += v * a.qs[l];
      }
      acc += d * sc * a.d * s - dmin * mn * a.d * a.sum;
    }
  });
}

void dot_q6_k(const void* wv, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  dot_rows<tensor::BlockQ6_K, 8>(wv, x, xs, nb, nt, out, [](float& acc, const tensor::BlockQ6_K& w, const tensor::ActQ8* a8) {
    float d = tensor::f16_to_f32(w.d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = w.ql + 64 * half;
      const uint8_t* qh = w.qh + 32 * half;
      const int8_t* sc = w.scales + 8 * half;
      for (int b = 0; b < 4; ++b) {  // 32-element block b of this half
        const tensor::ActQ8& a = a8[half * 4 + b];
        int s0 = 0, s1 = 0;
        for (int l = 0; l < 32; ++l) {
          int lo = (b & 1) ? ql[l + 32] : ql[l];
          int v = ((b & 2) ? (lo >> 4) : (lo & 0x0f)) | (((qh[l] >> (2 * b)) & 3) << 4);
          (l < 16 ? s0 : s1) += (v - 32) * a.qs[l];
        }
        acc += d * a.d * (sc[2 * b] * s0 + sc[2 * b + 1] * s1);
      }
    }
  });
}

// Q5_0 / Q5_1: the 5th bit of element e is bit e of qh (low nibbles hold elements 0..15, high
// nibbles 16..31). Values stay unsigned (0..31) so the integer sum is u·x; Q5_0's -16 offset and
// Q5_1's min come back through the activation sum, as for Q4_0 / Q4_1.
inline int q5_sum(const uint8_t* qs, const uint8_t* qhb, const int8_t* xq) {
  uint32_t qh;
  std::memcpy(&qh, qhb, 4);
  int s = 0;
  for (int j = 0; j < 16; ++j)
    s += ((qs[j] & 0x0f) | (((qh >> j) & 1) << 4)) * xq[j] + ((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) * xq[j + 16];
  return s;
}

void dot_q5_0(const void* wv, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  dot_rows<tensor::BlockQ5_0>(wv, x, xs, nb, nt, out, [](float& acc, const tensor::BlockQ5_0& w, const tensor::ActQ8* a) {
    acc += tensor::f16_to_f32(w.d) * a->d * (q5_sum(w.qs, w.qh, a->qs) - 16 * a->sum);
  });
}

void dot_q5_1(const void* wv, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  dot_rows<tensor::BlockQ5_1>(wv, x, xs, nb, nt, out, [](float& acc, const tensor::BlockQ5_1& w, const tensor::ActQ8* a) {
    acc += tensor::f16_to_f32(w.d) * a->d * q5_sum(w.qs, w.qh, a->qs) + tensor::f16_to_f32(w.m) * a->d * a->sum;
  });
}

// Scalar MLX dots work on the natural element order for 8 bits and on nibble order for 4 bits
// (the same activation layout the SIMD kernels get).
void dot_mlx4(const uint8_t* w, const float* sc, const float* bi, int gs, const tensor::ActQ8* x, int64_t xs,
              int64_t nb, int nt, const float* gsum, float* out) {
  const int bpg = gs / 32;
  for (int t = 0; t < nt; ++t) {
    float acc = 0;
    for (int64_t b = 0; b < nb; ++b) {
      const tensor::ActQ8& a = x[t * xs + b];
      const uint8_t* q = w + b * 16;
      int s = 0;
      for (int j = 0; j < 16; ++j) s += (q[j] & 0x0f) * a.qs[j] + (q[j] >> 4) * a.qs[j + 16];
      acc += sc[b / bpg] * a.d * s;
    }
    const int64_t groups = nb / bpg;
    for (int64_t g = 0; g < groups; ++g) acc += bi[g] * gsum[t * groups + g];
    out[t] = acc;
  }
}

void dot_mlx8(const uint8_t* w, const float* sc, const float* bi, int gs, const tensor::ActQ8* x, int64_t xs,
              int64_t nb, int nt, const float* gsum, float* out) {
  const int bpg = gs / 32;
  for (int t = 0; t < nt; ++t) {
    float acc = 0;
    for (int64_t b = 0; b < nb; ++b) {
      const tensor::ActQ8& a = x[t * xs + b];
      const uint8_t* q = w + b * 32;
      int s = 0;
      for (int j = 0; j < 32; ++j) s += q[j] * a.qs[j];
      acc += sc[b / bpg] * a.d * s;
    }
    const int64_t groups = nb / bpg;
    for (int64_t g = 0; g < groups; ++g) acc += bi[g] * gsum[t * groups + g];
    out[t] = acc;
  }
}

void dot_mxfp4(const uint8_t* w, const uint8_t* e, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  for (int t = 0; t < nt; ++t) {
    float acc = 0;
    for (int64_t b = 0; b < nb; ++b) {
      const tensor::ActQ8& a = x[t * xs + b];
      const uint8_t* q = w + b * tensor::mxfp4::kBlockBytes;
      int s = 0;
      for (int j = 0; j < 16; ++j)
        s += tensor::mxfp4::kTwiceE2M1[q[j] & 0x0f] * a.qs[j] + tensor::mxfp4::kTwiceE2M1[q[j] >> 4] * a.qs[j + 16];
      acc += 0.5f * tensor::mxfp4::e8m0_to_f32(e[b]) * a.d * s;
    }
    out[t] = acc;
  }
}

// Element i of a nibble-order activation block (permute_act_for_mlx4) is at qs[nibble_pos(i)].
constexpr int nibble_pos(int i) { return (i & 1) * 16 + i / 2; }

// The integer sum is dot_mxfp4's (exact, so its order does not matter), the float step the same.
void dot_mxfp4_ggml(const void* wv, const tensor::ActQ8* x, int64_t xs, int64_t nb, int nt, float* out) {
  using B = tensor::BlockMXFP4;
  dot_rows<B>(wv, x, xs, nb, nt, out, [](float& acc, const B& w, const tensor::ActQ8* a) {
    int s = 0;
    for (int j = 0; j < 16; ++j)
      s += tensor::mxfp4::kTwiceE2M1[w.qs[j] & 0x0f] * a->qs[nibble_pos(j)] +
           tensor::mxfp4::kTwiceE2M1[w.qs[j] >> 4] * a->qs[nibble_pos(j + 16)];
    acc += 0.5f * tensor::mxfp4::e8m0_to_f32(w.e) * a->d * s;
  });
}

}  // namespace

void permute_act_for_mlx4(tensor::ActQ8* blocks, int64_t n) {
  for (int64_t b = 0; b < n; ++b) {
    int8_t tmp[32];
    for (int j = 0; j < 16; ++j) {
      tmp[j] = blocks[b].qs[2 * j];
      tmp[j + 16] = blocks[b].qs[2 * j + 1];
    }
    std::memcpy(blocks[b].qs, tmp, 32);
  }
}

static int64_t argmax_f32(const float* x, int64_t n) { return std::max_element(x, x + n) - x; }

static void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

static void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i], a = g * (kGeluTanhA + kGeluTanhB * (g * g));
    out[i] = g / (1.0f + std::exp(-a)) * up[i];
  }
}

void fill_kernels_scalar(Kernels& k) {
  k.argmax_f32 = argmax_f32;
  k.silu_mul = silu_mul;
  k.gelu_tanh_mul = gelu_tanh_mul;
  k.dot_f32 = dot_f32;
  k.dot_f16 = dot_f16;
  k.dot_bf16 = dot_bf16;
  k.axpy_f32 = axpy_f32;
  k.axpy_f16 = axpy_f16;
  k.axpy_bf16 = axpy_bf16;
  k.f32_to_f16 = to_f16;
  k.f32_to_bf16 = to_bf16;
  k.f16_to_f32 = from_f16;
  k.bf16_to_f32 = from_bf16;
  k.quantize_act = quantize_act;
  k.dot_q4_0 = dot_q4_0;
  k.dot_q4_1 = dot_q4_1;
  k.dot_q8_0 = dot_q8_0;
  k.dot_q4_k = dot_k4<tensor::BlockQ4_K, false>;
  k.dot_q6_k = dot_q6_k;
  k.dot_q5_0 = dot_q5_0;
  k.dot_q5_1 = dot_q5_1;
  k.dot_q5_k = dot_k4<tensor::BlockQ5_K, true>;
  k.dot_mlx4 = dot_mlx4;
  k.dot_mlx8 = dot_mlx8;
  k.dot_mxfp4 = dot_mxfp4;
  k.dot_mxfp4_ggml = dot_mxfp4_ggml;
}

static Kernels build(Isa isa) {
  Kernels k{};
  fill_kernels_scalar(k);
  if (isa >= Isa::Avx2) fill_kernels_avx2(k);
  if (isa >= Isa::Avx512) fill_kernels_avx512(k);
  if (isa >= Isa::Avx512 && cpu_features().amx_int8) fill_panel_amx(k);
  return k;
}

const Kernels& kernels_for(Isa isa) {
  static const Kernels tables[3] = {build(Isa::Scalar),
                                    best_isa() >= Isa::Avx2 ? build(Isa::Avx2) : build(Isa::Scalar),
                                    best_isa() >= Isa::Avx512 ? build(Isa::Avx512)
                                    : best_isa() >= Isa::Avx2 ? build(Isa::Avx2)
                                                              : build(Isa::Scalar)};
  int i = static_cast<int>(isa);
  int b = static_cast<int>(best_isa());
  return tables[i < b ? i : b];
}

const Kernels& kernels() { return kernels_for(active_isa()); }

}  // namespace rapid::compute
