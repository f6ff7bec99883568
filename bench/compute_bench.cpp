// Kernel and model throughput. GEMV benchmarks report weight bytes streamed per second (decode is
// bandwidth bound); the SmolLM2 benchmarks report tok/s (set RAPID_SMOLLM2_GGUF or use the
// default cache path; skipped when absent).
//   build-core/compute_bench --benchmark_filter=Gemv
//   build-core/compute_bench --benchmark_filter=SmolLM2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>

#include "cache/block_pool.h"
#include "compute/attention.h"
#include "common/huge_buffer.h"
#include "compute/matmul.h"
#include "model/arch.h"
#include "model/weights.h"
#include "tensor/fp16.h"
#include "tensor/lane_layout.h"
#include "tensor/quant_formats.h"

using namespace rapid;

namespace {

// Weight bytes on transparent huge pages, as the model's load-time copies are (common/huge_buffer.h):
// with 4 KiB pages a DRAM-resident GEMV measures TLB misses the model no longer pays.
class HugeBytes {
 public:
  explicit HugeBytes(size_t n) : buf_(huge_buffer(n)), n_(n) { std::memset(buf_.get(), 0, n); }
  uint8_t* data() { return buf_.get(); }
  const uint8_t* data() const { return buf_.get(); }
  size_t size() const { return n_; }
  uint8_t* begin() { return data(); }
  uint8_t* end() { return data() + n_; }

 private:
  std::shared_ptr<uint8_t[]> buf_;
  size_t n_;
};

HugeBytes random_weights(tensor::DType t, int64_t rows, int64_t cols) {
  HugeBytes buf(tensor::row_bytes(t, cols) * rows);
  std::mt19937 rng(1);
  for (auto& b : buf) b = static_cast<uint8_t>(rng() & 0x3f);  // small values: finite f16 scales
  return buf;
}

// n for one token with the weight-row prefetch off and on in alternate calls (time_prefetch_ab).
constexpr int64_t kPrefetchAB = -1;

double thread_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// One-token calls with compute::set_row_prefetch off and on alternately (which goes first
// alternating too), so both see the same load on a shared machine: counters are the minimum and
// median ms per call of each (wall, and the calling thread's CPU time, which is the whole call at
// 1 thread) and off / on of the minima and medians (> 1: the prefetch is faster).
void time_prefetch_ab(benchmark::State& st, const compute::WeightView& v, int threads) {
  std::vector<float> x(v.cols, 0.5f), y(v.rows);
  compute::ThreadPool pool(threads);
  compute::MatmulScratch s;
  std::vector<double> wall[2], cpu[2];
  int64_t i = 0;
  for (auto _ : st) {
    for (int k = 0; k < 2; ++k) {
      const int on = (k + i) % 2;
      compute::set_row_prefetch(on);
      const double c0 = thread_cpu_ms();
      const auto t0 = std::chrono::steady_clock::now();
      compute::matmul(v, x.data(), 1, y.data(), pool, s);
      wall[on].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      cpu[on].push_back(thread_cpu_ms() - c0);
      benchmark::DoNotOptimize(y.data());
    }
    ++i;
  }
  compute::set_row_prefetch(false);
  auto min_med = [](std::vector<double>& a) {
    std::sort(a.begin(), a.end());
    return std::pair{a.front(), a[a.size() / 2]};
  };
  auto [woff, woffm] = min_med(wall[0]);
  auto [won, wonm] = min_med(wall[1]);
  auto [coff, coffm] = min_med(cpu[0]);
  auto [con, conm] = min_med(cpu[1]);
  st.counters["off_ms"] = woff, st.counters["on_ms"] = won, st.counters["off/on"] = woff / won;
  st.counters["off/on_med"] = woffm / wonm;
  st.counters["cpu_off/on"] = coff / con, st.counters["cpu_off/on_med"] = coffm / conm;
}

// n activation rows through v: bytes/s counts `bytes` (the weight's packed size) per call, items/s
// tokens through this matrix.
void time_matmul(benchmark::State& st, const compute::WeightView& v, int threads, int64_t n, size_t bytes,
                 compute::MatmulPath path = compute::MatmulPath::Fast) {
  if (n == kPrefetchAB) return time_prefetch_ab(st, v, threads);
  std::vector<float> x(n * v.cols, 0.5f), y(n * v.rows);
  compute::ThreadPool pool(threads);
  compute::MatmulScratch s;
  for (auto _ : st) {
    compute::matmul(v, x.data(), n, y.data(), pool, s, path);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(bytes));
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations()) * n);
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * v.rows * v.cols * n * st.iterations(), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}

