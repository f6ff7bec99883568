#include "cli/model_catalog.h"

#include <algorithm>
#include <filesystem>

#include "hub/hf_cache.h"
#include "hub/resolve.h"

namespace rapid::cli {
namespace fs = std::filesystem;

namespace {
bool is_gguf(const fs::path& p) { return p.extension() == ".gguf"; }
bool is_model_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) && fs::exists(p / "config.json", ec);
}

// The models directly in `dir` (not descending into model folders).
void scan_level(const fs::path& dir, std::vector<CatalogEntry>& out, bool descend) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const fs::path& p = e.path();
    if (e.is_regular_file(ec) && is_gguf(p)) out.push_back({p.filename().string(), p.string()});
    else if (is_model_dir(p)) out.push_back({p.filename().string(), p.string()});
    else if (descend && e.is_directory(ec)) scan_level(p, out, false);
  }
}
}  // namespace

std::vector<CatalogEntry> scan_models_dir(const std::string& dir) {
  std::vector<CatalogEntry> out;
  scan_level(dir, out, true);
  std::sort(out.begin(), out.end(), [](const CatalogEntry& a, const CatalogEntry& b) { return a.name < b.name; });
  return out;
}

std::vector<CatalogEntry> scan_hf_cache() {
  std::vector<CatalogEntry> out;
  const std::string cache = hub::default_cache_dir();
  for (const hub::CachedRepo& r : hub::scan_cache(cache)) {
    std::optional<hub::ModelRef> ref = hub::parse_model_ref(r.repo);
    if (ref && hub::resolve_cached(*ref, cache)) out.push_back({r.repo, r.repo});
  }
  return out;
}

uint64_t weight_bytes(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    uintmax_t n = fs::file_size(path, ec);
    return ec ? 0 : n;
  }
  uint64_t n = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
    if (e.path().extension() == ".safetensors") n += e.file_size(ec);
  return n;
}

}  // namespace rapid::cli
