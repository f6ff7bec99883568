// One mixture-of-experts MLP (model/moe.h), MLX affine 4-bit (group 64) random weights, softmax
// routing, normalised top-k, at two real shapes: Qwen3-30B-A3B's (BM_MoeBlock: hidden 2048, 128
// experts of 768, top-8) and Qwen3-Next-80B-A3B's (BM_MoeBlockNext: hidden 2048, 512 experts of
// 512, top-10, a sigmoid-gated shared expert of 512), over n rows: n = 1 is one decode step,
// n = 16 a batch of 16 decodes. items = tokens. Counters:
//   expert_MB_read_per_token: bytes of the distinct experts the step routed to, per token
//   active_MB_per_token:      top-k experts' bytes (the active parameters of the block, shared
//                             expert excluded)
//   expert_GB_per_s:          the distinct experts' bytes over the time (to set against DRAM bandwidth)
// BM_MoeBlockMxfp4: the Qwen3 shape with its experts in MXFP4 (gpt-oss's format: E2M1 nibbles,
// one E8M0 byte per 32) instead of MLX affine 4-bit, to compare the two formats' kernels;
// BM_MoeBlockQ4_0: in GGUF Q4_0 (bench/moe_table.py's file), the block alone.
// Usage: build/model_moe_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "model/moe.h"

using namespace rapid;

namespace {

constexpr int64_t kH = 2048, kGroup = 64;
const model::MoeShape kQwen3{.hidden = kH, .experts = 128, .top_k = 8, .expert_inter = 768, .norm_topk = true};
const model::MoeShape kQwen3Next{.hidden = kH, .experts = 512, .top_k = 10, .expert_inter = 512, .shared_inter = 512,
                          .norm_topk = true};

struct Block {
  model::WeightStore ws;
  std::unique_ptr<model::MoeBlock> moe;
  double expert_bytes = 0;

  // An MLX 4-bit tensor of shape dims (rows along the last-but-one axis), random nibbles,
  // f16 scales 0.01 and biases -0.08.
  void add_q4(const std::string& name, std::vector<int64_t> dims, std::mt19937& rng) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
    const int64_t cols = dims.back(), groups = cols / kGroup;
    auto q = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * cols / 2));
    for (auto& b : *q) b = static_cast<uint8_t>(rng());
    auto sb = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * groups * 4));
    auto* h = reinterpret_cast<uint16_t*>(sb->data());
    for (int64_t i = 0; i < rows * groups; ++i) {
      h[i] = 0x211F;                     // scales: 0.01 (f16)
      h[rows * groups + i] = 0xAD1F;     // biases: -0.08 (f16)
    }
    tensor::Tensor t;
    t.name = name;
    t.dtype = tensor::DType::MLX_AFFINE;
    t.shape = dims;
    t.data = q->data();
    t.nbytes = q->size();
    t.bits = 4;
    t.group_size = kGroup;
    t.group_dtype = tensor::DType::F16;
    t.scales = h;
    t.biases = h + rows * groups;
    ws.add(t);
    ws.keep_alive(q);
    ws.keep_alive(sb);
  }

  // An MXFP4 tensor: random nibbles, E8M0 scales 2^-8 .. 2^-5.
  void add_mxfp4(const std::string& name, std::vector<int64_t> dims, std::mt19937& rng) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
    auto q = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * dims.back() / 2));
    for (auto& b : *q) b = static_cast<uint8_t>(rng());
    auto e = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * dims.back() / 32));
    for (auto& b : *e) b = static_cast<uint8_t>(119 + rng() % 4);
    tensor::Tensor t;
    t.name = name;
    t.dtype = tensor::DType::MXFP4;
    t.shape = dims;
    t.data = q->data();
    t.nbytes = q->size();
    t.bits = 4;
    t.group_size = 32;
    t.group_dtype = tensor::DType::U8;
    t.scales = e->data();
    ws.add(t);
    ws.keep_alive(q);
    ws.keep_alive(e);
  }

  // A GGUF Q4_0 tensor (the bench GGUF's expert format): random nibbles, f16 scales 0.01.
  void add_q4_0(const std::string& name, std::vector<int64_t> dims, std::mt19937& rng) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
    const size_t bytes = static_cast<size_t>(rows * dims.back() / 32 * 18);
    auto q = std::make_shared<std::vector<uint8_t>>(bytes);
    for (auto& b : *q) b = static_cast<uint8_t>(rng());
    for (size_t o = 0; o < bytes; o += 18) (*q)[o] = 0x1F, (*q)[o + 1] = 0x21;  // 0.01 (f16, little-endian)
    tensor::Tensor t;
    t.name = name;
    t.dtype = tensor::DType::Q4_0;
    t.shape = dims;
    t.data = q->data();
    t.nbytes = bytes;
    ws.add(t);
    ws.keep_alive(q);
  }

  enum class Format { Mlx4, Mxfp4, Q4_0 };
  explicit Block(const model::MoeShape& sh, bool mxfp4 = false) : Block(sh, mxfp4 ? Format::Mxfp4 : Format::Mlx4) {}
  Block(const model::MoeShape& sh, Format f) {
    std::mt19937 rng(7);
    const int64_t E = sh.experts, I = sh.expert_inter, S = sh.shared_inter;
    add_q4("mlp.gate.weight", {E, kH}, rng);
    auto add_expert = [&](const std::string& n, std::vector<int64_t> d) {
      if (f == Format::Mxfp4) add_mxfp4(n, std::move(d), rng);
      else if (f == Format::Q4_0) add_q4_0(n, std::move(d), rng);
      else add_q4(n, std::move(d), rng);
    };
    add_expert("mlp.switch_mlp.gate_proj.weight", {E, I, kH});
    add_expert("mlp.switch_mlp.up_proj.weight", {E, I, kH});
    add_expert("mlp.switch_mlp.down_proj.weight", {E, kH, I});
    if (S > 0) {
      add_q4("mlp.shared_expert.gate_proj.weight", {S, kH}, rng);
      add_q4("mlp.shared_expert.up_proj.weight", {S, kH}, rng);
      add_q4("mlp.shared_expert.down_proj.weight", {kH, S}, rng);
      add_q4("mlp.shared_expert_gate.weight", {1, kH}, rng);
    }
    moe = std::make_unique<model::MoeBlock>(ws, "mlp.", sh);
    // nibbles + f16 scale and bias per group, or + one E8M0 byte per 32
    // nibbles + one f16 scale per 32 (Q4_0)
    expert_bytes = 3.0 * I * kH * (0.5 + (f == Format::Mxfp4 ? 1.0 / 32 : f == Format::Q4_0 ? 2.0 / 32 : 4.0 / kGroup));
  }
};

