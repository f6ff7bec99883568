// Loader speed: opening real checkpoints (mmap + header parsing + GGUF Q/K un-permutation) and the
// reference dequantizers' throughput per format (the scalar oracle, not the compute kernels).
//   build-load/model_loader_bench --benchmark_min_time=0.2
// Models come from the cache (scripts/fetch_models.sh, scripts/derive_models.sh); missing ones skip.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>

#include "model/gguf.h"
#include "model/weights.h"
#include "tensor/dequantize.h"

using namespace rapid;

namespace {

std::string cache() {
  const char* c = std::getenv("RAPID_MODEL_CACHE");
  if (c && *c) return c;
  const char* h = std::getenv("HOME");
  return std::string(h ? h : "/root") + "/.cache/rapid-mlx/models";
}

void load(benchmark::State& st, const std::string& rel) {
  std::string p = cache() + "/" + rel;
  if (!std::filesystem::exists(p)) {
    st.SkipWithError(("missing " + p).c_str());
    return;
  }
  for (auto _ : st) benchmark::DoNotOptimize(model::load_checkpoint(p));
}

void BM_LoadSmolLM2Gguf(benchmark::State& st) { load(st, "smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"); }
void BM_LoadGemma3Gguf(benchmark::State& st) { load(st, "gemma-3-270m/gemma-3-270m-q4_k_m.gguf"); }
void BM_LoadSmolLM2HfF32(benchmark::State& st) { load(st, "smollm2-135m-instruct/hf-f32"); }
void BM_LoadSmolLM2MlxQ4(benchmark::State& st) { load(st, "smollm2-135m-instruct/mlx-q4"); }
BENCHMARK(BM_LoadSmolLM2Gguf)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadGemma3Gguf)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadSmolLM2HfF32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadSmolLM2MlxQ4)->Unit(benchmark::kMillisecond);

// Reference dequantization of every tensor of the goldens' GGML type file, per type.
void BM_DequantRow(benchmark::State& st, const char* type) {
  static model::GgufFile g = model::read_gguf(std::string(RAPID_SOURCE_DIR) + "/tests/golden/model_loader/ggml_types.gguf");
  const tensor::Tensor* t = g.find(std::string("t.") + type);
  std::vector<float> out(size_t(t->cols()));
  int64_t n = 0;
  for (auto _ : st) {
    for (int64_t r = 0; r < t->rows(); ++r) dequantize_row(*t, r, out.data());
    benchmark::DoNotOptimize(out.data());
    n += t->numel();
  }
  st.SetItemsProcessed(n);
}
BENCHMARK_CAPTURE(BM_DequantRow, Q4_0, "Q4_0");
BENCHMARK_CAPTURE(BM_DequantRow, Q4_1, "Q4_1");
BENCHMARK_CAPTURE(BM_DequantRow, Q8_0, "Q8_0");
BENCHMARK_CAPTURE(BM_DequantRow, Q4_K, "Q4_K");
BENCHMARK_CAPTURE(BM_DequantRow, Q6_K, "Q6_K");

}  // namespace

BENCHMARK_MAIN();
