#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/checkpoint_hf.h"
#include "model/config_load.h"
#include "model/gguf.h"
#include "model/gguf_names.h"
#include "tensor/dequantize.h"

namespace rapid::model {

namespace fs = std::filesystem;

const tensor::Tensor& WeightStore::get(const std::string& name) const {
  auto* t = find(name);
  if (!t) throw Error("missing weight tensor '" + name + "'");
  return *t;
}

std::shared_ptr<std::vector<uint8_t>> aligned_copy(const void* p, size_t n, const MappedFile* from) {
  const auto* b = static_cast<const uint8_t*>(p);
  if (!from) return std::make_shared<std::vector<uint8_t>>(b, b + n);
  // Read with pread: the mapping's folios around p would otherwise come in too (MappedFile::read).
  auto buf = std::make_shared<std::vector<uint8_t>>(n);
  from->read(static_cast<size_t>(b - from->data()), n, buf->data());
  from->drop_pages(static_cast<size_t>(b - from->data()), n);
  return buf;
}

namespace {

bool ends_with(const std::string& s, const char* suf) {
  size_t n = std::strlen(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

// Heads of a pair-ordered tensor (0 = stored in HF order).
int64_t pair_ordered_heads(const Checkpoint& ck, const tensor::Tensor& t) {
  if (!ck.rope_interleaved_qk) return 0;
  if (ends_with(t.name, "self_attn.q_proj.weight") || ends_with(t.name, "self_attn.q_proj.bias"))
    return ck.config.num_attention_heads;
  if (ends_with(t.name, "self_attn.k_proj.weight") || ends_with(t.name, "self_attn.k_proj.bias"))
    return ck.config.num_key_value_heads > 0 ? ck.config.num_key_value_heads : ck.config.num_attention_heads;
  return 0;
}

}  // namespace

int64_t stored_qk_index(const Checkpoint& ck, const tensor::Tensor& t, int64_t i) {
  const int64_t heads = pair_ordered_heads(ck, t);
  if (heads <= 0) return i;
  const int64_t n = t.shape.empty() ? 1 : t.shape[0];  // rows (weight) or elements (bias)
  if (n % heads || (n / heads) % 2) throw Error("tensor '" + t.name + "' cannot be split into heads of even size");
  if (i < 0 || i >= n) throw Error("tensor '" + t.name + "': index " + std::to_string(i) + " out of range");
  const int64_t hd = n / heads, half = hd / 2, h = i / hd, rem = i % hd;
  return h * hd + 2 * (rem % half) + rem / half;
}

void dequantize_hf_row(const Checkpoint& ck, const tensor::Tensor& t, int64_t r, float* out) {
  if (pair_ordered_heads(ck, t) <= 0) return tensor::dequantize_row(t, r, out);
  if (t.shape.size() >= 2) return tensor::dequantize_row(t, stored_qk_index(ck, t, r), out);
  // A bias: the permutation runs over its elements.
  std::vector<float> tmp(static_cast<size_t>(t.cols()));
  tensor::dequantize_row(t, r, tmp.data());
  for (int64_t i = 0; i < t.cols(); ++i) out[i] = tmp[static_cast<size_t>(stored_qk_index(ck, t, i))];
}

static bool has_gguf_magic(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char m[4] = {};
  return f.read(m, 4) && std::memcmp(m, "GGUF", 4) == 0;
}

static std::unique_ptr<Checkpoint> load_gguf_checkpoint(const std::string& path) {
  auto ck = std::make_unique<Checkpoint>();
  ck->path = path;
  ck->tokenizer_path = path;
  GgufFile g = read_gguf(path);
  ck->config = config_from_gguf(g);
  add_gguf_tensors(g, ck->config, ck->weights);
  g.drop_header_pages();
  ck->rope_interleaved_qk = gguf_arch_permutes_qk(ck->config.architecture);
  return ck;
}

std::unique_ptr<Checkpoint> load_checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (has_gguf_magic(path)) return load_gguf_checkpoint(path);
    if (fs::path(path).filename() == "config.json" || fs::path(path).extension() == ".safetensors")
      return load_checkpoint(fs::path(path).parent_path().string());
    throw FileError(path, "neither a GGUF file nor a model directory");
  }
  if (!fs::is_directory(path, ec)) throw FileError(path, "no such file or directory");
  if (!fs::exists(fs::path(path) / "config.json")) {
    // A directory holding a single .gguf is that model.
    std::vector<std::string> ggufs;
    for (auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".gguf" && e.path().filename() != "tokenizer.gguf") ggufs.push_back(e.path().string());
    if (ggufs.size() == 1) return load_gguf_checkpoint(ggufs[0]);
    throw FileError(path, ggufs.empty() ? "no config.json and no .gguf file" : "several .gguf files; name one");
  }
  return load_hf_checkpoint(path);
}

}  // namespace rapid::model