void BM_Gemv(benchmark::State& st, tensor::DType t, int64_t rows, int64_t cols, int threads, int64_t n,
             compute::MatmulPath path = compute::MatmulPath::Fast) {
  // A lane layout: the load-time repack (model/lane_repack.h) of the GGUF type's rows.
  tensor::DType from = t;
  for (tensor::DType g : {tensor::DType::Q8_0, tensor::DType::Q4_0, tensor::DType::Q4_1, tensor::DType::Q4_K, tensor::DType::Q6_K,
                          tensor::DType::IQ4_NL, tensor::DType::IQ4_XS})
    if (tensor::lane_layout_of(g) == t) from = g;
  auto w = random_weights(from, rows, cols);
  if (from != t) {
    const size_t rb = tensor::row_bytes(t, cols);
    const std::vector<uint8_t> src(w.begin(), w.end());
    for (int64_t r = 0; r < rows; ++r) tensor::repack_lanes(from, src.data() + r * rb, cols, w.data() + r * rb);
  }
  tensor::Tensor tt;
  tt.name = "w";
  tt.dtype = t;
  tt.shape = {rows, cols};
  tt.data = w.data();
  tt.nbytes = w.size();
  time_matmul(st, compute::WeightView::of(tt), threads, n, w.size(), path);
}

// MLX affine weight (random packed values, bf16 scales/biases like mlx_lm's checkpoints) of the
// same shape: bytes/s counts the packed values plus the scales and biases.
void BM_GemvMlx(benchmark::State& st, int bits, int gs, int64_t rows, int64_t cols, int threads, int64_t n,
                tensor::DType group_dtype = tensor::DType::BF16, bool lanes = false,
                compute::MatmulPath path = compute::MatmulPath::Fast) {
  HugeBytes w(rows * cols * bits / 8);
  std::mt19937 rng(1);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::vector<uint16_t> sb(2 * rows * cols / gs);
  for (auto& v : sb) {
    const float f = static_cast<float>(rng() % 64) / 1024.0f;
    v = group_dtype == tensor::DType::F16 ? tensor::f32_to_f16(f) : tensor::f32_to_bf16(f);
  }
  tensor::Tensor tt;
  tt.name = "w";
  tt.dtype = tensor::DType::MLX_AFFINE;
  if (lanes) {  // the load-time repack (model/lane_repack.h), in place as the loader does it
    const int64_t rb = cols * bits / 8;
    for (int64_t r = 0; r < rows; ++r) tensor::repack_mlx_lanes(bits, w.data() + r * rb, cols / 32, w.data() + r * rb);
    tt.dtype = tensor::DType::MLX_LANES;
  }
  tt.shape = {rows, cols};
  tt.data = w.data();
  tt.bits = bits;
  tt.group_size = gs;
  tt.group_dtype = group_dtype;
  tt.scales = sb.data();
  tt.biases = sb.data() + rows * cols / gs;
  time_matmul(st, compute::WeightView::of(tt), threads, n, w.size() + 2 * sb.size(), path);
}

// MXFP4 weight (random nibbles, E8M0 scales 2^-8 .. 2^-5) of the same shapes: bytes/s counts the
// nibbles plus the scale bytes.
void BM_GemvMxfp4(benchmark::State& st, int64_t rows, int64_t cols, int threads, int64_t n) {
  HugeBytes w(rows * cols / 2), e(rows * cols / 32);
  std::mt19937 rng(1);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  for (auto& b : e) b = static_cast<uint8_t>(119 + rng() % 4);
  tensor::Tensor tt;
  tt.name = "w";
  tt.dtype = tensor::DType::MXFP4;
  tt.shape = {rows, cols};
  tt.data = w.data();
  tt.nbytes = w.size();
  tt.scales = e.data();
  time_matmul(st, compute::WeightView::of(tt), threads, n, w.size() + e.size());
}

// The same as GGML's MXFP4 blocks read in place (DType::MXFP4_GGML: the scale byte inside each
// 17-byte block, as a gpt-oss GGUF holds them): bytes/s counts the blocks, the same bytes.
// The load-time repack into a lane layout (model/lane_repack.h), bytes/s of rows rewritten.
void BM_Repack(benchmark::State& st, tensor::DType from, int64_t rows, int64_t cols) {
  const auto w = random_weights(from, rows, cols);
  std::vector<uint8_t> out(w.size());
  const size_t rb = tensor::row_bytes(from, cols);
  for (auto _ : st) {
    for (int64_t r = 0; r < rows; ++r) tensor::repack_lanes(from, w.data() + r * rb, cols, out.data() + r * rb);
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(w.size()));
}

