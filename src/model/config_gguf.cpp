#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/config_load.h"

namespace rapid::model {

namespace {

// llama.cpp's converter replaces Llama 3.x's rope_scaling {rope_type: llama3, factor, low/high_freq_factor,
// original_max_position_embeddings} by a tensor "rope_freqs" of per-frequency divisors. Recover the
// HF parameters: factor = the largest divisor; the others take Llama 3's values, kept only if they
// reproduce every divisor (else the config stays "default" and the tensor remains available).
void infer_llama3_rope(const GgufFile& g, ModelConfig& c) {
  const tensor::Tensor* rf = g.find("rope_freqs.weight");
  if (!rf || rf->dtype != tensor::DType::F32 || c.head_dim <= 0 || rf->numel() != c.head_dim / 2) return;
  std::vector<float> v(size_t(rf->numel()));
  std::memcpy(v.data(), rf->data, v.size() * 4);
  double factor = 1.0;
  for (float x : v) factor = std::max(factor, double(x));
  for (double orig : {8192.0, double(c.max_position_embeddings)}) {
    const double low = 1.0, high = 4.0, pi = 3.14159265358979323846;
    bool ok = orig > 0;
    for (size_t i = 0; ok && i < v.size(); ++i) {
      double freq = 1.0 / std::pow(c.rope_theta, double(2 * i) / double(c.head_dim));
      double wavelen = 2 * pi / freq, want;
      if (wavelen < orig / high) want = 1.0;
      else if (wavelen > orig / low) want = factor;
      else {
        double smooth = (orig / wavelen - low) / (high - low);
        want = 1.0 / ((1 - smooth) / factor + smooth);
      }
      ok = std::fabs(want - v[i]) <= 1e-4 * std::max(1.0, want);
    }
    if (ok) {
      c.rope_scaling.type = "llama3";
      c.rope_scaling.factor = factor;
      c.rope_scaling.low_freq_factor = low;
      c.rope_scaling.high_freq_factor = high;
      c.rope_scaling.original_max_position_embeddings = int64_t(orig);
      return;
    }
  }
}

// llama.cpp's qwen35 and qwen3next: the Gated DeltaNet geometry under ssm.*, the layer kinds as
// attention.recurrent_layers (or every full_attention_interval-th layer full), MTP blocks counted
// in block_count, partial RoPE as rope.dimension_count. Value heads: tiled in qwen35 files,
// grouped by key head (Qwen3-Next's own order) in qwen3next files.
void read_qwen35(const GgufFile& g, ModelConfig& c, const std::string& arch) {
  const std::string a = arch + ".";
  auto need = [&](const std::string& key) {
    int64_t v = g.get_int(a + key, -1);
    if (v <= 0) throw FileError(g.path, "metadata '" + a + key + "' is missing or invalid");
    return v;
  };
  c.architecture = arch == "qwen35moe" ? "qwen3_5_moe" : arch == "qwen3next" ? "qwen3_next" : "qwen3_5";
  const int64_t nextn = g.get_int(a + "nextn_predict_layers", 0);
  if (nextn < 0 || nextn >= c.num_hidden_layers) throw FileError(g.path, "metadata '" + a + "nextn_predict_layers' is invalid");
  c.num_hidden_layers -= nextn;
  c.linear_conv_kernel_dim = need("ssm.conv_kernel");
  c.linear_key_head_dim = need("ssm.state_size");
  c.linear_num_key_heads = need("ssm.group_count");
  c.linear_num_value_heads = need("ssm.time_step_rank");
  const int64_t inner = need("ssm.inner_size");
  if (inner % c.linear_num_value_heads) throw FileError(g.path, a + "ssm.inner_size is not a multiple of ssm.time_step_rank");
  c.linear_value_head_dim = inner / c.linear_num_value_heads;
  c.linear_v_heads_tiled = arch != "qwen3next";
  const int64_t rot = g.get_int(a + "rope.dimension_count", c.head_dim);
  if (rot <= 0 || rot > c.head_dim) throw FileError(g.path, "metadata '" + a + "rope.dimension_count' is invalid");
  c.partial_rotary_factor = double(rot) / double(c.head_dim);
  const nlohmann::json* rl = g.get(a + "attention.recurrent_layers");
  if (rl && rl->is_array()) {
    if (int64_t(rl->size()) < c.num_hidden_layers)
      throw FileError(g.path, a + "attention.recurrent_layers has fewer entries than layers");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const auto& v = (*rl)[size_t(i)];
      c.layer_is_linear.push_back(v.is_boolean() ? v.get<bool>() : (v.is_number_integer() && v.get<int64_t>() != 0));
    }
  } else {
    const int64_t every = g.get_int(a + "full_attention_interval", 4);
    if (every <= 0) throw FileError(g.path, "metadata '" + a + "full_attention_interval' is invalid");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.layer_is_linear.push_back((i + 1) % every != 0);
  }
}

// llama.cpp's MoE keys (qwen3moe: Qwen3-30B-A3B, Qwen3-Coder-30B-A3B; qwen35moe: Qwen3.5-35B-A3B;
// qwen3next: Qwen3-Next-80B-A3B): expert_count, expert_used_count, expert_feed_forward_length (a
// number, or one per layer: llama.cpp reads either; ours must be equal, as the releases' are) and
// the shared expert's expert_shared_feed_forward_length (qwen35moe, qwen3next). llama.cpp routes in
// every layer of all three (their loaders have no dense layer) and always renormalises the top-k
// weights (build_moe_ffn's norm_w is fixed true for them), whatever the HF config's norm_topk_prob
// was; none reads expert_weights_scale. (gpt-oss: the same keys; its top-k softmax is the model's.)
void read_moe(const GgufFile& g, ModelConfig& c, const std::string& arch) {
  const std::string a = arch + ".";
  c.num_experts = g.get_int(a + "expert_count", 0);
  c.num_experts_per_tok = g.get_int(a + "expert_used_count", 0);
  if (c.num_experts <= 0) throw FileError(g.path, "metadata '" + a + "expert_count' is missing or not positive");
  if (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts)
    throw FileError(g.path, "metadata '" + a + "expert_used_count' (" + std::to_string(c.num_experts_per_tok) +
                                ") must be in [1, expert_count = " + std::to_string(c.num_experts) + "]");
  const nlohmann::json* ff = g.get(a + "expert_feed_forward_length");
  if (ff && ff->is_array()) {
    for (const auto& v : *ff) {
      const int64_t n = v.is_number_integer() ? v.get<int64_t>() : -1;
      if (c.moe_intermediate_size && n != c.moe_intermediate_size)
        throw FileError(g.path, "metadata '" + a + "expert_feed_forward_length' differs between layers (not supported)");
      c.moe_intermediate_size = n;
    }
  } else {
    // llama.cpp's fallback for files without the key: the dense width shared by the used experts.
    c.moe_intermediate_size = g.get_int(a + "expert_feed_forward_length", c.intermediate_size / c.num_experts_per_tok);
  }
  if (c.moe_intermediate_size <= 0)
    throw FileError(g.path, "metadata '" + a + "expert_feed_forward_length' is missing or not positive");
  if (arch == "qwen35moe" || arch == "qwen3next") {
    c.shared_expert_intermediate_size = g.get_int(a + "expert_shared_feed_forward_length", c.intermediate_size);
    if (c.shared_expert_intermediate_size <= 0)
      throw FileError(g.path, "metadata '" + a + "expert_shared_feed_forward_length' is missing or not positive");
  }
  c.norm_topk_prob = true;
  c.layer_is_moe.assign(static_cast<size_t>(c.num_hidden_layers), true);
}

// attention.sliding_window_pattern: one flag per layer, or every `pattern`-th layer global, as
// llama.cpp reads it; without the key, the architecture's default pattern (llama.cpp's too).
void read_sliding_pattern(const GgufFile& g, ModelConfig& c, const std::string& arch, int64_t pattern) {
  auto* p = g.get(arch + ".attention.sliding_window_pattern");
  if (p && p->is_array() && int64_t(p->size()) == c.num_hidden_layers) {
    for (auto& v : *p)
      c.layer_is_sliding.push_back(v.is_boolean() ? v.get<bool>() : (v.is_number_integer() && v.get<int64_t>() != 0));
    return;
  }
  if (p && p->is_number_integer()) pattern = p->get<int64_t>();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.layer_is_sliding.push_back(pattern <= 0 || (i + 1) % pattern != 0);
}

// llama.cpp's gemma4 (the converter's Gemma4Model). Head sizes: key_length is the full layers'
// (global_head_dim), key_length_swa the sliding layers'; value lengths must equal them (llama.cpp
// refuses otherwise). head_count_kv and feed_forward_length may be one entry per layer: the full
// layers' own KV head count (only with keys doubling as values, as in transformers) and the
// kv-shared layers' double-wide MLPs. Keys as values: full layers with attn_k but no attn_v.
// Proportional RoPE on full layers is rope_freqs: 1 for the turning frequencies, a huge divisor
// for the rest. The softcap defaults to llama.cpp's 30 when the key is absent (the converter
// writes none for a model without one, and llama.cpp then caps at 30).
void read_gemma4(const GgufFile& g, ModelConfig& c) {
  const std::string a = "gemma4.";
  auto need = [&](const std::string& key) {
    int64_t v = g.get_int(a + key, -1);
    if (v <= 0) throw FileError(g.path, "metadata '" + a + key + "' is missing or invalid");
    return v;
  };
  c.hidden_act = "gelu_pytorch_tanh";
  c.global_head_dim = need("attention.key_length");
  c.head_dim = need("attention.key_length_swa");
  if (g.get_int(a + "attention.value_length", c.global_head_dim) != c.global_head_dim)
    throw FileError(g.path, "metadata '" + a + "attention.value_length' differs from key_length (not supported)");
  if (g.get_int(a + "attention.value_length_swa", c.head_dim) != c.head_dim)
    throw FileError(g.path, "metadata '" + a + "attention.value_length_swa' differs from key_length_swa (not supported)");
  c.sliding_window = need("attention.sliding_window");
  if (!g.get(a + "attention.sliding_window_pattern"))
    throw FileError(g.path, "metadata '" + a + "attention.sliding_window_pattern' is missing");
  read_sliding_pattern(g, c, "gemma4", 0);
  if (int64_t(c.layer_is_sliding.size()) != c.num_hidden_layers)
    throw FileError(g.path, "metadata '" + a + "attention.sliding_window_pattern' has the wrong length");
  c.num_kv_shared_layers = g.get_int(a + "attention.shared_kv_layers", 0);
  if (c.num_kv_shared_layers < 0 || c.num_kv_shared_layers >= c.num_hidden_layers)
    throw FileError(g.path, "metadata '" + a + "attention.shared_kv_layers' must be in [0, block_count)");
  const int64_t first_shared = c.num_hidden_layers - c.num_kv_shared_layers;
  const auto* pl = g.get(a + "embedding_length_per_layer_input");
  if (!pl || !pl->is_number_integer() || pl->get<int64_t>() < 0)
    throw FileError(g.path, "metadata '" + a + "embedding_length_per_layer_input' is missing or invalid");
  c.hidden_size_per_layer_input = pl->get<int64_t>();
  c.vocab_size_per_layer_input = c.vocab_size;
  c.rope_local_base_freq = g.get_float(a + "rope.freq_base_swa", 10000.0);
  c.final_logit_softcapping = g.get_float(a + "final_logit_softcapping", 30.0);
  if (g.get_int(a + "rope.dimension_count_swa", c.head_dim) != c.head_dim)
    throw FileError(g.path, "metadata '" + a + "rope.dimension_count_swa' differs from key_length_swa (not supported)");
  // Keys as values: decided by the first kv-owning full layer, the same in every other.
  int k_eq_v = -1;
  for (int64_t i = 0; i < first_shared; ++i) {
    if (c.layer_is_sliding[size_t(i)]) continue;
    const std::string b = "blk." + std::to_string(i) + ".";
    const bool fused = g.find(b + "attn_qkv.weight") != nullptr;  // the converter's --fuse-qkv: v included
    if (!fused && !g.find(b + "attn_k.weight")) throw FileError(g.path, "tensor '" + b + "attn_k.weight' is missing");
    const int v = fused || g.find(b + "attn_v.weight") ? 0 : 1;
    if (k_eq_v >= 0 && v != k_eq_v)
      throw FileError(g.path, "tensor '" + b + "attn_v.weight': full-attention layers differ in having one");
    k_eq_v = v;
  }
  c.attention_k_eq_v = k_eq_v == 1;
  // Per-layer KV head counts: one for the sliding layers, one for the full layers.
  if (const auto* kv = g.get(a + "attention.head_count_kv"); kv && kv->is_array()) {
    if (int64_t(kv->size()) != c.num_hidden_layers)
      throw FileError(g.path, "metadata '" + a + "attention.head_count_kv' has the wrong length");
    int64_t n[2] = {0, 0};  // [sliding]
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const auto& v = (*kv)[size_t(i)];
      const int64_t x = v.is_number_integer() ? v.get<int64_t>() : -1;
      int64_t& want = n[c.layer_is_sliding[size_t(i)] ? 1 : 0];
      if (x <= 0 || (want && x != want))
        throw FileError(g.path, "metadata '" + a + "attention.head_count_kv' must be positive and the same in layers of one type");
      want = x;
    }
    c.num_key_value_heads = n[1] ? n[1] : n[0];
    if (n[0] && n[0] != c.num_key_value_heads) {
      if (!c.attention_k_eq_v)
        throw FileError(g.path, "metadata '" + a + "attention.head_count_kv' differs between full and sliding layers "
                                "whose keys are not their values (not supported)");
      c.num_global_key_value_heads = n[0];
    }
  }
  // One MLP width per layer: intermediate_size, or twice it in the kv-shared layers.
  if (const auto* ff = g.get(a + "feed_forward_length"); ff && ff->is_array()) {
    if (int64_t(ff->size()) != c.num_hidden_layers)
      throw FileError(g.path, "metadata '" + a + "feed_forward_length' has the wrong length");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const auto& v = (*ff)[size_t(i)];
      const int64_t x = v.is_number_integer() ? v.get<int64_t>() : -1;
      if (i == 0) c.intermediate_size = x;
      const bool ok = x == c.intermediate_size || (i >= first_shared && x == 2 * c.intermediate_size);
      if (x <= 0 || !ok)
        throw FileError(g.path, "metadata '" + a + "feed_forward_length' entry " + std::to_string(i) +
                                    " is neither the first layer's width nor (in a kv-shared layer) twice it");
      c.use_double_wide_mlp |= x != c.intermediate_size;
    }
  }
  if (c.intermediate_size <= 0) throw FileError(g.path, "metadata '" + a + "feed_forward_length' is missing or invalid");
  // Proportional RoPE: how many of the full head's frequencies turn.
  const int64_t rot = g.get_int(a + "rope.dimension_count", c.global_head_dim);
  const tensor::Tensor* rf = g.find("rope_freqs.weight");
  if (rot != c.global_head_dim)
    throw FileError(g.path, "metadata '" + a + "rope.dimension_count' differs from key_length (not supported)");
  c.global_partial_rotary_factor = 1.0;
  if (rf) {
    if (rf->dtype != tensor::DType::F32 || rf->numel() != c.global_head_dim / 2)
      throw FileError(g.path, "tensor 'rope_freqs.weight' must be f32 with key_length / 2 entries");
    std::vector<float> v(size_t(rf->numel()));
    std::memcpy(v.data(), rf->data, v.size() * 4);
    size_t turning = 0;
    while (turning < v.size() && v[turning] == 1.0f) ++turning;
    for (size_t i = turning; i < v.size(); ++i)
      if (!(v[i] >= 1e20f))
        throw FileError(g.path, "tensor 'rope_freqs.weight': expected 1 for the turning frequencies, then huge divisors "
                                "(llama.cpp's proportional RoPE); other scalings are not supported");
    if (turning == 0) throw FileError(g.path, "tensor 'rope_freqs.weight': no frequency turns");
    c.global_partial_rotary_factor = double(2 * turning) / double(c.global_head_dim);
  }
  // Experts beside the dense MLP where the router is (llama.cpp decides per layer; ours is all or none).
  c.enable_moe_block = g.find("blk.0.ffn_gate_inp.weight") != nullptr;
  for (int64_t i = 1; i < c.num_hidden_layers; ++i)
    if ((g.find("blk." + std::to_string(i) + ".ffn_gate_inp.weight") != nullptr) != c.enable_moe_block)
      throw FileError(g.path, "tensor 'blk." + std::to_string(i) + ".ffn_gate_inp.weight': experts in some layers only (not supported)");
  if (c.enable_moe_block) {
    c.num_experts = need("expert_count");
    c.num_experts_per_tok = need("expert_used_count");
    c.moe_intermediate_size = need("expert_feed_forward_length");
    if (c.num_experts_per_tok > c.num_experts)
      throw FileError(g.path, "metadata '" + a + "expert_used_count' exceeds expert_count");
  }
}

