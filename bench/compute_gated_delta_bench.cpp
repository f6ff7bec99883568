// Gated DeltaNet of one layer: decode's step per token, prefill's recurrent form (blocks of state
// rows through all tokens) and the chunk-parallel form, at Qwen3.5-0.8B's DeltaNet shape (16 key
// and 16 value heads of 128) on one thread; items = tokens. RAPID_ISA=avx2|scalar lowers the ISA.
//   build/compute_gated_delta_bench
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "compute/cpu_features.h"
#include "compute/gated_delta.h"

using namespace rapid;

namespace {

struct Data {
  compute::GatedDeltaShape s;
  int64_t ld;
  std::vector<float> qkv, log_g, beta, state, y;
  Data(compute::GatedDeltaShape sh, int64_t n) : s(sh), ld(2 * sh.k_heads * sh.k_dim + sh.v_heads * sh.v_dim) {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    qkv.resize(n * ld);
    for (float& x : qkv) x = nd(rng);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < 2 * sh.k_heads; ++h) compute::l2norm_scaled(qkv.data() + t * ld + h * sh.k_dim, sh.k_dim, 1.0f, 1e-6f);
    log_g.assign(n * sh.v_heads, -0.05f);
    beta.assign(n * sh.v_heads, 0.5f);
    state.assign(sh.state_floats(), 0.0f);
    y.resize(n * sh.v_heads * sh.v_dim);
  }
};

// Token by token through gated_delta_step (decode's call, one token per call).
void BM_Steps(benchmark::State& st) {
  const int64_t n = st.range(0);
  Data d(compute::GatedDeltaShape{16, 16, 128, 128}, n);
  const int64_t kd = d.s.k_heads * d.s.k_dim, vd = d.s.v_heads * d.s.v_dim;
  for (auto _ : st) {
    for (int64_t t = 0; t < n; ++t) {
      const float* r = d.qkv.data() + t * d.ld;
      compute::gated_delta_step(d.s, r, r + kd, r + 2 * kd, d.log_g.data() + t * 16, d.beta.data() + t * 16, d.state.data(),
                       d.y.data() + t * vd, 0, 16);
    }
    benchmark::DoNotOptimize(d.y.data());
  }
  st.SetItemsProcessed(st.iterations() * n);
  st.SetLabel(compute::isa_name(compute::active_isa()));
}

// Decode: one token through each of 18 layers' states (18 MiB, as Qwen3.5-0.8B's DeltaNet
// layers), so the states come from beyond L2 as in a real decode step; items = layer steps.
void BM_DecodeLayers(benchmark::State& st) {
  constexpr int64_t kLayers = 18;
  Data d(compute::GatedDeltaShape{16, 16, 128, 128}, 1);
  std::vector<float> states(kLayers * d.s.state_floats(), 0.0f);
  const int64_t kd = d.s.k_heads * d.s.k_dim;
  const float* r = d.qkv.data();
  for (auto _ : st) {
    for (int64_t l = 0; l < kLayers; ++l)
      compute::gated_delta_step(d.s, r, r + kd, r + 2 * kd, d.log_g.data(), d.beta.data(),
                                states.data() + l * d.s.state_floats(), d.y.data(), 0, 16);
    benchmark::DoNotOptimize(d.y.data());
  }
  st.SetItemsProcessed(st.iterations() * kLayers);
  st.SetLabel(compute::isa_name(compute::active_isa()));
}

// Prefill of n tokens through one of the two multi-token forms (same signature): recurrent
// (blocks of state rows through all n tokens) or chunk-parallel.
using PrefillForm = decltype(&compute::gated_delta_recurrent);
void BM_Prefill(benchmark::State& st, PrefillForm form) {
  const int64_t n = st.range(0);
  Data d(compute::GatedDeltaShape{16, 16, 128, 128}, n);
  const int64_t vd = d.s.v_heads * d.s.v_dim;
  for (auto _ : st) {
    form(d.s, d.qkv.data(), d.ld, d.log_g.data(), d.beta.data(), n, d.state.data(), d.y.data(), vd, 0, 16);
    benchmark::DoNotOptimize(d.y.data());
  }
  st.SetItemsProcessed(st.iterations() * n);
  st.SetLabel(compute::isa_name(compute::active_isa()));
}

}  // namespace

BENCHMARK(BM_DecodeLayers)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Steps)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, Recurrent, compute::gated_delta_recurrent)->Arg(64)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Prefill, Chunked, compute::gated_delta_chunked)->Arg(64)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