void BM_GemvMxfp4Ggml(benchmark::State& st, int64_t rows, int64_t cols, int threads, int64_t n) {
  HugeBytes w(rows * cols / 32 * 17);
  std::mt19937 rng(1);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = static_cast<uint8_t>(i % 17 ? rng() : 119 + rng() % 4);
  tensor::Tensor tt;
  tt.name = "w";
  tt.dtype = tensor::DType::MXFP4_GGML;
  tt.shape = {rows, cols};
  tt.data = w.data();
  tt.nbytes = w.size();
  time_matmul(st, compute::WeightView::of(tt), threads, n, w.size());
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
  std::shared_ptr<model::Checkpoint> ck = model::load_checkpoint(smollm2());
  model::ModelOptions o;
  o.num_threads = static_cast<int>(st.range(0));
  auto m = model::create_model(ck, o);
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

// Attention over f16 paged KV with SmolLM2's heads (9 query, 3 kv, head_dim 64): `segs` sequences of
// `n` new queries each, the first at position `ctx`. GFLOP/s counts q·k and p·v (4·hd per key).
void BM_Attention(benchmark::State& st, int segs, int64_t n, int64_t ctx, int threads) {
  constexpr int64_t kHeads = 9, kKv = 3, kHd = 64, kBlock = 16;
  const int64_t len = ctx + n, nblocks = (len + kBlock - 1) / kBlock;
  const size_t plane = kKv * kBlock * kHd * 2;  // one layer's K (or V) per block, f16
  std::vector<std::vector<uint16_t>> pages(segs * nblocks, std::vector<uint16_t>(plane));  // K then V: 2 * plane bytes
  std::vector<uint8_t*> ptrs;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& pg : pages) {
    for (auto& e : pg) e = tensor::f32_to_f16(u(rng));
    ptrs.push_back(reinterpret_cast<uint8_t*>(pg.data()));
  }
  std::vector<float> q(segs * n * kHeads * kHd), out(q.size());
  for (auto& e : q) e = u(rng);
  std::vector<compute::AttentionSegment> sg(segs);
  for (int i = 0; i < segs; ++i) {
    compute::KvView kv;
    kv.dtype = tensor::DType::F16;
    kv.blocks = ptrs.data() + i * nblocks;
    kv.k_off = 0;
    kv.v_off = plane;  // bytes: V plane follows K plane
    kv.head_stride = kBlock * kHd * 2;
    kv.slot_stride = kHd * 2;
    sg[i].q = q.data() + i * n * kHeads * kHd;
    sg[i].out = out.data() + i * n * kHeads * kHd;
    sg[i].n = n;
    sg[i].pos0 = ctx;
    sg[i].kv = kv;
  }
  const compute::AttentionParams p{.n_heads = kHeads, .n_kv_heads = kKv, .head_dim = kHd, .scale = 0.125f};
  compute::ThreadPool pool(threads);
  for (auto _ : st) {
    compute::attention_batch(sg.data(), sg.size(), p, pool);
    benchmark::DoNotOptimize(out.data());
  }
  const double keys = double(segs) * (n * ctx + n * (n + 1) / 2.0);
  st.counters["GFLOP/s"] = benchmark::Counter(keys * kHeads * 4 * kHd * st.iterations(), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}

// The same over a whole model's layers laid out as the block pool does (block = every layer's K and
// V planes, blocks of concurrent sequences interleaved), SmolLM2 shapes: at long contexts the 30
// layers' KV (23 KB per token) exceed the caches, so the pages come from DRAM as in the model.
void BM_AttentionLayers(benchmark::State& st, int segs, int64_t ctx) {
  constexpr int64_t kLayers = 30, kHeads = 9, kKv = 3, kHd = 64, kBlock = 16;
  const int64_t len = ctx + 1, nblocks = (len + kBlock - 1) / kBlock;
  const size_t plane = kKv * kBlock * kHd * 2, block = kLayers * 2 * plane;
  std::vector<uint16_t> arena(segs * nblocks * block / 2);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& e : arena) e = tensor::f32_to_f16(u(rng));
  std::vector<uint8_t*> ptrs(segs * nblocks);
  for (int64_t b = 0; b < nblocks; ++b)
    for (int i = 0; i < segs; ++i)
      ptrs[i * nblocks + b] = reinterpret_cast<uint8_t*>(arena.data()) + (b * segs + i) * block;
  std::vector<float> q(segs * kHeads * kHd), out(q.size());
  for (auto& e : q) e = u(rng);
  const compute::AttentionParams p{.n_heads = kHeads, .n_kv_heads = kKv, .head_dim = kHd, .scale = 0.125f};
  compute::ThreadPool pool(2);
  std::vector<compute::AttentionSegment> sg(segs);
  for (auto _ : st) {
    for (int64_t l = 0; l < kLayers; ++l) {
      for (int i = 0; i < segs; ++i) {
        sg[i] = compute::AttentionSegment{};
        sg[i].q = q.data() + i * kHeads * kHd;
        sg[i].out = out.data() + i * kHeads * kHd;
        sg[i].n = 1;
        sg[i].pos0 = ctx;
        sg[i].kv.dtype = tensor::DType::F16;
        sg[i].kv.blocks = ptrs.data() + i * nblocks;
        sg[i].kv.k_off = l * 2 * plane;
        sg[i].kv.v_off = sg[i].kv.k_off + plane;
        sg[i].kv.head_stride = kBlock * kHd * 2;
        sg[i].kv.slot_stride = kHd * 2;
      }
      compute::attention_batch(sg.data(), sg.size(), p, pool);
    }
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["GB/s"] = benchmark::Counter(double(segs) * len * kLayers * 2 * kKv * kHd * 2 * st.iterations(),
                                           benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// Batched decode: B sequences with C-token prompts (args B, C), then 32 steps of one token each in one
// forward_batch. Reports aggregate tok/s and ms per step (what the engine's step costs).
// SmolLM2 on 2 threads with a paged-KV pool for `tokens` tokens; nullptr (benchmark skipped)
// when the model is not cached.
std::shared_ptr<model::Model> smollm2_paged(benchmark::State& st, uint64_t tokens, std::shared_ptr<cache::BlockPool>* pool) {
  if (!std::filesystem::exists(smollm2())) {
    st.SkipWithError("SmolLM2 GGUF not found");
    return nullptr;
  }
  model::ModelOptions o;
  o.num_threads = 2;
  std::shared_ptr<model::Model> m = model::create_model(model::load_checkpoint(smollm2()), o);
  *pool = std::make_shared<cache::BlockPool>(m->kv_block_shape(16), tokens * 30 * 2 * 3 * 64 * 2 + (64 << 20));
  return m;
}

void BM_SmolLM2Batch(benchmark::State& st) {
  const int B = static_cast<int>(st.range(0)), C = static_cast<int>(st.range(1));
  std::shared_ptr<cache::BlockPool> pool;
  auto m = smollm2_paged(st, uint64_t(B) * (C + 56), &pool);
  if (!m) return;
  std::vector<std::unique_ptr<model::SequenceState>> states;
  std::vector<std::vector<float>> logits(B, std::vector<float>(m->config().vocab_size));
  std::vector<int32_t> prompt(C), tok(B, 5);
  for (int b = 0; b < B; ++b) {
    for (int i = 0; i < C; ++i) prompt[i] = 100 + i + 7 * b;
    states.push_back(m->new_paged_state(pool, C + 40));
    m->forward(prompt.data(), C, *states.back(), logits[b].data());
  }
  std::vector<model::BatchEntry> es(B);
  int64_t steps = 0;
  for (auto _ : st) {
    for (int b = 0; b < B; ++b) states[b]->truncate(C);
    for (int i = 0; i < 32; ++i) {
      for (int b = 0; b < B; ++b) es[b] = model::BatchEntry{&tok[b], 1, states[b].get(), logits[b].data()};
      m->forward_batch(es.data(), es.size());
      ++steps;
    }
  }
  st.counters["tok/s"] = benchmark::Counter(double(steps) * B, benchmark::Counter::kIsRate);
  st.counters["ms/step"] = benchmark::Counter(double(steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}

// An agent turn: n new tokens appended to a cached context of c (one sequence, paged KV), the
// prefill a warm request does; against a cold prefill of c + n it is the agent TTFT ratio.
void BM_SmolLM2Turn(benchmark::State& st) {
  const int N = static_cast<int>(st.range(0)), C = static_cast<int>(st.range(1));
  std::shared_ptr<cache::BlockPool> pool;
  auto m = smollm2_paged(st, uint64_t(C + N + 16), &pool);
  if (!m) return;
  auto state = m->new_paged_state(pool, C + N);
  std::vector<float> logits(m->config().vocab_size);
  std::vector<int32_t> toks(C + N);
  for (int i = 0; i < C + N; ++i) toks[i] = 100 + (i * 37) % 20000;
  if (C > 0) m->forward(toks.data(), C, *state, logits.data());
  for (auto _ : st) {
    state->truncate(C);
    m->forward(toks.data() + C, N, *state, logits.data());
  }
  st.counters["tok/s"] = benchmark::Counter(double(st.iterations()) * N, benchmark::Counter::kIsRate);
}

}  // namespace

// SmolLM2 shapes: hidden 576, ffn 1536, vocab 49152 (tied Q8_0 output).
BENCHMARK_CAPTURE(BM_Gemv, q4_1_ffn_1t, tensor::DType::Q4_1, 1536, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_down_1t, tensor::DType::Q4_1, 576, 1536, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_vocab_1t, tensor::DType::Q8_0, 49152, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_vocab_2t, tensor::DType::Q8_0, 49152, 576, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_big_1t, tensor::DType::Q4_0, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_big_1t, tensor::DType::Q4_1, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_lanes_big_1t, tensor::DType::Q4_0_LANES, 4096, 4096, 1, 1)->UseRealTime();
// SmolLM2's up projection as a 16-token prefill tile: 576 columns end each row in a 2-block tail
// (in token pairs), 512 have none (bench/README.md, "Row tails in token pairs").
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_up_1t_n16, tensor::DType::Q4_1_LANES, 1536, 576, 1, 16)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_512_1t_n16, tensor::DType::Q4_1_LANES, 1536, 512, 1, 16)->UseRealTime();
// One Qwen3-30B-A3B expert projection (768 x 2048) in Q4_0: a decode step's row, and the ~32 rows
// an expert gets in a 512-token prefill (512 x top-8 / 128 experts).
BENCHMARK_CAPTURE(BM_Gemv, q4_0_expert_1t, tensor::DType::Q4_0, 768, 2048, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_expert_1t_n32, tensor::DType::Q4_0, 768, 2048, 1, 32)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_big_2t, tensor::DType::Q4_1, 4096, 4096, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_big_1t, tensor::DType::Q8_0, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_lanes_big_1t, tensor::DType::Q8_0_LANES, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, f16_big_1t, tensor::DType::F16, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_k_big_1t, tensor::DType::Q4_K, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q6_k_big_1t, tensor::DType::Q6_K, 4096, 4096, 1, 1)->UseRealTime();
// Q5 formats: the int8-activation kernels (fast) against the dequantize-then-f32-dot fallback
// they replace (exact path, which takes that same generic route for every format).
BENCHMARK_CAPTURE(BM_Gemv, q5_0_big_1t_fast, tensor::DType::Q5_0, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_0_big_1t_fallback, tensor::DType::Q5_0, 4096, 4096, 1, 1, compute::MatmulPath::Exact)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_1_big_1t_fast, tensor::DType::Q5_1, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_1_big_1t_fallback, tensor::DType::Q5_1, 4096, 4096, 1, 1, compute::MatmulPath::Exact)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_k_big_1t_fast, tensor::DType::Q5_K, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_k_big_1t_fallback, tensor::DType::Q5_K, 4096, 4096, 1, 1, compute::MatmulPath::Exact)->UseRealTime();
// Q3_K: its lane kernel (AVX-512; elsewhere the dequantizing fallback) for one token and a batch.
BENCHMARK_CAPTURE(BM_Gemv, q3_k_big_1t, tensor::DType::Q3_K, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q3_k_qwen35_up_1t_n8, tensor::DType::Q3_K, 3584, 1024, 1, 8)->UseRealTime();
// IQ4_NL / IQ4_XS (their lane kernels on AVX2 / AVX-512; before them a file holding either was
// refused at load), one token and a batch of 8 on Qwen3.5-0.8B's MLP up projection.
BENCHMARK_CAPTURE(BM_Gemv, iq4_nl_big_1t, tensor::DType::IQ4_NL, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq4_xs_big_1t, tensor::DType::IQ4_XS, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq4_nl_lanes_big_1t, tensor::DType::IQ4_NL_LANES, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq4_xs_lanes_big_1t, tensor::DType::IQ4_XS_LANES, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq4_xs_lanes_qwen35_up_1t_n8, tensor::DType::IQ4_XS_LANES, 3584, 1024, 1, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq4_xs_qwen35_up_1t_n128, tensor::DType::IQ4_XS, 3584, 1024, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq4_xs_lanes_qwen35_up_1t_n128, tensor::DType::IQ4_XS_LANES, 3584, 1024, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq4_nl_qwen35_up_1t_n8, tensor::DType::IQ4_NL, 3584, 1024, 1, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq4_xs_qwen35_up_1t_n8, tensor::DType::IQ4_XS, 3584, 1024, 1, 8)->UseRealTime();
// Q2_K: its lane kernels against the dequantizing fallback they replace.
BENCHMARK_CAPTURE(BM_Gemv, q2_k_big_1t, tensor::DType::Q2_K, 4096, 4096, 1, 1)->UseRealTime();
// The IQ1-IQ3 lattice types: each super-block decoded from its lattice, then int8 dots.
BENCHMARK_CAPTURE(BM_Gemv, iq2_xxs_big_1t, tensor::DType::IQ2_XXS, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq2_s_big_1t, tensor::DType::IQ2_S, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq3_s_big_1t, tensor::DType::IQ3_S, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq1_m_big_1t, tensor::DType::IQ1_M, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq2_xxs_big_1t_fallback, tensor::DType::IQ2_XXS, 4096, 4096, 1, 1, compute::MatmulPath::Exact)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq2_xxs_qwen35_up_1t_n8, tensor::DType::IQ2_XXS, 3584, 1024, 1, 8)->UseRealTime();
// A prefill chunk of the lattice types (each row decoded once for all token tiles) and of Q2_K.
BENCHMARK_CAPTURE(BM_Gemv, iq2_xxs_qwen35_up_1t_n128, tensor::DType::IQ2_XXS, 3584, 1024, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq3_s_qwen35_up_1t_n128, tensor::DType::IQ3_S, 3584, 1024, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq1_m_qwen35_up_1t_n128, tensor::DType::IQ1_M, 3584, 1024, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q2_k_qwen35_up_1t_n128, tensor::DType::Q2_K, 3584, 1024, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q2_k_big_1t_fallback, tensor::DType::Q2_K, 4096, 4096, 1, 1, compute::MatmulPath::Exact)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q2_k_qwen35_up_1t_n8, tensor::DType::Q2_K, 3584, 1024, 1, 8)->UseRealTime();
// Q5_K's lane kernel over a batch and a prefill chunk: Qwen3.5-0.8B's MLP up projection.
BENCHMARK_CAPTURE(BM_Gemv, q5_k_qwen35_up_1t_n8, tensor::DType::Q5_K, 3584, 1024, 1, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_k_qwen35_up_1t_n128, tensor::DType::Q5_K, 3584, 1024, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_0_gemm128_1t_fast, tensor::DType::Q5_0, 1536, 576, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_0_gemm128_1t_fallback, tensor::DType::Q5_0, 1536, 576, 1, 128, compute::MatmulPath::Exact)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_ffn_1t_n8, tensor::DType::Q4_1, 1536, 576, 1, 8)->UseRealTime();
// Batched decode as the engine runs it on AVX-512 (lane layouts): 8 and 16 streams' rows.
// A decode step's row with a 2-block tail (576 columns) and without one (512): the tail's cost.
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_ffn_1t, tensor::DType::Q4_1_LANES, 1536, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_lanes_ffn_1t, tensor::DType::Q4_0_LANES, 1536, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_w512_1t, tensor::DType::Q4_1_LANES, 1536, 512, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_ffn_1t_n8, tensor::DType::Q4_1_LANES, 1536, 576, 1, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_ffn_1t_n16, tensor::DType::Q4_1_LANES, 1536, 576, 1, 16)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_ffn_1t_n32, tensor::DType::Q4_1_LANES, 1536, 576, 1, 32)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_down_1t_n8, tensor::DType::Q4_1_LANES, 576, 1536, 1, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_down_1t, tensor::DType::Q4_1_LANES, 576, 1536, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_lanes_vocab_1t_n8, tensor::DType::Q8_0_LANES, 49152, 576, 1, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_down_1t_n8, tensor::DType::Q4_1, 576, 1536, 1, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_vocab_1t_n8, tensor::DType::Q8_0, 49152, 576, 1, 8)->UseRealTime();
// The same on two threads (an 8-stream decode step's LM head), both layouts; and the repacked
// layout's one-token decode on two threads (DRAM bound: q8_0_vocab_2t is the GGUF layout's).
BENCHMARK_CAPTURE(BM_Gemv, q8_0_vocab_2t_n8, tensor::DType::Q8_0, 49152, 576, 2, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_lanes_vocab_2t_n8, tensor::DType::Q8_0_LANES, 49152, 576, 2, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_lanes_vocab_2t, tensor::DType::Q8_0_LANES, 49152, 576, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_gemm128_1t, tensor::DType::Q4_1, 1536, 576, 1, 128)->UseRealTime();
// Qwen3.5-0.8B's MLP up projection (3584 x 1024) as Q4_0: whole 8-block groups (the AVX2 lane kernels).
BENCHMARK_CAPTURE(BM_Gemv, q4_0_qwen35_up_1t, tensor::DType::Q4_0, 3584, 1024, 1, 1)->UseRealTime();
// Qwen3.5-0.8B's tied LM head (248k x 1024, 140 MB in Q4_0): the largest matrix of a decode step, DRAM bound.
BENCHMARK_CAPTURE(BM_Gemv, q4_0_qwen35_vocab_1t, tensor::DType::Q4_0, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_qwen35_vocab_2t, tensor::DType::Q4_0, 248320, 1024, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_qwen35_vocab_1t, tensor::DType::Q8_0, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_qwen35_vocab_2t, tensor::DType::Q8_0, 248320, 1024, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_lanes_qwen35_vocab_1t, tensor::DType::Q8_0_LANES, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_lanes_qwen35_vocab_2t, tensor::DType::Q8_0_LANES, 248320, 1024, 2, 1)->UseRealTime();
// Q4 rows from DRAM (143 / 107 MB, past any L3), as stored and repacked: the layout keeps a row's
// heads after its quants, which Q8_0_LANES' one-token loop had to read last (see above).
BENCHMARK_CAPTURE(BM_Gemv, q4_1_qwen35_vocab_1t, tensor::DType::Q4_1, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_qwen35_vocab_1t, tensor::DType::Q4_1_LANES, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_qwen35_vocab_2t, tensor::DType::Q4_1, 248320, 1024, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_lanes_qwen35_vocab_2t, tensor::DType::Q4_1_LANES, 248320, 1024, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_wide_1t, tensor::DType::Q4_0, 49152, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_lanes_wide_1t, tensor::DType::Q4_0_LANES, 49152, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq4_nl_wide_1t, tensor::DType::IQ4_NL, 49152, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, iq4_nl_lanes_wide_1t, tensor::DType::IQ4_NL_LANES, 49152, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_lanes_qwen35_vocab_1t, tensor::DType::Q4_0_LANES, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_lanes_qwen35_vocab_2t, tensor::DType::Q4_0_LANES, 248320, 1024, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_k_lanes_qwen35_vocab_1t, tensor::DType::Q4_K_LANES, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Repack, q6_k_4096x2048, tensor::DType::Q6_K, 4096, 2048)->UseRealTime();
BENCHMARK_CAPTURE(BM_Repack, q4_k_4096x2048, tensor::DType::Q4_K, 4096, 2048)->UseRealTime();
BENCHMARK_CAPTURE(BM_Repack, q8_0_4096x2048, tensor::DType::Q8_0, 4096, 2048)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q6_k_lanes_qwen35_vocab_1t, tensor::DType::Q6_K_LANES, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q6_k_lanes_qwen35_vocab_2t, tensor::DType::Q6_K_LANES, 248320, 1024, 2, 1)->UseRealTime();
// Every other decode format at that DRAM-resident shape (the weight-row prefetch's before / after;
// the *_big_1t and *_vocab_1t rows above are the L3-resident ones).
BENCHMARK_CAPTURE(BM_Gemv, q4_k_qwen35_vocab_1t, tensor::DType::Q4_K, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_k_qwen35_vocab_1t, tensor::DType::Q5_K, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q6_k_qwen35_vocab_1t, tensor::DType::Q6_K, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q6_k_qwen35_vocab_2t, tensor::DType::Q6_K, 248320, 1024, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_0_qwen35_vocab_1t, tensor::DType::Q5_0, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q5_1_qwen35_vocab_1t, tensor::DType::Q5_1, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_qwen35_vocab_1t, 4, 64, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_qwen35_vocab_2t, 4, 64, 248320, 1024, 2, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_f16_qwen35_vocab_1t, 4, 64, 248320, 1024, 1, 1, tensor::DType::F16)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_f16_qwen35_vocab_2t, 4, 64, 248320, 1024, 2, 1, tensor::DType::F16)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx8_g64_qwen35_vocab_1t, 8, 64, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4, mxfp4_qwen35_vocab_1t, 248320, 1024, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4Ggml, mxfp4_ggml_qwen35_vocab_1t, 248320, 1024, 1, 1)->UseRealTime();
// The same with the prefetch off / on in alternate calls of one process (time_prefetch_ab).
BENCHMARK_CAPTURE(BM_Gemv, prefetch_q4_0_qwen35_vocab_1t, tensor::DType::Q4_0, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, prefetch_q8_0_qwen35_vocab_1t, tensor::DType::Q8_0, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, prefetch_q4_k_qwen35_vocab_1t, tensor::DType::Q4_K, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, prefetch_q5_k_qwen35_vocab_1t, tensor::DType::Q5_K, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, prefetch_q6_k_qwen35_vocab_1t, tensor::DType::Q6_K, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, prefetch_q5_0_qwen35_vocab_1t, tensor::DType::Q5_0, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, prefetch_q5_1_qwen35_vocab_1t, tensor::DType::Q5_1, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, prefetch_mlx4_g64_qwen35_vocab_1t, 4, 64, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, prefetch_mlx8_g64_qwen35_vocab_1t, 8, 64, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4, prefetch_mxfp4_qwen35_vocab_1t, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4Ggml, prefetch_mxfp4_ggml_qwen35_vocab_1t, 248320, 1024, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, prefetch_q6_k_qwen35_vocab_2t, tensor::DType::Q6_K, 248320, 1024, 2, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, prefetch_mlx4_g64_qwen35_vocab_2t, 4, 64, 248320, 1024, 2, kPrefetchAB)->UseRealTime();
// L3-resident (the prefetch must not cost there): SmolLM2's MLX LM head, 4096 x 4096 K-quants.
BENCHMARK_CAPTURE(BM_GemvMlx, prefetch_mlx4_g64_vocab_1t, 4, 64, 49152, 576, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, prefetch_mlx8_g64_vocab_1t, 8, 64, 49152, 576, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, prefetch_q4_k_big_1t, tensor::DType::Q4_K, 4096, 4096, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, prefetch_q6_k_big_1t, tensor::DType::Q6_K, 4096, 4096, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4Ggml, prefetch_mxfp4_ggml_gptoss_gateup_1t, 5760, 2880, 1, kPrefetchAB)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_qwen35_up_1t_n8, tensor::DType::Q4_0, 3584, 1024, 1, 8)->UseRealTime();
// Prefill shapes (a 512-token chunk and smaller batches): AMX panels from 32 tokens where the CPU
// has them; RAPID_AMX=0 runs the lane kernels on the same machine for the before/after ratio.
BENCHMARK_CAPTURE(BM_Gemv, q8_0_qwen35_up_1t_n16, tensor::DType::Q8_0, 3584, 1024, 1, 16)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_qwen35_up_1t_n32, tensor::DType::Q8_0, 3584, 1024, 1, 32)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_qwen35_up_1t_n64, tensor::DType::Q8_0, 3584, 1024, 1, 64)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_qwen35_up_1t_n512, tensor::DType::Q8_0, 3584, 1024, 1, 512)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_0_qwen35_up_1t_n512, tensor::DType::Q4_0, 3584, 1024, 1, 512)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_qwen35_up_1t_n512, tensor::DType::Q4_1, 3584, 1024, 1, 512)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q4_1_qwen35_up_2t_n512, tensor::DType::Q4_1, 3584, 1024, 2, 512)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_qwen35_up_1t_n512, 4, 64, 3584, 1024, 1, 512)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_ffn_1t, 4, 64, 1536, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_down_1t, 4, 64, 576, 1536, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_vocab_1t, 4, 64, 49152, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx8_g64_vocab_1t, 8, 64, 49152, 576, 1, 1)->UseRealTime();
// SmolLM2's shapes (576-wide rows: two lane groups and a 2-block tail) as the model runs them:
// MLX 8-bit repacked (MLX_LANES) against GGUF Q8_0 repacked (Q8_0_LANES).
BENCHMARK_CAPTURE(BM_GemvMlx, mlx8_lanes_vocab_1t, 8, 64, 49152, 576, 1, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_lanes_vocab_1t, tensor::DType::Q8_0_LANES, 49152, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx8_lanes_ffn_1t, 8, 64, 1536, 576, 1, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_lanes_ffn_1t, tensor::DType::Q8_0_LANES, 1536, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx8_lanes_down_1t, 8, 64, 576, 1536, 1, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_lanes_down_1t, tensor::DType::Q8_0_LANES, 576, 1536, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_big_1t, 4, 64, 4096, 4096, 1, 1)->UseRealTime();
// MLX 2-, 3-, 5- and 6-bit lane kernels (before them, every n took the dequantizing fallback, the
// _fallback rows: the exact path's route), one token and 8.
BENCHMARK_CAPTURE(BM_GemvMlx, mlx2_g64_big_1t, 2, 64, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx3_g64_big_1t, 3, 64, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx5_g64_big_1t, 5, 64, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx6_g64_big_1t, 6, 64, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx6_g64_big_1t_fallback, 6, 64, 4096, 4096, 1, 1, tensor::DType::BF16, false,
                  compute::MatmulPath::Exact)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx3_g64_qwen35_up_1t_n8, 3, 64, 3584, 1024, 1, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx6_g64_ffn_1t, 6, 64, 1536, 576, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx6_g64_qwen35_up_1t_n8, 6, 64, 3584, 1024, 1, 8)->UseRealTime();
