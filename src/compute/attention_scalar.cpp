// Portable inner loops of the chunked attention (reference for the SIMD versions).
#include <cmath>
#include <cstring>

#include "compute/attention_impl.h"
#include "tensor/fp16.h"

namespace rapid::compute::attn {
namespace {

inline float load_elem(tensor::DType dt, const uint8_t* p, int64_t d) {
  if (dt == tensor::DType::F16) return tensor::f16_to_f32(reinterpret_cast<const uint16_t*>(p)[d]);
  if (dt == tensor::DType::BF16) return tensor::bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[d]);
  return reinterpret_cast<const float*>(p)[d];
}

void load(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
          float* kt, float* vf) {
  std::memset(kt, 0, sizeof(float) * hd * kChunk);
  for (int j = jlo; j <= jhi; ++j) {
    const uint8_t* k = kv.key_at(c0 + j, h);
    const uint8_t* v = kv.value_at(c0 + j, h);
    float* vr = vf + j * hdp;
    for (int64_t d = 0; d < hd; ++d) {
      kt[d * kChunk + j] = load_elem(kv.dtype, k, d);
      vr[d] = load_elem(kv.dtype, v, d);
    }
    for (int64_t d = hd; d < hdp; ++d) vr[d] = 0.0f;
  }
}

void step(const float* kt, const float* vf, int64_t hd, int64_t hdp, float scale, float softcap,
          Row* rows, int nrows) {
  float s[kChunk];
  for (int r = 0; r < nrows; ++r) {
    Row& w = rows[r];
    if (w.jlo > w.jhi) continue;
    float cmax = -INFINITY;
    for (int j = w.jlo; j <= w.jhi; ++j) {
      float a = 0.0f;
      for (int64_t d = 0; d < hd; ++d) a += w.q[d] * kt[d * kChunk + j];
      a *= scale;
      if (softcap > 0) a = softcap * std::tanh(a / softcap);
      s[j] = a;
      cmax = std::max(cmax, a);
    }
    const float mnew = std::max(w.m, cmax);
    if (mnew > w.m && w.m != -INFINITY) {  // rescale what was summed against the old max
      const float alpha = std::exp(w.m - mnew);
      w.l *= alpha;
      for (int64_t d = 0; d < hdp; ++d) w.acc[d] *= alpha;
    }
    w.m = mnew;
    for (int j = w.jlo; j <= w.jhi; ++j) {
      const float pj = std::exp(s[j] - mnew);
      w.l += pj;
      const float* v = vf + j * hdp;
      for (int64_t d = 0; d < hdp; ++d) w.acc[d] += pj * v[d];
    }
  }
}

}  // namespace

Fns fns_scalar() { return Fns{load, step, 1, kChunk, nullptr}; }

}  // namespace rapid::compute::attn
