// A mixture-of-experts MLP (Qwen3-MoE, Qwen3.5-MoE / Qwen3-Next, gpt-oss, Gemma 4, GLM-4.7-Flash): a router picks the
// top-k of E SwiGLU experts per token, their outputs are summed with the routing weights, plus
// (where the family has one) a shared expert scaled by a sigmoid gate.
//
// Tokens are grouped by expert, so each selected expert's weights are read once per forward for
// all the rows routed to it, and experts no row selected are not touched (their pages of the
// mapping never become resident). Batch-invariant: a row goes through the same matmul kernels
// (which are row-invariant) whatever other rows share its experts, and its k expert outputs are
// summed in its own rank order.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/layers.h"
#include "model/weights.h"

namespace rapid::model {

struct MoeShape {
  int64_t hidden = 0, experts = 0, top_k = 0, expert_inter = 0;
  int64_t shared_inter = 0;  // 0 = no shared expert
  bool norm_topk = false;
  // gpt-oss: the router is `router` (with a bias), its weights a softmax over the top-k logits
  // only, the experts carry biases and use the clamped SwiGLU (swiglu_oai_mul) with these.
  bool gpt_oss = false;
  float swiglu_alpha = 1.702f, swiglu_limit = 7.0f;
  // Gemma 4 (26B-A4B): the router `router.proj` reads its own input (forward's router_in) after an
  // RMSNorm scaled by router.scale / sqrt(hidden), its weights a softmax over the top-k logits times
  // router.per_expert_scale; GELU-tanh experts (experts.switch_glu.* or fused experts.gate_up_proj).
  bool gemma4 = false;
  float norm_eps = 1e-6f;
  // GLM-4.7-Flash (glm4_moe_lite; DeepSeek-V3's "noaux_tc" routing): sigmoid scores; the choice
  // adds gate.e_score_correction_bias and only the topk_groups best of `groups` equal expert groups
  // compete (a group scores the sum of its two best); the weights are the chosen experts' sigmoid
  // scores (renormalised with norm_topk) times routed_scaling. Its shared experts
  // (shared_experts.*, shared_inter wide) are added ungated.
  bool glm = false;
  int64_t groups = 1, topk_groups = 1;
  float routed_scaling = 1.0f;
};

// Per-forward buffers, shared by every MoE layer of a model.
struct MoeScratch {
  std::vector<float> logits, weight, xg, g, u, yg, sg, rn;
  std::vector<int32_t> sel, count, offset, rows, slot, used;
  std::vector<compute::MatmulGroup> mm;     // per expert run (used[i]: its index, -1 = shared)
  std::vector<compute::MatmulScratch> mms;  // one per entry of mm
};

class MoeBlock {
 public:
  // Loads `prefix` ("model.layers.N.mlp.") in any of the layouts checkpoints ship:
  //   experts.E.{gate,up,down}_proj.weight   per-expert 2-D (Hugging Face qwen3_moe releases)
  //   experts.gate_up_proj [E, 2I, H] + experts.down_proj [E, H, I]   (transformers 5 fused)
  //   switch_mlp.{gate,up,down}_proj.weight [E, I, H] / [E, H, I]      (mlx-lm, maybe quantized)
  // plus gate.weight [E, H] (router) and shared_expert.* / shared_expert_gate.weight [1, H]
  // (GLM: gate.e_score_correction_bias [E] and ungated shared_experts.*).
  // gpt-oss (shape.gpt_oss): router.{weight,bias}, expert biases, and the layouts
  //   experts.{gate,up,down}_proj.{weight,bias} [E, out, in] / [E, out]   (mlx-lm, maybe quantized)
  //   experts.gate_up_proj [E, H, 2I] (y = x·W, gate columns even, up odd) + gate_up_proj_bias
  //   [E, 2I], experts.down_proj [E, I, H] + down_proj_bias [E, H]   (transformers, f32/bf16/f16)
  //   experts.{gate_up,down}_proj_{blocks,scales} MXFP4 [E, 2I | H, in/32, 16] / [E, 2I | H, in/32]
  //   (the released checkpoints; rows are outputs, gate/up rows interleaved) + the same biases
  MoeBlock(const WeightStore& ws, const std::string& prefix, const MoeShape& shape);

  // out [n, H] = MoE(xn [n, H]); the router reads router_in instead of xn where given (Gemma 4).
  void forward(const float* xn, int64_t n, float* out, ExecContext& ctx, MoeScratch& s,
               const float* router_in = nullptr) const;

  // Exact (parity) mode: every projection as f32 (see materialize_f32 in layers.h).
  void materialize_f32(compute::ThreadPool& pool, std::vector<std::shared_ptr<std::vector<uint8_t>>>& owned);

  const MoeShape& shape() const { return sh_; }

 private:
  struct Expert {
    Linear gate, up, down;
  };
  // Expert e's views, aligned (copied out of a misaligned mapping) the first time it is routed to.
  const Expert& expert(int64_t e) const;
  void route(int64_t n, MoeScratch& s) const;
  void route_sigmoid_grouped(const float* logits, float* score, int32_t* order, int32_t* sel, float* weight) const;
  void run_experts(const float* xn, int64_t n, ExecContext& ctx, MoeScratch& s) const;
  void act_rows(const Expert& ex, int64_t n, float* g, float* u, int64_t r0, int64_t r1) const;
  void load_gpt_oss(const WeightStore& ws, const std::string& prefix);
  void set_interleaved_biases(Expert& ex, const tensor::Tensor& gate_up, const tensor::Tensor& down, int64_t e) const;

  MoeShape sh_;
  Linear router_;
  mutable std::vector<Expert> experts_;
  mutable std::vector<uint8_t> aligned_;  // per expert: its views are safe to read as typed arrays
  mutable std::vector<std::shared_ptr<std::vector<uint8_t>>> copies_;
  const WeightStore* ws_;  // the experts' views point into its mappings, so it outlives them anyway
  Expert shared_;
  Linear shared_gate_;
  std::vector<float> router_norm_, expert_scale_;  // Gemma 4's router RMSNorm weight and per-expert scale
  std::vector<float> choice_bias_;                 // GLM's e_score_correction_bias
};

// A 3-D tensor of stacked experts ([E, rows, cols]: mlx-lm's switch_mlp, transformers' fused
// experts.gate_up_proj / down_proj, and their MLX scales / biases). The loader leaves these in the
// file mapping even when the file misaligns them; MoeBlock reads only such tensors' data, and copies
// one expert's slice out to aligned memory when the file's is misaligned, on its first use.
bool stacked_experts(const std::string& name, size_t ndim);

// Expert `e`'s rows [row0, row0 + rows) of a stacked [E, R, cols] tensor, as a 2-D weight view
// into the same mapping (any row-quantized dtype or MLX affine). Throws Error on a shape mismatch.
compute::WeightView expert_slice(const tensor::Tensor& t, int64_t e, int64_t row0, int64_t rows, int64_t cols);

}  // namespace rapid::model