// MLX 4-bit repacked (MLX_LANES) against the file's order (the rows above).
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_big_1t, 4, 64, 4096, 4096, 1, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_ffn_1t, 4, 64, 1536, 576, 1, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_down_1t, 4, 64, 576, 1536, 1, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_vocab_1t, 4, 64, 49152, 576, 1, 1, tensor::DType::BF16, true)->UseRealTime();
// Row widths by their tail (bench/README.md, "Decode rows four at a time"): none (512), 4 blocks
// (640: Gemma 3 270M; 896: Qwen2.5-0.5B), against SmolLM2's 2 (576) above.
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_w512_1t, 4, 64, 1536, 512, 1, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_w640_1t, 4, 64, 1536, 640, 1, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_w896_1t, 4, 64, 4864, 896, 1, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_qwen35_vocab_1t, 4, 64, 248320, 1024, 1, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_qwen35_vocab_2t, 4, 64, 248320, 1024, 2, 1, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx8_g64_big_1t, 8, 64, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_ffn_1t_n8, 4, 64, 1536, 576, 1, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_ffn_1t_n8, 4, 64, 1536, 576, 1, 8, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_ffn_1t_n16, 4, 64, 1536, 576, 1, 16, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_lanes_down_1t_n8, 4, 64, 576, 1536, 1, 8, tensor::DType::BF16, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_gemm128_1t, 4, 64, 1536, 576, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx8_g64_gemm128_1t, 8, 64, 1536, 576, 1, 128)->UseRealTime();
// MXFP4 vs MLX affine 4-bit at the same shapes (gpt-oss-20b's expert: hidden 2880, 2x2880 gate/up).
BENCHMARK_CAPTURE(BM_GemvMxfp4, mxfp4_big_1t, 4096, 4096, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4, mxfp4_gptoss_gateup_1t, 5760, 2880, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4Ggml, mxfp4_ggml_gptoss_gateup_1t, 5760, 2880, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4, mxfp4_gptoss_gateup_1t_n4, 5760, 2880, 1, 4)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4Ggml, mxfp4_ggml_gptoss_gateup_1t_n4, 5760, 2880, 1, 4)->UseRealTime();
// A 16-token lane tile (prefill, batched decode) on the same shape.
BENCHMARK_CAPTURE(BM_GemvMxfp4, mxfp4_gptoss_gateup_1t_n16, 5760, 2880, 1, 16)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4Ggml, mxfp4_ggml_gptoss_gateup_1t_n16, 5760, 2880, 1, 16)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g32_gptoss_gateup_1t, 4, 32, 5760, 2880, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMlx, mlx4_g64_gptoss_gateup_1t, 4, 64, 5760, 2880, 1, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4, mxfp4_ffn_1t_n8, 1536, 576, 1, 8)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4, mxfp4_gemm128_1t, 1536, 576, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvMxfp4Ggml, mxfp4_ggml_gemm128_1t, 1536, 576, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, q8_0_gemm128_1t, tensor::DType::Q8_0, 1536, 576, 1, 128)->UseRealTime();
BENCHMARK_CAPTURE(BM_SmolLM2, decode, false)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK_CAPTURE(BM_SmolLM2, prefill, true)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

