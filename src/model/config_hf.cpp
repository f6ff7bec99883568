#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/error.h"
#include "common/mapped_file.h"
#include "model/config_load.h"

namespace rapid::model {
namespace {

using json = nlohmann::json;

int64_t get_i(const json& j, const char* k, int64_t fallback) {
  if (!j.contains(k) || j[k].is_null()) return fallback;
  if (!j[k].is_number()) throw Error(std::string("config.json: '") + k + "' is not a number");
  return j[k].get<int64_t>();
}

double get_d(const json& j, const char* k, double fallback) {
  if (!j.contains(k) || j[k].is_null()) return fallback;
  if (!j[k].is_number()) throw Error(std::string("config.json: '") + k + "' is not a number");
  return j[k].get<double>();
}

std::string normalize_arch(std::string t) {
  if (t == "gemma3_text") return "gemma3";
  if (t == "gemma4_text") return "gemma4";
  if (t == "qwen3_5_text") return "qwen3_5";
  if (t == "qwen3_5_moe_text") return "qwen3_5_moe";
  return t;
}

void read_ids(const json& v, std::vector<int32_t>& out) {
  auto add = [&](int32_t id) {
    for (auto x : out)
      if (x == id) return;
    out.push_back(id);
  };
  if (v.is_number_integer()) add(v.get<int32_t>());
  else if (v.is_array())
    for (auto& x : v)
      if (x.is_number_integer()) add(x.get<int32_t>());
}

void read_rope_scaling(const json& rs, RopeScaling& r) {
  if (!rs.is_object()) return;
  std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
  r.type = type;
  r.factor = get_d(rs, "factor", 1.0);
  r.low_freq_factor = get_d(rs, "low_freq_factor", r.low_freq_factor);
  r.high_freq_factor = get_d(rs, "high_freq_factor", r.high_freq_factor);
  r.original_max_position_embeddings = get_i(rs, "original_max_position_embeddings", 0);
  r.beta_fast = get_d(rs, "beta_fast", r.beta_fast);
  r.beta_slow = get_d(rs, "beta_slow", r.beta_slow);
  if (rs.contains("attention_factor") && rs["attention_factor"].is_number()) {
    r.attention_factor = rs["attention_factor"].get<double>();
  } else if (const double m = get_d(rs, "mscale", 0), all = get_d(rs, "mscale_all_dim", 0); m != 0 && all != 0) {
    // transformers' yarn (and mlx-lm's YarnRoPE): get_mscale(factor, mscale) / get_mscale(factor,
    // mscale_all_dim), 1 for Devstral's mscale = mscale_all_dim; with either absent or 0
    // transformers keeps its default 0.1 ln(factor) + 1.
    auto ms = [&](double k) { return r.factor <= 1 ? 1.0 : 0.1 * k * std::log(r.factor) + 1.0; };
    r.attention_factor = ms(m) / ms(all);
  }
}

// Ministral 3 / Devstral Small 2: the llama-4 query scaling, read from rope_parameters.
void read_query_scale(const json& rp, ModelConfig& c) {
  c.query_scale_beta = get_d(rp, "llama_4_scaling_beta", 0.0);
  if (c.query_scale_beta == 0) return;
  c.query_scale_interval = get_i(rp, "original_max_position_embeddings", 0);
  if (c.query_scale_interval <= 0)
    throw Error("config.json: llama_4_scaling_beta needs a positive rope_parameters.original_max_position_embeddings");
}

// Qwen3.5 / Qwen3-Next: which layers are Gated DeltaNet (layer_types, else every layer but each
// full_attention_interval-th), their head geometry, and the partial rotary factor.
void read_linear_attention(const json& j, ModelConfig& c) {
  const json* rp = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? &j["rope_parameters"] : nullptr;
  c.partial_rotary_factor = get_d(j, "partial_rotary_factor", rp ? get_d(*rp, "partial_rotary_factor", 1.0) : 1.0);
  if (c.partial_rotary_factor <= 0 || c.partial_rotary_factor > 1)
    throw Error("config.json: partial_rotary_factor must be in (0, 1]");
  c.linear_num_key_heads = get_i(j, "linear_num_key_heads", 0);
  c.linear_num_value_heads = get_i(j, "linear_num_value_heads", 0);
  c.linear_key_head_dim = get_i(j, "linear_key_head_dim", 0);
  c.linear_value_head_dim = get_i(j, "linear_value_head_dim", 0);
  c.linear_conv_kernel_dim = get_i(j, "linear_conv_kernel_dim", 0);
  if (c.linear_num_value_heads <= 0) return;
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    for (auto& t : j["layer_types"]) c.layer_is_linear.push_back(t == "linear_attention");
  } else {
    const int64_t every = get_i(j, "full_attention_interval", 4);
    if (every <= 0) throw Error("config.json: full_attention_interval must be positive");
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.layer_is_linear.push_back((i + 1) % every != 0);
  }
}

// MoE geometry. Which layers route (transformers' rule for qwen3_moe and qwen3_next): those not in
// mlp_only_layers whose (index + 1) is a multiple of decoder_sparse_step. qwen3_5_moe always
// renormalises the top-k weights; qwen3_moe and qwen3_next with norm_topk_prob (absent: each
// family's transformers default, false for qwen3_moe, true for qwen3_next).
void read_moe(const json& j, ModelConfig& c) {
  c.num_experts = get_i(j, "num_experts", get_i(j, "num_local_experts", get_i(j, "n_routed_experts", 0)));
  if (c.num_experts <= 0) return;
  c.num_experts_per_tok = get_i(j, "num_experts_per_tok", get_i(j, "top_k_experts", 0));  // gemma4: top_k_experts
  // gpt-oss's experts are intermediate_size wide (it has no dense MLP).
  const bool oss = c.architecture == "gpt_oss";
  c.moe_intermediate_size = get_i(j, "moe_intermediate_size", oss ? c.intermediate_size : 0);
  c.swiglu_alpha = get_d(j, "swiglu_alpha", c.swiglu_alpha);
  c.swiglu_limit = get_d(j, "swiglu_limit", c.swiglu_limit);
  c.shared_expert_intermediate_size = get_i(j, "shared_expert_intermediate_size", 0);
  if (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts || c.moe_intermediate_size <= 0)
    throw Error("config.json: num_experts_per_tok must be in [1, num_experts] and moe_intermediate_size positive");
  const bool q35 = c.architecture == "qwen3_5_moe";
  c.norm_topk_prob = q35 ? true : j.value("norm_topk_prob", c.architecture == "qwen3_next");
  const int64_t step = get_i(j, "decoder_sparse_step", 1);
  if (step <= 0) throw Error("config.json: decoder_sparse_step must be positive");
  std::vector<int64_t> dense;
  if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array())
    for (auto& v : j["mlp_only_layers"])
      if (v.is_number_integer()) dense.push_back(v.get<int64_t>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    c.layer_is_moe.push_back(std::find(dense.begin(), dense.end(), i) == dense.end() && (q35 || (i + 1) % step == 0));
}

// Gemma 4's geometry beyond Gemma 3's (field names as transformers' Gemma4TextConfig; an absent
// field takes the default transformers and mlx-lm share, or transformers' where they differ).
void read_gemma4(const json& j, ModelConfig& c) {
  c.global_head_dim = get_i(j, "global_head_dim", 512);
  c.attention_k_eq_v = j.value("attention_k_eq_v", false);
  if (c.attention_k_eq_v) c.num_global_key_value_heads = get_i(j, "num_global_key_value_heads", 0);
  c.num_kv_shared_layers = get_i(j, "num_kv_shared_layers", 0);
  c.hidden_size_per_layer_input = get_i(j, "hidden_size_per_layer_input", 256);
  c.vocab_size_per_layer_input = get_i(j, "vocab_size_per_layer_input", c.vocab_size);
  c.use_double_wide_mlp = j.value("use_double_wide_mlp", false);
  c.enable_moe_block = j.value("enable_moe_block", false);
  const json* rp = j.contains("rope_parameters") && j["rope_parameters"].is_object() ? &j["rope_parameters"] : nullptr;
  if (rp && rp->contains("full_attention") && (*rp)["full_attention"].is_object())
    c.global_partial_rotary_factor = get_d((*rp)["full_attention"], "partial_rotary_factor", 1.0);
  if (c.global_partial_rotary_factor <= 0 || c.global_partial_rotary_factor > 1)
    throw Error("config.json: full_attention partial_rotary_factor must be in (0, 1]");
  if (c.num_kv_shared_layers < 0 || c.num_kv_shared_layers >= c.num_hidden_layers)
    throw Error("config.json: num_kv_shared_layers must be in [0, num_hidden_layers)");
}

// GLM-4.7-Flash's attention and routing (transformers' Glm4MoeLiteConfig names and defaults). Which
// layers route: mlp_layer_types where given (transformers 5), else the first first_k_dense_replace
// layers are dense (the released config's field, which mlx-lm reads with moe_layer_freq).
void read_glm(const json& j, ModelConfig& c) {
  c.q_lora_rank = get_i(j, "q_lora_rank", 0);
  c.kv_lora_rank = get_i(j, "kv_lora_rank", 512);
  c.qk_nope_head_dim = get_i(j, "qk_nope_head_dim", 192);
  c.qk_rope_head_dim = get_i(j, "qk_rope_head_dim", 64);
  c.v_head_dim = get_i(j, "v_head_dim", 256);
  if (c.q_lora_rank < 0 || c.kv_lora_rank <= 0 || c.qk_nope_head_dim < 0 || c.qk_rope_head_dim <= 0 ||
      c.qk_rope_head_dim % 2 || c.v_head_dim <= 0)
    throw Error("config.json: q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim (even) and v_head_dim "
                "must be positive");
  if (j.value("scoring_func", std::string("sigmoid")) != "sigmoid" || j.value("topk_method", std::string("noaux_tc")) != "noaux_tc")
    throw Error("config.json: glm4_moe_lite supports only scoring_func 'sigmoid' with topk_method 'noaux_tc'");
  if (c.rope_scaling.type != "default")
    throw Error("config.json: glm4_moe_lite with rope scaling '" + c.rope_scaling.type + "' is not supported");
  c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
  c.norm_topk_prob = j.value("norm_topk_prob", true);
  c.n_group = get_i(j, "n_group", 1);
  c.topk_group = get_i(j, "topk_group", 1);
  c.routed_scaling_factor = get_d(j, "routed_scaling_factor", 1.0);
  c.shared_expert_intermediate_size = c.moe_intermediate_size * get_i(j, "n_shared_experts", 0);
  if (c.num_experts <= 0) return;
  c.layer_is_moe.clear();
  if (j.contains("mlp_layer_types") && j["mlp_layer_types"].is_array()) {
    for (auto& t : j["mlp_layer_types"]) c.layer_is_moe.push_back(t == "sparse");
    if (int64_t(c.layer_is_moe.size()) != c.num_hidden_layers)
      throw Error("config.json: mlp_layer_types has " + std::to_string(c.layer_is_moe.size()) + " entries for " +
                  std::to_string(c.num_hidden_layers) + " layers");
    return;
  }
  const int64_t dense = get_i(j, "first_k_dense_replace", 1), freq = get_i(j, "moe_layer_freq", 1);
  if (dense < 0 || freq <= 0) throw Error("config.json: first_k_dense_replace / moe_layer_freq out of range");
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.layer_is_moe.push_back(i >= dense && i % freq == 0);
}

}  // namespace

