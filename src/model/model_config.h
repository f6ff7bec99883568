// One model description whatever the source (HF config.json + generation_config.json, or GGUF
// metadata). Field names follow HF's config.json.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rapid::model {

struct RopeScaling {
  std::string type = "default";  // default | linear | llama3 | yarn
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;      // llama3
  int64_t original_max_position_embeddings = 0;              // llama3 / yarn
  double beta_fast = 32.0, beta_slow = 1.0;                  // yarn
  std::optional<double> attention_factor;                    // yarn (mscale; else from mscale / mscale_all_dim)
};

struct ModelConfig {
  std::string architecture;  // "llama", "qwen2", "qwen3", "gemma3", "mistral", ... (HF model_type)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // hidden_size / heads unless given
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  double rope_local_base_freq = 10000.0;  // gemma3 sliding layers
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // qwen2 q/k/v bias
  std::string hidden_act = "silu";
  // Gemma 3
  int64_t sliding_window = 0;
  std::vector<bool> layer_is_sliding;  // per layer; empty = all global
  double query_pre_attn_scalar = 0.0;
  double final_logit_softcapping = 0.0;
  double attn_logit_softcapping = 0.0;
  // Qwen3.5 hybrid: Gated DeltaNet ("linear_attention") layers between full-attention layers.
  std::vector<bool> layer_is_linear;  // per layer; empty = no linear-attention layers
  int64_t linear_num_key_heads = 0, linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0, linear_value_head_dim = 0, linear_conv_kernel_dim = 0;
  double partial_rotary_factor = 1.0;  // RoPE rotates the first head_dim × this dimensions
  // Value heads in "tiled" order (llama.cpp's GGUF: v head h reads key head h % k_heads) rather
  // than grouped by key head (HF / MLX: h / (v_heads / k_heads)).
  bool linear_v_heads_tiled = false;
  // Mixture of experts (qwen3_moe, qwen3_5_moe): layer_is_moe[i] says whether layer i's MLP is
  // routed (empty = dense model).
  std::vector<bool> layer_is_moe;
  int64_t num_experts = 0, num_experts_per_tok = 0, moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;  // 0 = no shared expert
  bool norm_topk_prob = false;  // renormalise the top-k routing weights to sum to 1
  double swiglu_alpha = 1.702, swiglu_limit = 7.0;  // gpt-oss's clamped SwiGLU
  // Gemma 4: full-attention layers with their own head size (and KV heads when keys double as
  // values), proportional RoPE over a fraction of the head, the last layers reading an earlier
  // layer's KV, and per-layer token embeddings.
  int64_t global_head_dim = 0;              // 0 = head_dim
  int64_t num_global_key_value_heads = 0;   // k_eq_v full layers; 0 = num_key_value_heads
  double global_partial_rotary_factor = 1.0;
  bool attention_k_eq_v = false;            // full layers: V is the raw K projection
  int64_t num_kv_shared_layers = 0;
  int64_t hidden_size_per_layer_input = 0, vocab_size_per_layer_input = 0;
  bool use_double_wide_mlp = false;         // kv-shared layers' MLPs are 2 × intermediate_size
  bool enable_moe_block = false;
  // GLM-4.7-Flash (glm4_moe_lite): DeepSeek-style multi-head latent attention (queries through a
  // q_lora_rank bottleneck, keys and values expanded from a shared kv_lora_rank latent; each query /
  // key head a no-rope part then a rope part, value heads v_head_dim wide) and DeepSeek-V3 routing
  // (model/moe.h, MoeShape::glm).
  int64_t q_lora_rank = 0;  // 0 = a plain q_proj
  int64_t kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  int64_t n_group = 1, topk_group = 1;
  double routed_scaling_factor = 1.0;
  // Llama-4 style attention temperature (ministral3: rope_parameters' llama_4_scaling_beta):
  // queries at position p scaled by 1 + beta · ln(1 + floor(p / interval)), interval being
  // rope_parameters' original_max_position_embeddings. beta 0 = off.
  double query_scale_beta = 0.0;
  int64_t query_scale_interval = 0;
  // Special tokens from config / generation_config / GGUF.
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;
  std::optional<int32_t> pad_token_id;
  // generation_config defaults
  std::optional<double> temperature, top_p, top_k, repetition_penalty;
};

}  // namespace rapid::model
