// Kernel and model throughput. GEMV benchmarks report weight bytes streamed per second (decode is
// bandwidth bound); the SmolLM2 benchmarks report tok/s (set RAPID_SMOLLM2_GGUF or use the
// default cache path; skipped when absent).
//   build-core/compute_bench --benchmark_filter=Gemv
//   build-core/compute_bench --benchmark_filter=SmolLM2
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "compute/matmul.h"
#include "compute/quant_formats.h"
#include "model/arch.h"
#include "model/weights.h"

using namespace rapid;

namespace {

std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols) {
  std::vector<uint8_t> buf(row_bytes(t, cols) * rows);
  std::mt19937 rng(1);
  for (auto& b : buf) b = static_cast<uint8_t>(rng() & 0x3f);  // small values: finite f16 scales
  return buf;
}

void BM_Gemv(benchmark::State& st, DType t, int64_t rows, int64_t cols, int threads, int64_t n,
             MatmulPath path = MatmulPath::Fast) {
  auto w = random_weights(t, rows, cols);
  Tensor tt;
  tt.name = "w";
  tt.dtype = t;
  tt.shape = {rows, cols};
  tt.data = w.data();
  tt.nbytes = w.size();
  WeightView v = WeightView::of(tt);
  std::vector<float> x(n * cols, 0.5f), y(n * rows);
  ThreadPool pool(threads);
  MatmulScratch s;
  for (auto _ : st) {
    matmul(v, x.data(), n, y.data(), pool, s, path);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(w.size()));
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * n * st.iterations(), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}

std::string smollm2() {
  if (const char* e = std::getenv("RAPID_SMOLLM2_GGUF")) return e;
  return std::string(std::getenv("HOME") ? std::getenv("HOME") : "") +
         "/.cache/rapid-mlx/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Decode: 64 single-token steps after a 128-token prompt. Prefill: the 128-token prompt.
void BM_SmolLM2(benchmark::State& st, bool prefill) {
  if (!std::filesystem::exists(smollm2())) {
    st.SkipWithError("SmolLM2 GGUF not found");
    return;
  }
  std::shared_ptr<Checkpoint> ck = load_checkpoint(smollm2());
  ModelOptions o;
  o.num_threads = static_cast<int>(st.range(0));
  auto m = create_model(ck, o);
  std::vector<float> logits(m->config().vocab_size);
  std::vector<int32_t> prompt(128);
  for (int i = 0; i < 128; ++i) prompt[i] = 100 + i;
  int64_t tokens = 0;
  for (auto _ : st) {
    auto s = m->new_state(256);
    if (prefill) {
      m->forward(prompt.data(), 128, *s, logits.data());
      tokens += 128;
    } else {
      st.PauseTiming();
      m->forward(prompt.data(), 128, *s, logits.data());
      st.ResumeTiming();
      int32_t t = 5;
      for (int i = 0; i < 64; ++i) m->forward(&t, 1, *s, logits.data());
      tokens += 64;
    }
  }
  st.counters["tok/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

}  // namespace

// SmolLM2 shapes: hidden 576, ffn 1536, vocab 49152 (tied Q8_0 output).
BENCHMARK_CAPTURE(BM_Gemv, q4_1_ffn_1t, DType::Q4_1, 1536, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_down_1t, DType::Q4_1, 576, 1536, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_vocab_1t, DType::Q8_0, 49152, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_vocab_2t, DType::Q8_0, 49152, 576, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_big_1t, DType::Q4_0, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_big_1t, DType::Q4_1, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_big_2t, DType::Q4_1, 4096, 4096, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_big_1t, DType::Q8_0, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, f16_big_1t, DType::F16, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_k_big_1t, DType::Q4_K, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q6_k_big_1t, DType::Q6_K, 4096, 4096, 1, 1)->UseRealTime();
// Q5 formats: the int8-activation kernels (fast) against the dequantize-then-f32-dot fallback
// they replace (exact path, which takes that same generic route for every format).
BENCHMARK_CAPTURE(BM_Gemv, q5_0_big_1t_fast, DType::Q5_0, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_0_big_1t_fallback, DType::Q5_0, 4096, 4096, 1, 1, MatmulPath::Exact)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_1_big_1t_fast, DType::Q5_1, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_1_big_1t_fallback, DType::Q5_1, 4096, 4096, 1, 1, MatmulPath::Exact)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_k_big_1t_fast, DType::Q5_K, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_k_big_1t_fallback, DType::Q5_K, 4096, 4096, 1, 1, MatmulPath::Exact)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_0_gemm128_1t_fast, DType::Q5_0, 1536, 576, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_0_gemm128_1t_fallback, DType::Q5_0, 1536, 576, 1, 128, MatmulPath::Exact)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_gemm128_1t, DType::Q4_1, 1536, 576, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_SmolLM2, decode, false)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK_CAPTURE(BM_SmolLM2, prefill, true)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

BENCHMARK_MAIN();