// llama.cpp's gpt-oss (the converter's GptOssModel): the window as attention.sliding_window, every
// other layer sliding from the first (llama.cpp's default pattern 2, transformers' layer_types of
// the releases), the experts intermediate_size wide, routed in every layer. Its SwiGLU clamp
// (alpha 1.702, limit 7) is fixed in llama.cpp, as ModelConfig's defaults are.
void read_gpt_oss(const GgufFile& g, ModelConfig& c) {
  c.architecture = "gpt_oss";
  c.sliding_window = g.get_int("gpt-oss.attention.sliding_window", 0);
  if (c.sliding_window <= 0) throw FileError(g.path, "metadata 'gpt-oss.attention.sliding_window' is missing or invalid");
  read_sliding_pattern(g, c, "gpt-oss", 2);
  read_moe(g, c, "gpt-oss");
}

// llama.cpp's mistral3 (Devstral Small 2, Ministral 3: the converter's Ministral3Model, a
// LlamaModel, so Q/K permuted for interleaved RoPE): YaRN under rope.scaling.*, transformers'
// mscale_all_dim as yarn_log_multiplier and llama_4_scaling_beta as attention.temperature_scale, whose
// position interval llama.cpp takes from rope.scaling.original_context_length (the converter writes
// no key of its own for it). llama.cpp assumes mscale = 1 (as the releases have): the YaRN
// attention factor is then get_mscale(factor, 1) / get_mscale(factor, mscale_all_dim).
void read_mistral3(const GgufFile& g, ModelConfig& c) {
  c.architecture = "ministral3";
  // llama.cpp's mistral3 graph also has a mixture-of-experts branch no release uses; ours does not.
  if (g.get_int("mistral3.expert_count", 0) != 0)
    throw FileError(g.path, "metadata 'mistral3.expert_count': mixture-of-experts mistral3 files are not supported");
  auto& r = c.rope_scaling;
  if (r.type != "default" && r.type != "yarn")
    throw FileError(g.path, "metadata 'mistral3.rope.scaling.type' is '" + r.type + "' (supported: none, yarn)");
  if (r.type == "yarn") {
    if (!(r.factor >= 1.0)) throw FileError(g.path, "metadata 'mistral3.rope.scaling.factor' must be at least 1");
    if (r.original_max_position_embeddings <= 0)
      throw FileError(g.path, "metadata 'mistral3.rope.scaling.original_context_length' is missing or invalid");
    if (const double all = g.get_float("mistral3.rope.scaling.yarn_log_multiplier", 0.0); all != 0.0) {
      auto ms = [&](double k) { return r.factor <= 1 ? 1.0 : 0.1 * k * std::log(r.factor) + 1.0; };
      r.attention_factor = ms(1.0) / ms(all);
    }
  }
  c.query_scale_beta = g.get_float("mistral3.attention.temperature_scale", 0.0);
  if (!std::isfinite(c.query_scale_beta))
    throw FileError(g.path, "metadata 'mistral3.attention.temperature_scale' is not finite");
  if (c.query_scale_beta != 0.0) {
    c.query_scale_interval = r.original_max_position_embeddings;
    if (c.query_scale_interval <= 0)
      throw FileError(g.path, "metadata 'mistral3.attention.temperature_scale' needs a positive "
                              "'mistral3.rope.scaling.original_context_length'");
  }
}