ModelConfig config_from_hf(const json& full, const json& generation) {
  if (!full.is_object()) throw Error("config.json is not a JSON object");
  // Multimodal wrappers (Gemma3ForConditionalGeneration, ...) keep the LM in text_config.
  const json& j = (full.contains("text_config") && full["text_config"].is_object()) ? full["text_config"] : full;
  ModelConfig c;
  std::string mt = j.value("model_type", full.value("model_type", std::string()));
  if (mt.empty()) throw Error("config.json has no model_type");
  c.architecture = normalize_arch(mt);
  c.vocab_size = get_i(j, "vocab_size", get_i(full, "vocab_size", 0));
  c.hidden_size = get_i(j, "hidden_size", 0);
  c.intermediate_size = get_i(j, "intermediate_size", 0);
  c.num_hidden_layers = get_i(j, "num_hidden_layers", 0);
  c.num_attention_heads = get_i(j, "num_attention_heads", 0);
  if (c.hidden_size <= 0 || c.num_hidden_layers <= 0 || c.num_attention_heads <= 0)
    throw Error("config.json lacks hidden_size / num_hidden_layers / num_attention_heads");
  c.num_key_value_heads = get_i(j, "num_key_value_heads", c.num_attention_heads);
  c.head_dim = get_i(j, "head_dim", c.hidden_size / c.num_attention_heads);
  c.max_position_embeddings = get_i(j, "max_position_embeddings", 0);
  c.rms_norm_eps = get_d(j, "rms_norm_eps", c.rms_norm_eps);
  bool gemma = c.architecture == "gemma3" || c.architecture == "gemma4";
  c.hidden_act = j.value("hidden_activation", j.value("hidden_act", std::string(gemma ? "gelu_pytorch_tanh" : "silu")));
  if (j.contains("hidden_activation") && j["hidden_activation"].is_string())
    c.hidden_act = j["hidden_activation"].get<std::string>();
  // RoPE: transformers >= 5 writes rope_parameters (per layer type for gemma3); older configs
  // rope_theta + rope_scaling (+ rope_local_base_freq for gemma3).
  c.rope_theta = get_d(j, "rope_theta", c.rope_theta);
  c.rope_local_base_freq = get_d(j, "rope_local_base_freq", c.rope_local_base_freq);
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    read_rope_scaling(j["rope_scaling"], c.rope_scaling);
    read_query_scale(j["rope_scaling"], c);
  }
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const json& rp = j["rope_parameters"];
    if (rp.contains("full_attention") && rp["full_attention"].is_object()) {
      c.rope_theta = get_d(rp["full_attention"], "rope_theta", c.rope_theta);
      read_rope_scaling(rp["full_attention"], c.rope_scaling);
      if (rp.contains("sliding_attention") && rp["sliding_attention"].is_object())
        c.rope_local_base_freq = get_d(rp["sliding_attention"], "rope_theta", c.rope_local_base_freq);
    } else {
      c.rope_theta = get_d(rp, "rope_theta", c.rope_theta);
      read_rope_scaling(rp, c.rope_scaling);
      read_query_scale(rp, c);
    }
  }
  // transformers' per-class defaults: gemma ties embeddings, llama/qwen do not unless told.
  c.tie_word_embeddings = j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean()
                              ? j["tie_word_embeddings"].get<bool>()
                              : (full.contains("tie_word_embeddings") && full["tie_word_embeddings"].is_boolean()
                                     ? full["tie_word_embeddings"].get<bool>()
                                     : gemma);
  c.attention_bias = c.architecture == "qwen2" ? true : j.value("attention_bias", false);
  if (gemma) {
    c.sliding_window = get_i(j, "sliding_window", 0);
    c.query_pre_attn_scalar = get_d(j, "query_pre_attn_scalar", double(c.head_dim));
    c.final_logit_softcapping = get_d(j, "final_logit_softcapping", 0.0);
    c.attn_logit_softcapping = get_d(j, "attn_logit_softcapping", 0.0);
  } else if (j.value("use_sliding_window", false)) {
    c.sliding_window = get_i(j, "sliding_window", 0);
  } else if (c.architecture == "gpt_oss") {
    c.sliding_window = get_i(j, "sliding_window", 128);
    if (c.sliding_window <= 0) throw Error("config.json: sliding_window must be positive");
  }
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    for (auto& t : j["layer_types"]) c.layer_is_sliding.push_back(t == "sliding_attention");
    if (int64_t(c.layer_is_sliding.size()) != c.num_hidden_layers)
      throw Error("config.json: layer_types has " + std::to_string(c.layer_is_sliding.size()) + " entries for " +
                  std::to_string(c.num_hidden_layers) + " layers");
  } else if (c.architecture == "gpt_oss") {  // transformers' and mlx-lm's default: sliding first
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.layer_is_sliding.push_back(i % 2 == 0);
  } else if (gemma) {
    int64_t pattern = get_i(j, "sliding_window_pattern", get_i(j, "_sliding_window_pattern", 6));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.layer_is_sliding.push_back(pattern <= 0 || (i + 1) % pattern != 0);
  }
  if (c.architecture == "gemma4") read_gemma4(j, c);
  read_linear_attention(j, c);
  read_moe(j, c);
  if (c.architecture == "glm4_moe_lite") read_glm(j, c);
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_token_id = j["bos_token_id"].get<int32_t>();
  else if (full.contains("bos_token_id") && full["bos_token_id"].is_number_integer()) c.bos_token_id = full["bos_token_id"].get<int32_t>();
  if (j.contains("pad_token_id") && j["pad_token_id"].is_number_integer()) c.pad_token_id = j["pad_token_id"].get<int32_t>();
  // generation_config.json is what generate() uses for stopping, so its ids come first.
  if (generation.is_object()) {
    if (generation.contains("eos_token_id")) read_ids(generation["eos_token_id"], c.eos_token_ids);
    if (generation.contains("bos_token_id") && generation["bos_token_id"].is_number_integer())
      c.bos_token_id = generation["bos_token_id"].get<int32_t>();
    if (generation.contains("pad_token_id") && generation["pad_token_id"].is_number_integer() && !c.pad_token_id)
      c.pad_token_id = generation["pad_token_id"].get<int32_t>();
    auto opt = [&](const char* k, std::optional<double>& dst) {
      if (generation.contains(k) && generation[k].is_number()) dst = generation[k].get<double>();
    };
    opt("temperature", c.temperature);
    opt("top_p", c.top_p);
    opt("top_k", c.top_k);
    opt("repetition_penalty", c.repetition_penalty);
  }
  if (j.contains("eos_token_id")) read_ids(j["eos_token_id"], c.eos_token_ids);
  else if (full.contains("eos_token_id")) read_ids(full["eos_token_id"], c.eos_token_ids);
  return c;
}

