// Mixture-of-experts checkpoints (model/moe.h) that do not fit: refused with the tensor or field
// at fault. On the tiny random-weight models mlx-lm itself writes (scripts/make_tiny_moe.py:
// qwen3_moe, qwen3_5_moe, gpt_oss, qwen3_next; 8 experts, top-2), whose parity with mlx-lm, prefill vs
// decode and batching are checked with every tiny model in model_tiny_test.cpp. The set is
// generated into $RAPID_MODEL_CACHE/moe-tiny on first use; the tests skip only when that is
// impossible (no mlx-lm in the test venv).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "common/error.h"
#include "model/arch.h"
#include "model/convert.h"
#include "model/weights.h"
#include "model_parity_helpers.h"
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