BENCHMARK(BM_SmolLM2Batch)->Args({1, 128})->Args({8, 128})->Args({8, 16})->Args({1, 1024})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_SmolLM2Turn)->Args({170, 2000})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
// A decode step and a 9-token speculative verify at the code-edit benchmark's context.
BENCHMARK(BM_SmolLM2Turn)->Args({1, 1536})->Args({9, 1536})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK_CAPTURE(BM_AttentionLayers, decode1_ctx2000, 1, 2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_AttentionLayers, decode8_ctx150, 8, 150)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Attention, prefill170_ctx2000_2t, 1, 170, 2000, 2)->UseRealTime();
// One thread: the kernel alone (the 2-thread rows also time the pool, and a loaded machine's waits).
BENCHMARK_CAPTURE(BM_Attention, prefill170_ctx2000_1t, 1, 170, 2000, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Attention, decode1_ctx2000_1t, 1, 1, 2000, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Attention, decode8_ctx200_1t, 8, 1, 200, 1)->UseRealTime();
BENCHMARK_CAPTURE(BM_Attention, prefill512_ctx0_2t, 1, 512, 0, 2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Attention, decode1_ctx2000_2t, 1, 1, 2000, 2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Attention, decode8_ctx200_2t, 8, 1, 200, 2)->UseRealTime();
BENCHMARK_CAPTURE(BM_Attention, verify8x4_ctx200_2t, 8, 4, 200, 2)->UseRealTime();
// A 9-token speculative verification at the code-edit benchmark's context (27 query rows per kv head).
BENCHMARK_CAPTURE(BM_Attention, verify9_ctx1536_1t, 1, 9, 1536, 1)->UseRealTime();
BENCHMARK_MAIN();
