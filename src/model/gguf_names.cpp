#include "model/gguf_names.h"

#include <cstring>

#include "common/error.h"
#include "tensor/fp16.h"

namespace rapid {

std::string gguf_to_hf_name(const std::string& n, const std::string& arch) {
  static const std::pair<const char*, const char*> globals[] = {
      {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
  bool gemma = arch == "gemma3";
  // Per-layer names: blk.<i>.<part>.<weight|bias>
  if (n.rfind("blk.", 0) == 0) {
    size_t d1 = n.find('.', 4);
    size_t dl = n.rfind('.');
    if (d1 == std::string::npos || dl <= d1) return n;
    std::string layer = n.substr(4, d1 - 4), part = n.substr(d1 + 1, dl - d1 - 1), suffix = n.substr(dl);
    for (char ch : layer)
      if (ch < '0' || ch > '9') return n;
    const char* hf = nullptr;
    if (part == "attn_q") hf = "self_attn.q_proj";
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
    if (!hf) return n;
    return "model.layers." + layer + "." + hf + suffix;
  }
  size_t dl = n.rfind('.');
  if (dl == std::string::npos) return n;
  std::string base = n.substr(0, dl);
  for (auto& [g, hf] : globals)
    if (base == g) return hf + n.substr(dl);
  return n;
}

bool gguf_arch_permutes_qk(const std::string& arch) { return arch == "llama" || arch == "mistral"; }

namespace {

// The Q/K rows stay in GGUF's pair order (the model rotates adjacent pairs, see
// Checkpoint::rope_interleaved_qk); only check that they split into heads of even size, so a
// lying file is refused here rather than mis-rotated later.
void check_head_split(const Tensor& src, int64_t n_head, const std::string& path) {
  int64_t rows = src.shape.empty() ? 0 : src.shape[0];
  if (n_head <= 0 || rows % n_head || (rows / n_head) % 2)
    throw FileError(path, "tensor '" + src.name + "': " + std::to_string(rows) + " rows cannot be split into " +
                              std::to_string(n_head) + " heads of even size");
}

// llama.cpp's Gemma converters store RMSNorm weights as (1 + w); HF keeps w.
void unshift_norm(const Tensor& src, const std::string& path, WeightStore& store, Tensor& dst) {
  if (src.dtype != DType::F32 && src.dtype != DType::F16 && src.dtype != DType::BF16)
    throw FileError(path, "tensor '" + src.name + "': norm weight of unexpected dtype " + dtype_name(src.dtype));
  int64_t n = src.numel();
  auto buf = std::make_shared<std::vector<uint8_t>>(size_t(n) * 4);
  float* out = reinterpret_cast<float*>(buf->data());
  const uint8_t* in = static_cast<const uint8_t*>(src.data);
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (src.dtype == DType::F32) std::memcpy(&v, in + 4 * i, 4);
    else {
      uint16_t hv;
      std::memcpy(&hv, in + 2 * i, 2);
      v = src.dtype == DType::F16 ? f16_to_f32(hv) : bf16_to_f32(hv);
    }
    out[i] = v - 1.0f;
  }
  dst.dtype = DType::F32;
  dst.data = buf->data();
  dst.nbytes = buf->size();
  store.keep_alive(buf);
}

bool ends_with(const std::string& s, const char* suf) {
  size_t n = std::strlen(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

}  // namespace

void add_gguf_tensors(const GgufFile& g, const ModelConfig& cfg, WeightStore& store) {
  store.keep_alive(g.file);
  bool permuted = gguf_arch_permutes_qk(cfg.architecture);
  for (const Tensor& src : g.tensors) {
    Tensor t = src;
    t.name = gguf_to_hf_name(src.name, cfg.architecture);
    if (store.find(t.name)) throw FileError(g.path, "two tensors map to '" + t.name + "'");
    if (permuted && (ends_with(t.name, "self_attn.q_proj.weight") || ends_with(t.name, "self_attn.q_proj.bias")))
      check_head_split(src, cfg.num_attention_heads, g.path);
    else if (permuted && (ends_with(t.name, "self_attn.k_proj.weight") || ends_with(t.name, "self_attn.k_proj.bias")))
      check_head_split(src, cfg.num_key_value_heads, g.path);
    else if (cfg.architecture == "gemma3" && ends_with(t.name, "norm.weight"))
      unshift_norm(src, g.path, store, t);
    store.add(std::move(t));
  }
}

}  // namespace rapid