void run(benchmark::State& st, const Block& b) {
  const int64_t E = b.moe->shape().experts, K = b.moe->shape().top_k;
  const int64_t n = st.range(0);
  compute::ThreadPool pool(static_cast<int>(st.range(1)));
  model::ExecContext ctx;
  ctx.pool = &pool;
  model::MoeScratch s;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(n * kH)), y(x.size());
  double read = 0, bytes = 0;
  for (auto _ : st) {
    for (float& v : x) v = nd(rng);  // a new routing every step
    b.moe->forward(x.data(), n, y.data(), ctx, s);
    int64_t used = 0;
    for (int64_t e = 0; e < E; ++e) used += s.count[e + 1] > s.count[e];
    read += used * b.expert_bytes / n;
    bytes += used * b.expert_bytes;
    benchmark::DoNotOptimize(y.data());
  }
  st.SetItemsProcessed(st.iterations() * n);
  st.counters["expert_MB_read_per_token"] = read / st.iterations() / 1e6;
  st.counters["active_MB_per_token"] = K * b.expert_bytes / 1e6;
  st.counters["expert_GB_per_s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
}

void BM_MoeBlock(benchmark::State& st) {
  static Block b(kQwen3);
  run(st, b);
}
void BM_MoeBlockNext(benchmark::State& st) {
  static Block b(kQwen3Next);
  run(st, b);
}
void BM_MoeBlockMxfp4(benchmark::State& st) {
  static Block b(kQwen3, true);
  run(st, b);
}
void BM_MoeBlockQ4_0(benchmark::State& st) {
  static Block b(kQwen3, Block::Format::Q4_0);
  run(st, b);
}
BENCHMARK(BM_MoeBlockQ4_0)->ArgNames({"rows", "threads"})->Args({1, 1})->Args({1, 2})->Args({16, 2})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MoeBlockMxfp4)->ArgNames({"rows", "threads"})->Args({1, 1})->Args({1, 2})->Args({16, 2})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MoeBlock)->ArgNames({"rows", "threads"})->Args({1, 1})->Args({1, 2})->Args({16, 2})->Args({64, 2})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MoeBlockNext)->ArgNames({"rows", "threads"})->Args({1, 2})->Args({16, 2})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
