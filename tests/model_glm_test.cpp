// GLM-4.7-Flash specifics (model/glm4_moe_lite.cpp, model/mla.h, MoeShape::glm) on the tiny
// mlx-lm model of scripts/make_tiny_glm.py, whose parity with mlx-lm (mlx-f32, the HF layout with
// its kv_b_proj, per-expert tensors and an MTP layer to ignore, mlx-q4), prefill vs decode and
// batching are checked with every tiny model in model_tiny_test.cpp: a sequence resuming from
// another's cached pages (the prefix cache's path) continues as mlx-lm does, transformers 5's
// mlp_layer_types is read as the released config's first_k_dense_replace, and checkpoints that do
// not fit their config are refused with the field or tensor at fault.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "common/error.h"
#include "glm_tiny.h"
#include "model_parity_helpers.h"

namespace fs = std::filesystem;
using namespace rapid;
using namespace rapid::model;
using namespace rapid::parity;

namespace {

#define REQUIRE_GLM()                                   \
  std::string why_;                                     \
  const std::string root = glm_tiny::tiny_models(&why_); \
  if (root.empty()) SET_MISSING(why_)

// A copy of root/copy under a fresh temporary directory with `edit` applied to its config.json.
template <class F>
fs::path edited_copy(const std::string& root, const char* copy, F edit) {
  const fs::path tmp = fs::temp_directory_path() / ("rapid-glm-test-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::copy(root + "/" + copy, tmp);
  json cfg = read_json((tmp / "config.json").string());
  edit(cfg);
  std::ofstream(tmp / "config.json") << cfg.dump();
  return tmp;
}

}  // namespace

// A sequence that adopts another's pages after p tokens (whole and partial blocks) and continues:
// mlx-lm's greedy tokens (prompt in one call, then one token per call).
TEST(Glm, ResumeFromAdoptedPagesMatchesMlxLm) {
  REQUIRE_GLM();
  for (const char* copy : {"mlx-f32", "hf-f32"}) {
    const std::string d = root + "/glm/" + copy;
    auto m = qwen35::make(d, compute::MatmulPath::Exact, tensor::DType::F32);
    resume_from_adopted_pages(*m, read_json(d + "/greedy.json")["cases"][4], {5, 16, 23, -1}, copy);
  }
}

// transformers 5 writes mlp_layer_types instead of first_k_dense_replace: the same layers, the
// same tokens; a pattern the weights do not have (layer 0 routed) is refused naming its router.
TEST(Glm, MlpLayerTypesSayWhichLayersRoute) {
  REQUIRE_GLM();
  const fs::path tmp = edited_copy(root, "glm/hf-f32", [](json& c) {
    c.erase("first_k_dense_replace");
    c["mlp_layer_types"] = {"dense", "sparse", "sparse"};
  });
  auto m = qwen35::make(tmp.string(), compute::MatmulPath::Exact, tensor::DType::F32);
  exact_greedy(*m, read_json((tmp / "greedy.json").string()), 1e-4);
  edited_copy(root, "glm/hf-f32", [](json& c) { c["mlp_layer_types"] = {"sparse", "sparse", "sparse"}; });
  try {
    qwen35::make(tmp.string(), compute::MatmulPath::Fast, tensor::DType::F16);
    ADD_FAILURE() << "a routed layer 0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.gate"), std::string::npos) << e.what();
  }
  fs::remove_all(tmp);
}

// Configs the weights do not fit, or routing / RoPE this model does not implement, are refused
// naming the field or tensor at fault.
TEST(Glm, MismatchedCheckpointsAreRefused) {
  REQUIRE_GLM();
  fs::path tmp;
  for (auto [copy, field, value, what] :
       {std::tuple{"glm/hf-f32", "kv_lora_rank", json(32), "kv_a_proj_with_mqa"},
        std::tuple{"glm/mlx-f32", "v_head_dim", json(16), "unembed_out"},
        std::tuple{"glm/mlx-q4", "qk_nope_head_dim", json(32), "q_b_proj"},
        std::tuple{"glm/hf-f32", "q_lora_rank", json(nullptr), "q_proj"},
        std::tuple{"glm/mlx-q4", "n_routed_experts", json(16), "mlp.gate"},
        std::tuple{"glm/hf-f32", "n_group", json(3), "n_group"},
        std::tuple{"glm/hf-f32", "scoring_func", json("softmax"), "scoring_func"},
        std::tuple{"glm/mlx-f32", "rope_scaling", json({{"rope_type", "yarn"}, {"factor", 4.0}}), "rope scaling"}}) {
    tmp = edited_copy(root, copy, [&](json& c) { c[field] = value; });
    try {
      qwen35::make(tmp.string(), compute::MatmulPath::Fast, tensor::DType::F16);
      ADD_FAILURE() << copy << " with " << field << " = " << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << field << ": " << e.what();
    }
  }
  fs::remove_all(tmp);
}
