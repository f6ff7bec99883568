#include "engine/model_identity.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "cache/snapshot_store.h"
#include "numerics_id.h"  // generated (cmake/numerics_id.cmake)

namespace rapid::engine {

namespace fs = std::filesystem;

namespace {

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// Adds name, size and sampled content of one file to the hash.
void sample_file(XXH64_state_t* st, const fs::path& p, bool whole) {
  std::error_code ec;
  const uint64_t size = fs::file_size(p, ec);
  if (ec) return;
  const std::string name = p.filename().string();
  XXH64_update(st, name.data(), name.size());
  XXH64_update(st, &size, sizeof size);
  std::ifstream in(p, std::ios::binary);
  std::vector<char> buf;
  auto read_at = [&](uint64_t off, uint64_t n) {
    n = std::min(n, size - std::min(off, size));
    if (!n) return;
    buf.resize(n);
    in.seekg(std::streamoff(off));
    in.read(buf.data(), std::streamsize(n));
    XXH64_update(st, buf.data(), size_t(in.gcount()));
  };
  if (whole) return read_at(0, size);
  constexpr uint64_t kEdge = 1 << 20, kStride = 64ull << 20, kPage = 4096;
  read_at(0, kEdge);
  for (uint64_t off = kStride; off + kEdge < size; off += kStride) read_at(off, kPage);
  if (size > kEdge) read_at(size - kEdge, kEdge);
}

uint64_t hash_files(const fs::path& root, bool (*want)(const fs::path&), bool whole) {
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(root, ec)) {
    for (auto& e : fs::directory_iterator(root, ec))
      if (e.is_regular_file() && want(e.path())) files.push_back(e.path());
  } else {
    files.push_back(root);
  }
  std::sort(files.begin(), files.end());
  for (auto& f : files) sample_file(st, f, whole);
  uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return h;
}

bool is_weight_file(const fs::path& p) {
  auto ext = p.extension().string();
  return ext == ".safetensors" || ext == ".gguf" || p.filename() == "config.json";
}
bool is_tokenizer_file(const fs::path& p) {
  auto n = p.filename().string();
  return n == "tokenizer.json" || n == "tokenizer_config.json" || n == "chat_template.jinja";
}

}  // namespace

std::string weights_fingerprint(const model::Checkpoint& ckpt) { return hex(hash_files(ckpt.path, is_weight_file, false)); }

std::string tokenizer_fingerprint(const model::Checkpoint& ckpt) {
  // A GGUF carries its tokenizer inside: the weights fingerprint already covers it.
  if (!fs::is_directory(ckpt.tokenizer_path)) return hex(0);
  return hex(hash_files(ckpt.tokenizer_path, is_tokenizer_file, true));
}

std::string kv_snapshot_key(const model::Checkpoint& ckpt, cache::KvDType kv_dtype, int32_t block_size,
                            const std::string& numerics_id) {
  // The block size is part of the page layout, so it is part of the identity too; and the build's
  // arithmetic: another build's KV differs in the last bits, and continuing from it would change
  // this build's greedy output (a prefix is recomputed instead).
  const std::string build = numerics_id.empty() ? std::string(RAPID_NUMERICS_ID) : numerics_id;
  return cache::model_identity_key(weights_fingerprint(ckpt) + "-b" + std::to_string(block_size) + "-n" + build,
                                   tokenizer_fingerprint(ckpt), kv_dtype);
}

}  // namespace rapid::engine
