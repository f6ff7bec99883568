// Mixture-of-experts checkpoints (model/moe.h) that do not fit: refused with the tensor or field
// at fault. On the tiny random-weight models mlx-lm itself writes (scripts/make_tiny_moe.py:
// qwen3_moe, qwen3_5_moe, gpt_oss, qwen3_next; 8 experts, top-2), whose parity with mlx-lm, prefill vs
// decode and batching are checked with every tiny model in model_tiny_test.cpp. The set is
// generated into $RAPID_MODEL_CACHE/moe-tiny on first use; the tests skip only when that is
// impossible (no mlx-lm in the test venv).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "common/error.h"
#include "compute/ops.h"
#include "model/arch.h"
#include "model/convert.h"
#include "model/moe.h"
#include "model/weights.h"
#include "tensor/fp16.h"
#include "tensor/quant_formats.h"
#include "model_parity_helpers.h"
#include "resident_bytes.h"
#include "moe_tiny.h"

namespace fs = std::filesystem;
using namespace rapid;
using namespace rapid::model;
using namespace rapid::parity;
using namespace rapid::moe_tiny;

// Checkpoints that do not match their config are refused with the tensor at fault (Qwen3-Next's
// fused DeltaNet projections too, when the config gives another number of value heads).
TEST(MoeModel, MismatchedExpertsAreRefused) {
  REQUIRE_TINY();
  const fs::path tmp = fs::temp_directory_path() / ("rapid-moe-test-" + std::to_string(::getpid()));
  const std::vector<const char*> all = {"qwen3-moe/hf-f32", "qwen3-moe/mlx-q4", "qwen3-next/hf-f32",
                                        "qwen3-next/mlx-q4"};
  const std::vector<const char*> next = {"qwen3-next/hf-f32", "qwen3-next/mlx-q4"};
  for (auto [field, value, what, copies] :
       {std::tuple{"num_experts", 16, "mlp.gate.weight", all}, std::tuple{"moe_intermediate_size", 32, "expected", all},
        std::tuple{"num_experts_per_tok", 9, "num_experts_per_tok", all},
        std::tuple{"linear_num_value_heads", 2, "in_proj_qkvz", next}}) {
    for (const char* c : copies) {
      fs::remove_all(tmp);
      fs::copy(root + "/" + c, tmp);
      json cfg = read_json((tmp / "config.json").string());
      cfg[field] = value;
      std::ofstream(tmp / "config.json") << cfg.dump();
      try {
        make(tmp.string(), compute::MatmulPath::Fast, tensor::DType::F16);
        ADD_FAILURE() << c << " with " << field << " = " << value << " was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      }
    }
  }
  fs::remove_all(tmp);
}

// mlx-lm's stacked experts are misaligned in its files and stay in the mapping until an expert is
// first routed to, when MoeBlock copies it: the copied bytes must then leave the mapping's resident
// set, or every expert in use is resident twice. Here (f32 experts of 16 KB) after greedy decoding
// has routed to experts, the mapping may hold only the pages tensors share at their ends.
TEST(MoeModel, ExpertsCopiedFromAMisalignedFileAreNotResidentTwice) {
  REQUIRE_TINY();
  const std::string dir = root + "/qwen3-moe/mlx-f32";
  const std::string file = fs::canonical(dir + "/model.safetensors").string();
  auto ck = std::shared_ptr<Checkpoint>(load_checkpoint(dir));
  size_t stacked = 0, tensors = 0;
  for (auto& [name, t] : ck->weights.all()) {
    ++tensors;
    if (name.find("switch_mlp") != std::string::npos) stacked += t.nbytes;
  }
  ModelOptions o;
  o.num_threads = 2;
  auto m = create_model(ck, o);
  const json g = read_json(dir + "/greedy.json");
  std::vector<float> logits(m->config().vocab_size);
  for (auto& c : g["cases"]) {  // the prompts and their greedy continuations route to the experts
    std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>();
    for (auto& st : c["steps"]) ids.push_back(st["token"].get<int32_t>());
    auto state = m->new_state(ids.size());
    m->forward(ids.data(), ids.size(), *state, logits.data());
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  ASSERT_GT(stacked, 48 * page);  // else this could not tell
  // Header pages (the parser read them) and at most two shared end pages per tensor.
  EXPECT_LE(test_mem::resident_bytes_of(file), 2 * page + 2 * page * tensors) << "experts " << stacked << " bytes";
}

// convert would write a config without the MoE fields: it refuses MoE checkpoints clearly.
TEST(MoeModel, ConvertRefusesMoe) {
  REQUIRE_TINY();
  const fs::path tmp = fs::temp_directory_path() / ("rapid-moe-convert-" + std::to_string(::getpid()));
  try {
    convert_checkpoint(root + "/qwen3-moe/mlx-q4", tmp.string(), ConvertOptions{});
    ADD_FAILURE() << "converted a MoE checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixture-of-experts"), std::string::npos) << e.what();
  }
  fs::remove_all(tmp);
}

