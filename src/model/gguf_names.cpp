#include "model/gguf_names.h"

#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"
#include "tensor/fp16.h"

namespace rapid::model {

namespace {

// llama.cpp's qwen35 / qwen3next names of the Gated DeltaNet parts (its converter renames dt_bias
// to "ssm_dt.bias" and stores A as the bare "ssm_a"; qwen3next keeps Qwen3-Next's fused b/a
// projection as ssm_ba, and older qwen3next files the fused qkvz as ssm_in). Full
// "model.layers.<i>." suffix or nullptr.
const char* qwen35_part(const std::string& part, const std::string& suffix, std::string& out) {
  static const std::pair<const char*, const char*> weights[] = {
      {"attn_qkv", "linear_attn.in_proj_qkv"}, {"attn_gate", "linear_attn.in_proj_z"},
      {"ssm_beta", "linear_attn.in_proj_b"},   {"ssm_alpha", "linear_attn.in_proj_a"},
      {"ssm_out", "linear_attn.out_proj"},     {"ssm_conv1d", "linear_attn.conv1d"},
      {"ssm_norm", "linear_attn.norm"},        {"ssm_ba", "linear_attn.in_proj_ba"},
      {"ssm_in", "linear_attn.in_proj_qkvz"}};
  for (auto& [g, hf] : weights)
    if (part == g) return (out = std::string(hf) + suffix).c_str();
  if (part == "ssm_dt" && suffix == ".bias") return (out = "linear_attn.dt_bias").c_str();
  return nullptr;
}

// The MTP head's own tensors in block L = trunk_layers (see gguf_to_hf_name), or nullptr.
const char* nextn_part(const std::string& part) {
  static const std::pair<const char*, const char*> parts[] = {
      {"nextn.eh_proj", "mtp.fc"}, {"nextn.enorm", "mtp.pre_fc_norm_embedding"},
      {"nextn.hnorm", "mtp.pre_fc_norm_hidden"}, {"nextn.shared_head_norm", "mtp.norm"}};
  for (auto& [g, hf] : parts)
    if (part == g) return hf;
  return nullptr;
}

// llama.cpp's gemma4 names that Gemma 3's do not cover, as full "model.layers.<i>." suffixes
// (some HF names have no ".weight": the layer scalar, the router's scales, the fused experts), or
// nullptr. The per-expert scale is stored as ffn_down_exps.scale (it scales each expert's output);
// the unfused experts take mlx-lm's switch_glu names, which MoeBlock also reads.
const char* gemma4_part(const std::string& part, const std::string& suffix, std::string& out) {
  static const std::pair<const char*, const char*> weights[] = {
      {"pre_ffw_norm_2", "pre_feedforward_layernorm_2"}, {"post_ffw_norm_1", "post_feedforward_layernorm_1"},
      {"post_ffw_norm_2", "post_feedforward_layernorm_2"}, {"inp_gate", "per_layer_input_gate"},
      {"proj", "per_layer_projection"},                  {"post_norm", "post_per_layer_input_norm"},
      {"ffn_gate_inp", "router.proj"},                    {"ffn_gate_exps", "experts.switch_glu.gate_proj"},
      {"ffn_up_exps", "experts.switch_glu.up_proj"}};
  if (suffix == ".weight") {
    for (auto& [g, hf] : weights)
      if (part == g) return (out = std::string(hf) + suffix).c_str();
    if (part == "layer_output_scale") return (out = "layer_scalar").c_str();
    if (part == "ffn_gate_up_exps") return (out = "experts.gate_up_proj").c_str();
    if (part == "ffn_down_exps") return (out = "experts.down_proj").c_str();
  } else if (suffix == ".scale") {
    if (part == "ffn_gate_inp") return (out = "router.scale").c_str();
    if (part == "ffn_down_exps") return (out = "router.per_expert_scale").c_str();
  }
  return nullptr;
}

}  // namespace

std::string gguf_to_hf_name(const std::string& n, const std::string& arch, int64_t trunk_layers) {
  static const std::pair<const char*, const char*> globals[] = {
      {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
  bool gemma = arch == "gemma3", oss = arch == "gpt_oss", glm = arch == "glm4_moe_lite";
  bool qwen35 = arch == "qwen3_5" || arch == "qwen3_5_moe" || arch == "qwen3_next";

  // Gemma 4 names its shared parts as Gemma 3; its per-layer token embeddings and their
  // projection are global tensors of its own.
  const bool gemma4 = arch == "gemma4";
  gemma |= gemma4;
  static const std::pair<const char*, const char*> per_layer_globals[] = {
      {"per_layer_token_embd", "model.embed_tokens_per_layer"},
      {"per_layer_model_proj", "model.per_layer_model_projection"},
      {"per_layer_proj_norm", "model.per_layer_projection_norm"}};
  // Per-layer names: blk.<i>.<part>.<weight|bias>
  if (n.rfind("blk.", 0) == 0) {
    size_t d1 = n.find('.', 4);
    if (qwen35 && d1 != std::string::npos && n.compare(d1, std::string::npos, ".ssm_a") == 0)
      return "model.layers." + n.substr(4, d1 - 4) + ".linear_attn.A_log";
    size_t dl = n.rfind('.');
    if (d1 == std::string::npos || dl <= d1) return n;
    std::string layer = n.substr(4, d1 - 4), part = n.substr(d1 + 1, dl - d1 - 1), suffix = n.substr(dl);
    for (char ch : layer)
      if (ch < '0' || ch > '9') return n;
    // Blocks past the trunk are the MTP head's (qwen3_5 with nextn_predict_layers).
    std::string prefix = "model.layers." + layer + ".";
    if (qwen35 && trunk_layers >= 0 && !layer.empty() && layer.size() < 10 && std::stoll(layer) >= trunk_layers) {
      const long long i = std::stoll(layer) - trunk_layers;
      if (const char* head = nextn_part(part)) return i == 0 ? head + suffix : n;
      prefix = "mtp.layers." + std::to_string(i) + ".";
    }
    std::string q35;
    if (qwen35 && qwen35_part(part, suffix, q35)) return prefix + q35;
    std::string g4;
    if (gemma4 && gemma4_part(part, suffix, g4)) return prefix + g4;
    // gpt-oss (the converter's GptOssModel): the sinks gained a ".weight"; the router and the
    // stacked experts (with biases) take the names of mlx-lm's gpt_oss, which MoeBlock reads.
    if (oss && part == "attn_sinks" && suffix == ".weight") return prefix + "self_attn.sinks";
    // glm4_moe_lite from llama.cpp's deepseek2 (multi-head latent attention): attn_k_b / attn_v_b
    // are kv_b_proj split per head as mlx-lm's sanitize splits it (k_b [heads, kv_lora, nope],
    // v_b [heads, v, kv_lora]), which MlaAttention reads as embed_q / unembed_out; older files keep
    // kv_b_proj whole as attn_kv_b. The expert choice bias is exp_probs_b; the shared experts are
    // GLM's shared_experts (plural).
    if (glm) {
      static const std::pair<const char*, const char*> mla[] = {
          {"attn_q_a", "self_attn.q_a_proj"},          {"attn_q_a_norm", "self_attn.q_a_layernorm"},
          {"attn_q_b", "self_attn.q_b_proj"},          {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
          {"attn_kv_a_norm", "self_attn.kv_a_layernorm"}, {"attn_kv_b", "self_attn.kv_b_proj"},
          {"attn_k_b", "self_attn.embed_q"},           {"attn_v_b", "self_attn.unembed_out"},
          {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"}, {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
          {"ffn_down_shexp", "mlp.shared_experts.down_proj"}};
      for (auto& [g, h] : mla)
        if (part == g) return prefix + h + suffix;
      if (part == "exp_probs_b" && suffix == ".bias") return prefix + "mlp.gate.e_score_correction_bias";
    }
    const char* hf = nullptr;
    if (oss && part == "ffn_gate_inp") hf = "mlp.router";
    else if (oss && part == "ffn_gate_exps") hf = "mlp.experts.gate_proj";
    else if (oss && part == "ffn_up_exps") hf = "mlp.experts.up_proj";
    else if (oss && part == "ffn_down_exps") hf = "mlp.experts.down_proj";
    else if (part == "attn_q") hf = "self_attn.q_proj";
    else if (part == "attn_k") hf = "self_attn.k_proj";
    else if (part == "attn_v") hf = "self_attn.v_proj";
    else if (part == "attn_output") hf = "self_attn.o_proj";
    else if (part == "ffn_gate") hf = "mlp.gate_proj";
    else if (part == "ffn_up") hf = "mlp.up_proj";
    else if (part == "ffn_down") hf = "mlp.down_proj";
    else if (part == "attn_norm") hf = "input_layernorm";
    else if (part == "ffn_norm") hf = gemma ? "pre_feedforward_layernorm" : "post_attention_layernorm";
    else if (part == "post_attention_norm") hf = "post_attention_layernorm";
    else if (part == "post_ffw_norm") hf = "post_feedforward_layernorm";
    else if (part == "attn_q_norm") hf = "self_attn.q_norm";
    else if (part == "attn_k_norm") hf = "self_attn.k_norm";
    // Mixture of experts: the router, the experts stacked as 3-D [E, rows, cols] tensors (the
    // layout mlx-lm's switch_mlp has, which MoeBlock slices per expert) and the shared expert.
    else if (part == "ffn_gate_inp") hf = "mlp.gate";
    else if (part == "ffn_gate_exps") hf = "mlp.switch_mlp.gate_proj";
    else if (part == "ffn_up_exps") hf = "mlp.switch_mlp.up_proj";
    else if (part == "ffn_down_exps") hf = "mlp.switch_mlp.down_proj";
    else if (part == "ffn_gate_shexp") hf = "mlp.shared_expert.gate_proj";
    else if (part == "ffn_up_shexp") hf = "mlp.shared_expert.up_proj";
    else if (part == "ffn_down_shexp") hf = "mlp.shared_expert.down_proj";
    else if (part == "ffn_gate_inp_shexp") hf = "mlp.shared_expert_gate";
    if (!hf) return n;
    return prefix + hf + suffix;
  }
  size_t dl = n.rfind('.');
  if (dl == std::string::npos) return n;
  std::string base = n.substr(0, dl);
  for (auto& [g, hf] : globals)
    if (base == g) return hf + n.substr(dl);
  if (gemma4)
    for (auto& [g, hf] : per_layer_globals)
      if (base == g) return hf + n.substr(dl);
  return n;
}

// ministral3: llama.cpp's mistral3 files (the converter's Ministral3Model is a LlamaModel).
bool gguf_arch_permutes_qk(const std::string& arch) {
  return arch == "llama" || arch == "mistral" || arch == "ministral3";
}

namespace {

// The Q/K rows stay in GGUF's pair order (the model rotates adjacent pairs, see
// Checkpoint::rope_interleaved_qk); only check that they split into heads of even size, so a
// lying file is refused here rather than mis-rotated later.
void check_head_split(const tensor::Tensor& src, int64_t n_head, const std::string& path) {
  int64_t rows = src.shape.empty() ? 0 : src.shape[0];
  if (n_head <= 0 || rows % n_head || (rows / n_head) % 2)
    throw FileError(path, "tensor '" + src.name + "': " + std::to_string(rows) + " rows cannot be split into " +
                              std::to_string(n_head) + " heads of even size");
}

// An f32 copy of a small float tensor with `f` applied to each value (kept alive by the store).
template <class F>
void map_floats(const tensor::Tensor& src, const std::string& path, WeightStore& store, tensor::Tensor& dst, F f) {
  if (src.dtype != tensor::DType::F32 && src.dtype != tensor::DType::F16 && src.dtype != tensor::DType::BF16)
    throw FileError(path, "tensor '" + src.name + "': expected a float tensor, got " + tensor::dtype_name(src.dtype));
  int64_t n = src.numel();
  auto buf = std::make_shared<std::vector<uint8_t>>(size_t(n) * 4);
  float* out = reinterpret_cast<float*>(buf->data());
  const uint8_t* in = static_cast<const uint8_t*>(src.data);
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (src.dtype == tensor::DType::F32) std::memcpy(&v, in + 4 * i, 4);
    else {
      uint16_t hv;
      std::memcpy(&hv, in + 2 * i, 2);
      v = src.dtype == tensor::DType::F16 ? tensor::f16_to_f32(hv) : tensor::bf16_to_f32(hv);
    }
    out[i] = f(v);
  }
  dst.dtype = tensor::DType::F32;
  dst.data = buf->data();
  dst.nbytes = buf->size();
  store.keep_alive(buf);
}

// llama.cpp's Gemma and Qwen3.5 converters store RMSNorm weights as (1 + w); HF keeps w. For
// Qwen3.5 the model adds the 1 back: (m - 1) + 1 == m exactly for every m >= 0.5.
void unshift_norm(const tensor::Tensor& src, const std::string& path, WeightStore& store, tensor::Tensor& dst) {
  map_floats(src, path, store, dst, [](float v) { return v - 1.0f; });
}

// llama.cpp's qwen35 stores A = -exp(A_log); the model takes A_log.
void a_to_log(const tensor::Tensor& src, const std::string& path, WeightStore& store, tensor::Tensor& dst) {
  map_floats(src, path, store, dst, [&](float v) {
    if (!(v < 0.0f)) throw FileError(path, "tensor '" + src.name + "': ssm_a must be negative (it is -exp(A_log))");
    return std::log(-v);
  });
}

// llama.cpp's qwen3next keeps Qwen3-Next's fused in_proj_ba (ssm_ba): per key head, the b rows of
// its value heads, then their a rows. Split by row copies (any row-wise GGUF type) into
// in_proj_b / in_proj_a, the separate projections of Qwen3.5 the model also takes; the value
// heads stay grouped by key head, as in the rest of a qwen3next file.
void split_ba(const tensor::Tensor& src, const std::string& hf_name, const ModelConfig& cfg, const std::string& path,
              WeightStore& store) {
  const int64_t hv = cfg.linear_num_value_heads, hk = cfg.linear_num_key_heads;
  if (src.shape.size() != 2 || src.shape[0] != 2 * hv || hk <= 0 || hv % hk)
    throw FileError(path, "tensor '" + src.name + "': expected 2 x ssm.time_step_rank = " + std::to_string(2 * hv) +
                              " rows in groups per ssm.group_count");
  const int64_t r = hv / hk;
  const size_t row = src.nbytes / size_t(src.shape[0]);
  const std::string base = hf_name.substr(0, hf_name.size() - std::strlen("ba.weight"));
  for (int part = 0; part < 2; ++part) {
    auto buf = std::make_shared<std::vector<uint8_t>>(size_t(hv) * row);
    for (int64_t h = 0; h < hk; ++h)
      std::memcpy(buf->data() + size_t(h * r) * row, static_cast<const uint8_t*>(src.data) + size_t(h * 2 * r + part * r) * row,
                  size_t(r) * row);
    tensor::Tensor t = src;
    t.name = base + (part ? "a.weight" : "b.weight");
    t.shape = {hv, src.shape[1]};
    t.data = buf->data();
    t.nbytes = buf->size();
    store.keep_alive(buf);
    store.add(std::move(t));
  }
}

// llama.cpp's gemma4 with the converter's --fuse-qkv: attn_qkv holds the q, k and v rows of a layer
// whose three projections all exist (not where keys are values), at that layer's own head size and
// KV head count. Split into row views of the file (no copy; any row-wise GGUF type).
void split_gemma4_qkv(const tensor::Tensor& src, const ModelConfig& cfg, const std::string& path, WeightStore& store) {
  const size_t d1 = src.name.find('.', 4);
  const std::string layer = src.name.substr(4, d1 - 4);
  const int64_t i = std::stoll(layer);
  const bool sliding = i < int64_t(cfg.layer_is_sliding.size()) && cfg.layer_is_sliding[size_t(i)];
  const int64_t hd = sliding ? cfg.head_dim : cfg.global_head_dim;
  const int64_t nkv = !sliding && cfg.attention_k_eq_v && cfg.num_global_key_value_heads > 0
                          ? cfg.num_global_key_value_heads : cfg.num_key_value_heads;
  const int64_t rows[3] = {cfg.num_attention_heads * hd, nkv * hd, nkv * hd};
  if (src.shape.size() != 2 || src.shape[0] != rows[0] + rows[1] + rows[2])
    throw FileError(path, "tensor '" + src.name + "': expected " + std::to_string(rows[0] + rows[1] + rows[2]) +
                              " rows (q, k and v of the layer's heads)");
  const size_t row = src.nbytes / size_t(src.shape[0]);
  const char* names[3] = {"q_proj", "k_proj", "v_proj"};
  int64_t r0 = 0;
  for (int k = 0; k < 3; ++k) {
    tensor::Tensor t = src;
    t.name = "model.layers." + layer + ".self_attn." + names[k] + ".weight";
    if (store.find(t.name)) throw FileError(path, "tensor '" + src.name + "' and a separate " + names[k] + " in one layer");
    t.shape = {rows[k], src.shape[1]};
    t.data = static_cast<const uint8_t*>(src.data) + size_t(r0) * row;
    t.nbytes = size_t(rows[k]) * row;
    r0 += rows[k];
    store.add(std::move(t));
  }
}

bool ends_with(const std::string& s, const char* suf) {
  size_t n = std::strlen(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

// Every routing layer's router and stacked experts, with the shapes the metadata promises, so a
// malformed file is refused here with its path (MoeBlock would only name the tensor).
void check_moe_tensors(const GgufFile& g, const ModelConfig& cfg, const WeightStore& store) {
  const int64_t E = cfg.num_experts, H = cfg.hidden_size, I = cfg.moe_intermediate_size;
  const bool oss = cfg.architecture == "gpt_oss";
  for (size_t i = 0; i < cfg.layer_is_moe.size(); ++i) {
    if (!cfg.layer_is_moe[i]) continue;
    const std::string blk = "blk." + std::to_string(i) + ".", p = "model.layers." + std::to_string(i) + ".mlp.";
    const std::pair<const char*, std::vector<int64_t>> want[] = {
        {oss ? "router" : "gate", {E, H}}, {oss ? "experts.gate_proj" : "switch_mlp.gate_proj", {E, I, H}},
        {oss ? "experts.up_proj" : "switch_mlp.up_proj", {E, I, H}},
        {oss ? "experts.down_proj" : "switch_mlp.down_proj", {E, H, I}}};
    const char* gguf_part[] = {"ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (size_t k = 0; k < 4; ++k) {
      const std::string name = blk + gguf_part[k] + ".weight";
      const tensor::Tensor* t = store.find(p + want[k].first + ".weight");
      if (!t) throw FileError(g.path, "tensor '" + name + "' is missing (expert_count = " + std::to_string(E) + ")");
      if (t->shape != want[k].second) {
        std::string got, exp;
        for (int64_t d : t->shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
        for (int64_t d : want[k].second) exp += (exp.empty() ? "" : ", ") + std::to_string(d);
        throw FileError(g.path, "tensor '" + name + "' has shape [" + got + "], expected [" + exp +
                                    "] from expert_count, embedding_length and expert_feed_forward_length");
      }
    }
  }
}

// Gemma 4's experts (every layer with enable_moe_block): router, its scales and the stacked experts
// (fused gate_up or separate gate / up) at the shapes the metadata promises, refused with the file's
// path and GGUF name otherwise (MoeBlock would only name the HF tensor).
void check_gemma4_moe(const GgufFile& g, const ModelConfig& cfg, const WeightStore& store) {
  if (cfg.architecture != "gemma4" || !cfg.enable_moe_block) return;
  const int64_t E = cfg.num_experts, H = cfg.hidden_size, I = cfg.moe_intermediate_size;
  auto dims = [](const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t d : v) s += (s.empty() ? "" : ", ") + std::to_string(d);
    return "[" + s + "]";
  };
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string blk = "blk." + std::to_string(i) + ".", p = "model.layers." + std::to_string(i) + ".";
    const bool fused = store.find(p + "experts.gate_up_proj") != nullptr;
    std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>> want = {
        {"ffn_gate_inp.weight", "router.proj.weight", {E, H}},
        {"ffn_gate_inp.scale", "router.scale", {H}},
        {"ffn_down_exps.scale", "router.per_expert_scale", {E}},
        {"ffn_down_exps.weight", "experts.down_proj", {E, H, I}}};
    if (fused) want.push_back({"ffn_gate_up_exps.weight", "experts.gate_up_proj", {E, 2 * I, H}});
    else {
      want.push_back({"ffn_gate_exps.weight", "experts.switch_glu.gate_proj.weight", {E, I, H}});
      want.push_back({"ffn_up_exps.weight", "experts.switch_glu.up_proj.weight", {E, I, H}});
    }
    for (const auto& [gname, hf, shape] : want) {
      const tensor::Tensor* t = store.find(p + hf);
      if (!t) throw FileError(g.path, "tensor '" + blk + gname + "' is missing (expert_count = " + std::to_string(E) + ")");
      if (t->shape != shape)
        throw FileError(g.path, "tensor '" + blk + gname + "' has shape " + dims(t->shape) + ", expected " + dims(shape) +
                                    " from expert_count, embedding_length and expert_feed_forward_length");
    }
  }
}

}  // namespace

void add_gguf_tensors(const GgufFile& g, const ModelConfig& cfg, WeightStore& store) {
  store.keep_alive(g.file);
  bool permuted = gguf_arch_permutes_qk(cfg.architecture);
  const bool qwen35 = cfg.architecture == "qwen3_5" || cfg.architecture == "qwen3_5_moe" ||
                      cfg.architecture == "qwen3_next";
  for (const tensor::Tensor& src : g.tensors) {
    tensor::Tensor t = src;
    t.name = gguf_to_hf_name(src.name, cfg.architecture, qwen35 ? cfg.num_hidden_layers : -1);
    if (store.find(t.name)) throw FileError(g.path, "two tensors map to '" + t.name + "'");
    // Split only beside attn_qkv / attn_gate: an older file's ssm_in (fused qkvz) takes the
    // model's fused path, which reads in_proj_ba whole.
    if (qwen35 && ends_with(t.name, "linear_attn.in_proj_ba.weight") &&
        !g.find(src.name.substr(0, src.name.size() - std::strlen("ssm_ba.weight")) + "ssm_in.weight")) {
      split_ba(src, t.name, cfg, g.path, store);
      continue;
    }
    if (cfg.architecture == "gemma4" && ends_with(src.name, ".attn_qkv.weight")) {
      split_gemma4_qkv(src, cfg, g.path, store);
      continue;
    }
    if (permuted && (ends_with(t.name, "self_attn.q_proj.weight") || ends_with(t.name, "self_attn.q_proj.bias")))
      check_head_split(src, cfg.num_attention_heads, g.path);
    else if (permuted && (ends_with(t.name, "self_attn.k_proj.weight") || ends_with(t.name, "self_attn.k_proj.bias")))
      check_head_split(src, cfg.num_key_value_heads, g.path);
    else if (cfg.architecture == "gemma3" && ends_with(t.name, "norm.weight"))
      unshift_norm(src, g.path, store, t);
    // By the file's names, as the converter chose them: every *norm.weight but the gated DeltaNet
    // norm (a plain w) is (1 + w), the MTP head's enorm / hnorm ("mtp.pre_fc_norm_*") included.
    else if (qwen35 && ends_with(src.name, "norm.weight") && !ends_with(src.name, "ssm_norm.weight"))
      unshift_norm(src, g.path, store, t);
    else if (qwen35 && ends_with(t.name, ".A_log"))
      a_to_log(src, g.path, store, t);
    else if (ends_with(t.name, "mlp.shared_expert_gate.weight") && t.shape.size() == 1)
      t.shape = {1, t.shape[0]};  // llama.cpp's ffn_gate_inp_shexp may be 1-D: one output row
    store.add(std::move(t));
  }
  check_moe_tensors(g, cfg, store);
  check_gemma4_moe(g, cfg, store);
}

}  // namespace rapid::model