// llama.cpp's deepseek2, as its converter writes GLM-4.7-Flash (Glm4MoeLiteModel, a
// DeepseekV2Model): multi-head latent attention stored as MQA (head_count_kv 1, key_length =
// kv_lora_rank + rope), the real head sizes as key_length_mla / value_length_mla, the rope part
// as rope.dimension_count; the first leading_dense_block_count layers dense, the rest routed;
// routed_scaling_factor as expert_weights_scale, norm_topk_prob as expert_weights_norm (written only
// when true), n_group / topk_group as expert_group_count / expert_group_used_count, the shared
// experts as expert_shared_count; an MTP block counted in block_count (nextn_predict_layers).
// Only what glm4_moe_lite computes is accepted: sigmoid scores (expert_gating_func 2; absent, as
// llama.cpp defaults it: GLM-4.7-Flash's own shape, 47 or 48 layers and 154880 tokens) and no
// rope scaling (DeepSeek-V2 / V3 files differ there and are refused naming the key).
void read_deepseek2(const GgufFile& g, ModelConfig& c) {
  const std::string a = "deepseek2.";
  auto need = [&](const std::string& key) {
    int64_t v = g.get_int(a + key, -1);
    if (v <= 0) throw FileError(g.path, "metadata '" + a + key + "' is missing or invalid");
    return v;
  };
  c.architecture = "glm4_moe_lite";
  const int64_t nextn = g.get_int(a + "nextn_predict_layers", 0);
  if (nextn < 0 || nextn >= c.num_hidden_layers) throw FileError(g.path, "metadata '" + a + "nextn_predict_layers' is invalid");
  c.num_hidden_layers -= nextn;
  const int64_t gating = g.get_int(a + "expert_gating_func", 0);
  const bool glm_shape = (c.num_hidden_layers == 47 || c.num_hidden_layers == 48) && c.vocab_size == 154880;
  if (gating != 2 && !(gating == 0 && glm_shape))
    throw FileError(g.path, "metadata '" + a + "expert_gating_func' is " + std::to_string(gating) +
                                ": only sigmoid scores (2, GLM-4.7-Flash) are supported for deepseek2");
  if (c.rope_scaling.type != "default")
    throw FileError(g.path, "metadata '" + a + "rope.scaling.type' is '" + c.rope_scaling.type + "': not supported for deepseek2");
  c.q_lora_rank = g.get_int(a + "attention.q_lora_rank", 0);
  c.kv_lora_rank = need("attention.kv_lora_rank");
  c.qk_rope_head_dim = need("rope.dimension_count");
  // Older files (the converter before MLA absorption, attn_kv_b whole) have no *_mla keys: their
  // key_length / value_length are the heads' own sizes, as llama.cpp then reads them.
  const bool mla_keys = g.get(a + "attention.key_length_mla") || g.get(a + "attention.value_length_mla");
  const int64_t k_mla = need(mla_keys ? "attention.key_length_mla" : "attention.key_length");
  c.v_head_dim = need(mla_keys ? "attention.value_length_mla" : "attention.value_length");
  if (c.q_lora_rank < 0) throw FileError(g.path, "metadata '" + a + "attention.q_lora_rank' is invalid");
  if (c.qk_rope_head_dim % 2 || k_mla < c.qk_rope_head_dim)
    throw FileError(g.path, "metadata '" + a + "rope.dimension_count' must be even and at most attention.key_length_mla");
  c.qk_nope_head_dim = k_mla - c.qk_rope_head_dim;
  c.head_dim = k_mla;
  c.num_key_value_heads = c.num_attention_heads;  // MLA expands the latent to every head
  read_moe(g, c, "deepseek2");
  const nlohmann::json* norm = g.get(a + "expert_weights_norm");
  if (norm && !norm->is_boolean()) throw FileError(g.path, "metadata '" + a + "expert_weights_norm' is not a bool");
  c.norm_topk_prob = norm && norm->get<bool>();
  c.routed_scaling_factor = g.get_float(a + "expert_weights_scale", 1.0);
  if (!(c.routed_scaling_factor > 0) || !std::isfinite(c.routed_scaling_factor))
    throw FileError(g.path, "metadata '" + a + "expert_weights_scale' must be positive");
  c.n_group = g.get_int(a + "expert_group_count", 1);
  c.topk_group = g.get_int(a + "expert_group_used_count", 1);
  if (c.n_group <= 0 || c.num_experts % c.n_group || c.topk_group <= 0 || c.topk_group > c.n_group)
    throw FileError(g.path, "metadata '" + a + "expert_group_count' / 'expert_group_used_count' (" +
                                std::to_string(c.n_group) + " / " + std::to_string(c.topk_group) +
                                ") do not split the experts into groups");
  const int64_t shared = g.get_int(a + "expert_shared_count", 0);
  if (shared < 0) throw FileError(g.path, "metadata '" + a + "expert_shared_count' is invalid");
  c.shared_expert_intermediate_size = c.moe_intermediate_size * shared;
  const int64_t dense = g.get_int(a + "leading_dense_block_count", 0);
  if (dense < 0 || dense > c.num_hidden_layers)
    throw FileError(g.path, "metadata '" + a + "leading_dense_block_count' is invalid");
  if (dense > 0 && c.intermediate_size <= 0)
    throw FileError(g.path, "metadata '" + a + "feed_forward_length' is missing (dense leading layers)");
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.layer_is_moe[size_t(i)] = i >= dense;
}

}  // namespace