// A gpt-oss checkpoint whose MXFP4 expert names (*_blocks) hold something else (here the f32 fused
// tensor, renamed in the header) is refused with the checkpoint, the tensor and what was expected,
// not loaded wrong. (The real MXFP4 layout loads: model_mxfp4_test.cpp.)
TEST(MoeModel, GptOssMislabelledMxfp4ExpertsAreRefusedClearly) {
  REQUIRE_TINY();
  const fs::path tmp = fs::temp_directory_path() / ("rapid-moe-mxfp4-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::copy(root + "/gpt-oss/hf-f32", tmp);
  const fs::path st = tmp / "model.safetensors";
  std::ifstream in(st, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes.data(), 8);
  json header = json::parse(bytes.substr(8, hlen)), renamed;
  for (auto& [k, v] : header.items()) {
    const std::string sfx = ".experts.gate_up_proj";
    const bool fused = k.size() > sfx.size() && k.compare(k.size() - sfx.size(), sfx.size(), sfx) == 0;
    renamed[fused ? k + "_blocks" : k] = v;
  }
  std::string h = renamed.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t n = h.size();
  std::ofstream out(st, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h << bytes.substr(8 + hlen);
  out.close();
  try {
    make(tmp.string(), compute::MatmulPath::Fast, tensor::DType::F16);
    ADD_FAILURE() << "loaded a checkpoint with MXFP4 expert names";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), tmp.string());
    EXPECT_NE(std::string(e.what()).find("gate_up_proj_blocks: expected uint8 [experts, 128, 2, 16], got F32"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(tmp);
}

namespace {

// A [dims] tensor of random Q4_0 blocks (f16 scales 0.01-0.05, random nibbles) or of f32 values.
void add_random(WeightStore& ws, const std::string& name, std::vector<int64_t> dims, tensor::DType t, std::mt19937& rng) {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
  const size_t bytes = tensor::row_bytes(t, dims.back()) * static_cast<size_t>(rows);
  auto buf = std::make_shared<std::vector<uint8_t>>(bytes);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  if (t == tensor::DType::F32) {
    for (size_t i = 0; i < bytes / 4; ++i) reinterpret_cast<float*>(buf->data())[i] = u(rng) * 4;
  } else {
    for (auto& b : *buf) b = static_cast<uint8_t>(rng());
    for (size_t o = 0; o < bytes; o += 18) {
      const uint16_t h = tensor::f32_to_f16(0.01f + std::fabs(u(rng)) * 0.8f);
      std::memcpy(buf->data() + o, &h, 2);
    }
  }
  tensor::Tensor tt;
  tt.name = name;
  tt.dtype = t;
  tt.shape = std::move(dims);
  tt.data = buf->data();
  tt.nbytes = bytes;
  ws.add(tt);
  ws.keep_alive(buf);
}

}  // namespace

// A Qwen3.5-MoE-shaped block (Q4_0 experts, normalised top-k, sigmoid-gated shared expert) against
// its definition computed expert by expert with compute::matmul: bitwise, for a batch (where one
// expert has every row and others a few) and for each row alone, with 1 and 2 threads.
TEST(MoeBlock, BatchAndRowsAloneAreBitwiseThePerExpertDefinition) {
  const int64_t H = 256, E = 6, K = 2, I = 96, S = 64, n = 7;
  std::mt19937 rng(5);
  WeightStore ws;
  add_random(ws, "mlp.gate.weight", {E, H}, tensor::DType::F32, rng);
  add_random(ws, "mlp.switch_mlp.gate_proj.weight", {E, I, H}, tensor::DType::Q4_0, rng);
  add_random(ws, "mlp.switch_mlp.up_proj.weight", {E, I, H}, tensor::DType::Q4_0, rng);
  add_random(ws, "mlp.switch_mlp.down_proj.weight", {E, H, I}, tensor::DType::Q4_0, rng);
  add_random(ws, "mlp.shared_expert.gate_proj.weight", {S, H}, tensor::DType::Q4_0, rng);
  add_random(ws, "mlp.shared_expert.up_proj.weight", {S, H}, tensor::DType::Q4_0, rng);
  add_random(ws, "mlp.shared_expert.down_proj.weight", {H, S}, tensor::DType::Q4_0, rng);
  add_random(ws, "mlp.shared_expert_gate.weight", {1, H}, tensor::DType::F32, rng);
  // Expert 0's router row and positive inputs: every row routes to expert 0 (an expert with all rows).
  float* r0 = static_cast<float*>(const_cast<void*>(ws.get("mlp.gate.weight").data));
  for (int64_t h = 0; h < H; ++h) r0[h] = 0.05f;
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(n * H));
  for (float& v : x) v = std::fabs(nd(rng)) + 0.2f;
  const MoeShape sh{.hidden = H, .experts = E, .top_k = K, .expert_inter = I, .shared_inter = S, .norm_topk = true};
  MoeBlock moe(ws, "mlp.", sh);

  compute::ThreadPool p1(1);
  auto mm = [&](const compute::WeightView& w, const float* in, float* out) {
    compute::MatmulScratch s;
    compute::matmul(w, in, 1, out, p1, s);
  };
  auto view = [&](const std::string& name, int64_t e, int64_t rows, int64_t cols) {
    return expert_slice(ws.get(name), e, 0, rows, cols);
  };
  auto swiglu = [&](const compute::WeightView& g, const compute::WeightView& u, const compute::WeightView& d,
                    const float* in, int64_t inter, float* out) {
    std::vector<float> a(static_cast<size_t>(inter)), b(a.size());
    mm(g, in, a.data());
    mm(u, in, b.data());
    compute::silu_mul(a.data(), b.data(), inter, a.data());
    mm(d, a.data(), out);
  };
  std::vector<float> ref(x.size());
  int all0 = 0;
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x.data() + t * H;
    std::vector<float> l(E), p(E), y(H);
    mm(compute::WeightView::of(ws.get("mlp.gate.weight")), xt, l.data());
    const float mx = *std::max_element(l.begin(), l.end());
    float sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(l[e] - mx);
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    std::vector<int32_t> order(E);
    for (int64_t e = 0; e < E; ++e) order[e] = static_cast<int32_t>(e);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    all0 += order[0] == 0 || order[1] == 0;
    const float tot = p[order[0]] + p[order[1]];
    float* o = ref.data() + t * H;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = order[k];
      swiglu(view("mlp.switch_mlp.gate_proj.weight", e, I, H), view("mlp.switch_mlp.up_proj.weight", e, I, H),
             view("mlp.switch_mlp.down_proj.weight", e, H, I), xt, I, y.data());
      for (int64_t h = 0; h < H; ++h) o[h] += p[e] / tot * y[h];
    }
    float sg = 0;
    mm(compute::WeightView::of(ws.get("mlp.shared_expert_gate.weight")), xt, &sg);
    swiglu(compute::WeightView::of(ws.get("mlp.shared_expert.gate_proj.weight")),
           compute::WeightView::of(ws.get("mlp.shared_expert.up_proj.weight")),
           compute::WeightView::of(ws.get("mlp.shared_expert.down_proj.weight")), xt, S, y.data());
    const float g = 1.0f / (1.0f + std::exp(-sg));
    for (int64_t h = 0; h < H; ++h) o[h] += g * y[h];
  }
  ASSERT_EQ(all0, n) << "expert 0 should take every row";
  for (int threads : {1, 2}) {
    compute::ThreadPool pool(threads);
    ExecContext ctx;
    ctx.pool = &pool;
    MoeScratch s;
    std::vector<float> out(x.size());
    moe.forward(x.data(), n, out.data(), ctx, s);
    std::set<int64_t> sizes;
    for (int64_t e = 0; e < E; ++e) sizes.insert(s.count[e + 1] - s.count[e]);
    EXPECT_GT(sizes.size(), 2u) << "experts should have different row counts";
    EXPECT_EQ(0, std::memcmp(out.data(), ref.data(), out.size() * 4)) << threads << " threads, batch of " << n;
    for (int64_t t = 0; t < n; ++t) {
      moe.forward(x.data() + t * H, 1, out.data(), ctx, s);
      EXPECT_EQ(0, std::memcmp(out.data(), ref.data() + t * H, H * 4)) << threads << " threads, row " << t << " alone";
    }
  }
}