ModelConfig load_hf_config(const std::string& dir) {
  namespace fs = std::filesystem;
  std::string cpath = (fs::path(dir) / "config.json").string();
  json cfg, gen;
  try {
    cfg = json::parse(read_file(cpath));
  } catch (const json::exception& e) {
    throw FileError(cpath, std::string("invalid JSON: ") + e.what());
  }
  std::string gpath = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(gpath)) {
    try {
      gen = json::parse(read_file(gpath));
    } catch (const json::exception& e) {
      throw FileError(gpath, std::string("invalid JSON: ") + e.what());
    }
  }
  try {
    return config_from_hf(cfg, gen);
  } catch (const FileError&) {
    throw;
  } catch (const Error& e) {
    throw FileError(cpath, e.what());
  }
}

nlohmann::ordered_json config_to_hf_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  static const std::pair<const char*, const char*> classes[] = {
      {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},
      {"gemma3", "Gemma3ForCausalLM"}, {"mistral", "MistralForCausalLM"}, {"ministral3", "Ministral3ForCausalLM"}};
  for (auto& [a, cls] : classes)
    if (c.architecture == a) j["architectures"] = {cls};
  // Only these architectures' fields are written below. Another one's config.json would lack its
  // own geometry (Gated DeltaNet heads, experts, latent attention, ...) and not load, or load as
  // a different model: refuse rather than write it.
  if (!j.contains("architectures") || !c.layer_is_linear.empty() || c.num_experts > 0)
    throw Error("config: cannot write a config.json for a '" + c.architecture +
                "' model yet (its own fields are not written); serve the GGUF file itself");
  j["model_type"] = c.architecture == "gemma3" ? "gemma3_text" : c.architecture;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.type != "default") {
    auto& r = c.rope_scaling;
    nlohmann::ordered_json rs = {{"rope_type", r.type}, {"factor", r.factor}};
    if (r.type == "llama3") {
      rs["low_freq_factor"] = r.low_freq_factor;
      rs["high_freq_factor"] = r.high_freq_factor;
    }
    if (r.original_max_position_embeddings) rs["original_max_position_embeddings"] = r.original_max_position_embeddings;
    if (r.type == "yarn") {
      rs["beta_fast"] = r.beta_fast;
      rs["beta_slow"] = r.beta_slow;
      if (r.attention_factor) rs["attention_factor"] = *r.attention_factor;
    }
    // Ministral 3's query scaling lives beside its YaRN parameters (read_query_scale), its interval
    // being their original_max_position_embeddings.
    if (c.query_scale_beta != 0) {
      if (c.query_scale_interval != r.original_max_position_embeddings)
        throw Error("config: the query scaling interval (" + std::to_string(c.query_scale_interval) +
                    ") differs from rope_scaling's original_max_position_embeddings; config.json cannot say so");
      rs["llama_4_scaling_beta"] = c.query_scale_beta;
    }
    j["rope_scaling"] = rs;
  } else if (c.query_scale_beta != 0) {
    throw Error("config: query scaling without rope scaling cannot be written to config.json");
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.architecture != "qwen2") j["attention_bias"] = c.attention_bias;
  j[c.architecture == "gemma3" ? "hidden_activation" : "hidden_act"] = c.hidden_act;
  if (c.architecture == "gemma3") {
    j["rope_local_base_freq"] = c.rope_local_base_freq;
    j["sliding_window"] = c.sliding_window;
    // transformers validates this field as an int.
    if (c.query_pre_attn_scalar == double(int64_t(c.query_pre_attn_scalar)))
      j["query_pre_attn_scalar"] = int64_t(c.query_pre_attn_scalar);
    else
      j["query_pre_attn_scalar"] = c.query_pre_attn_scalar;
    j["final_logit_softcapping"] = c.final_logit_softcapping > 0 ? nlohmann::ordered_json(c.final_logit_softcapping) : nullptr;
    j["attn_logit_softcapping"] = c.attn_logit_softcapping > 0 ? nlohmann::ordered_json(c.attn_logit_softcapping) : nullptr;
  } else if (c.sliding_window > 0) {
    j["use_sliding_window"] = true;
    j["sliding_window"] = c.sliding_window;
  }
  if (!c.layer_is_sliding.empty()) {
    auto& lt = j["layer_types"] = nlohmann::ordered_json::array();
    for (bool s : c.layer_is_sliding) lt.push_back(s ? "sliding_attention" : "full_attention");
  }
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  else if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids;
  if (c.pad_token_id) j["pad_token_id"] = *c.pad_token_id;
  j["torch_dtype"] = "float32";
  return j;
}

nlohmann::ordered_json generation_config_to_hf_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  else if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids;
  if (c.pad_token_id) j["pad_token_id"] = *c.pad_token_id;
  if (c.temperature) j["temperature"] = *c.temperature;
  if (c.top_p) j["top_p"] = *c.top_p;
  if (c.top_k) j["top_k"] = int64_t(*c.top_k);
  if (c.repetition_penalty) j["repetition_penalty"] = *c.repetition_penalty;
  return j;
}

}  // namespace rapid::model