ModelConfig config_from_gguf(const GgufFile& g) {
  ModelConfig c;
  std::string arch = g.get_string("general.architecture");
  if (arch.empty()) throw FileError(g.path, "no general.architecture in metadata");
  c.architecture = arch;
  auto k = [&](const std::string& suffix) { return arch + "." + suffix; };
  auto need = [&](const std::string& suffix) {
    int64_t v = g.get_int(k(suffix), -1);
    if (v <= 0) throw FileError(g.path, "metadata '" + k(suffix) + "' is missing or invalid");
    return v;
  };
  // Keys some architectures (gemma4) store one per layer: the fallback here, their reader decides.
  auto scalar_int = [&](const std::string& key, int64_t fallback) {
    const nlohmann::json* v = g.get(key);
    return v && v->is_array() ? fallback : g.get_int(key, fallback);
  };
  c.num_hidden_layers = need("block_count");
  c.hidden_size = need("embedding_length");
  c.intermediate_size = scalar_int(k("feed_forward_length"), 0);
  c.num_attention_heads = need("attention.head_count");
  c.num_key_value_heads = scalar_int(k("attention.head_count_kv"), c.num_attention_heads);
  c.head_dim = g.get_int(k("attention.key_length"), c.hidden_size / c.num_attention_heads);
  c.max_position_embeddings = g.get_int(k("context_length"), 0);
  c.rms_norm_eps = g.get_float(k("attention.layer_norm_rms_epsilon"), c.rms_norm_eps);
  c.rope_theta = g.get_float(k("rope.freq_base"), 10000.0);
  std::string rs = g.get_string(k("rope.scaling.type"), "none");
  if (rs != "none" && !rs.empty()) {
    c.rope_scaling.type = rs;
    c.rope_scaling.factor = g.get_float(k("rope.scaling.factor"), 1.0);
    c.rope_scaling.original_max_position_embeddings = g.get_int(k("rope.scaling.original_context_length"), 0);
    if (rs == "yarn") {
      c.rope_scaling.beta_fast = g.get_float(k("rope.scaling.yarn_beta_fast"), c.rope_scaling.beta_fast);
      c.rope_scaling.beta_slow = g.get_float(k("rope.scaling.yarn_beta_slow"), c.rope_scaling.beta_slow);
    }
  }
  if (c.rope_scaling.type == "default") infer_llama3_rope(g, c);
  if (auto* emb = g.find("token_embd.weight")) c.vocab_size = emb->shape[0];
  else if (auto toks = g.string_array("tokenizer.ggml.tokens"); !toks.empty()) c.vocab_size = int64_t(toks.size());
  c.vocab_size = g.get_int(k("vocab_size"), c.vocab_size);
  c.tie_word_embeddings = g.find("output.weight") == nullptr;
  c.attention_bias = g.find("blk.0.attn_q.bias") != nullptr;
  if (arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3next") read_qwen35(g, c, arch);
  if (arch == "qwen3moe") c.architecture = "qwen3_moe";
  if (arch == "qwen3moe" || arch == "qwen35moe" || arch == "qwen3next") read_moe(g, c, arch);
  if (arch == "gemma3") {
    c.hidden_act = "gelu_pytorch_tanh";
    c.sliding_window = g.get_int(k("attention.sliding_window"), 0);
    // Gemma 3 scales queries by 1/sqrt(head_dim) (query_pre_attn_scalar = head_dim for the sizes
    // GGUF carries no key for); local layers use RoPE base 10000.
    c.query_pre_attn_scalar = double(c.head_dim);
    c.rope_local_base_freq = 10000.0;
    c.final_logit_softcapping = g.get_float(k("final_logit_softcapping"), 0.0);
    c.attn_logit_softcapping = g.get_float(k("attn_logit_softcapping"), 0.0);
    read_sliding_pattern(g, c, arch, 6);
  }
  if (arch == "gemma4") read_gemma4(g, c);
  if (arch == "gpt-oss") read_gpt_oss(g, c);
  if (arch == "mistral3") read_mistral3(g, c);
  if (arch == "deepseek2") read_deepseek2(g, c);
  auto tok_id = [&](const char* key) -> std::optional<int32_t> {
    auto* v = g.get(key);
    if (v && v->is_number_integer()) return v->get<int32_t>();
    return std::nullopt;
  };
  c.bos_token_id = tok_id("tokenizer.ggml.bos_token_id");
  c.pad_token_id = tok_id("tokenizer.ggml.padding_token_id");
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (auto id = tok_id(key)) {
      bool dup = false;
      for (auto x : c.eos_token_ids) dup |= x == *id;
      if (!dup) c.eos_token_ids.push_back(*id);
    }
  }
  // GGUF often names only one eos; chat models stop at their end-of-turn token too (HF lists it in
  // generation_config). Like llama.cpp, recognise the usual end-of-turn control tokens by text.
  auto toks = g.string_array("tokenizer.ggml.tokens");
  auto types = g.int_array("tokenizer.ggml.token_type");
  static const char* kEot[] = {"<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|eom_id|>", "<|end|>", "<|endoftext|>"};
  for (size_t i = 0; i < toks.size(); ++i) {
    std::string_view s = toks[i];
    if (s.size() < 5 || s[0] != '<') continue;
    bool control = types.size() != toks.size() || types[i] == 3;
    if (!control) continue;
    for (const char* e : kEot)
      if (s == e) {
        bool dup = false;
        for (auto x : c.eos_token_ids) dup |= x == int32_t(i);
        if (!dup) c.eos_token_ids.push_back(int32_t(i));
      }
  }
  return c;
}

}  // namespace rapid::model
