#include "model/checkpoint_hf.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/huge_buffer.h"
#include "common/mapped_file.h"
#include "model/config_load.h"
#include "model/mlx_quant.h"
#include "model/moe.h"
#include "model/safetensors.h"
#include "tensor/quant_formats.h"

namespace rapid::model {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string normalize_hf_name(const std::string& n) {
  auto starts = [&](const char* p) { return n.rfind(p, 0) == 0; };
  if (starts("model.language_model.")) return "model." + n.substr(21);
  if (starts("language_model.model.")) return n.substr(15);
  if (starts("language_model.lm_head.")) return n.substr(15);
  // A bare base model (Qwen3Model, LlamaModel: what sentence-transformers saves for embedding
  // models such as Qwen3-Embedding) has no "model." prefix.
  if (starts("embed_tokens.") || starts("layers.") || starts("norm.")) return "model." + n;
  if (starts("vision_tower.") || starts("model.vision_tower.") || starts("multi_modal_projector.") ||
      starts("model.multi_modal_projector.") || starts("audio_tower.") || starts("model.audio_tower."))
    return "";
  return n;
}

namespace {

std::vector<std::string> shard_files(const std::string& dir, std::map<std::string, std::string>& weight_map) {
  fs::path idx = fs::path(dir) / "model.safetensors.index.json";
  std::vector<std::string> files;
  if (fs::exists(idx)) {
    json j;
    try {
      j = json::parse(read_file(idx.string()));
    } catch (const json::exception& e) {
      throw FileError(idx.string(), std::string("invalid JSON: ") + e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) throw FileError(idx.string(), "no weight_map object");
    std::set<std::string> uniq;
    for (auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) throw FileError(idx.string(), "weight_map['" + name + "'] is not a file name");
      std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        throw FileError(idx.string(), "weight_map['" + name + "'] names a file outside the model directory");
      weight_map[name] = f;
      uniq.insert(f);
    }
    for (auto& f : uniq) files.push_back((fs::path(dir) / f).string());
  } else {
    for (auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
  }
  if (files.empty()) throw FileError(dir, "no .safetensors files");
  return files;
}

// Folds "<m>.weight" (U32 packed) + "<m>.scales" + "<m>.biases" into one MLX_AFFINE tensor, or
// "<m>.weight" + uint8 "<m>.scales" of a mode "mxfp4" module into one MXFP4 tensor.
void fold_mlx_quantized(WeightStore& raw, const std::optional<mlx::QuantConfig>& qc, const std::string& dir,
                        WeightStore& out) {
  for (auto& [name, t] : raw.all()) {
    const std::string sfx = ".scales";
    if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) continue;
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".biases") == 0 &&
        raw.find(name.substr(0, name.size() - 7) + ".scales"))
      continue;
    const std::string wsfx = ".weight";
    bool is_weight = name.size() > wsfx.size() && name.compare(name.size() - wsfx.size(), wsfx.size(), wsfx) == 0;
    std::string module = is_weight ? name.substr(0, name.size() - wsfx.size()) : "";
    const tensor::Tensor* scales = is_weight ? raw.find(module + ".scales") : nullptr;
    if (!scales) {
      out.add(t);
      continue;
    }
    auto bad = [&](const std::string& why) { return FileError(dir, "quantized '" + module + "': " + why); };
    if (!qc) throw bad("has scales but config.json has no quantization section");
    auto spec = qc->for_module(module);
    if (!spec) throw bad("has scales but config.json marks it unquantized");
    const tensor::Tensor* biases = raw.find(module + ".biases");
    if (!spec->mxfp4 && !biases) throw bad("has scales but no biases");
    if (spec->mxfp4 && biases) throw bad("mode 'mxfp4' has no biases, but the file has some");
    // 3-D: stacked experts [E, rows, cols] (mlx-lm's switch_mlp), scales [E, rows, groups].
    if (t.dtype != tensor::DType::U32 || (t.shape.size() != 2 && t.shape.size() != 3))
      throw bad("packed weight is not a 2-D or 3-D uint32 tensor");
    const bool stacked = t.shape.size() == 3;
    int64_t rows = t.shape[stacked ? 1 : 0], pcols = t.shape.back();
    if ((pcols * 32) % spec->bits) throw bad("packed width is not a whole number of " + std::to_string(spec->bits) + "-bit values");
    int64_t cols = pcols * 32 / spec->bits;
    if (cols % spec->group_size) throw bad("row of " + std::to_string(cols) + " is not a whole number of groups");
    std::vector<int64_t> gshape = {rows, cols / spec->group_size};
    if (stacked) gshape.insert(gshape.begin(), t.shape[0]);
    const std::string geometry = std::to_string(rows) + " x " + std::to_string(gshape.back()) + " groups (bits " +
                                 std::to_string(spec->bits) + ", group_size " + std::to_string(spec->group_size) + ")";
    tensor::Tensor q = t;
    q.shape = {rows, cols};
    if (stacked) q.shape.insert(q.shape.begin(), t.shape[0]);
    q.bits = spec->bits;
    q.group_size = spec->group_size;
    q.scales = scales->data;
    if (spec->mxfp4) {
      if (scales->shape != gshape) throw bad("scales shape does not match " + geometry);
      if (scales->dtype != tensor::DType::U8) throw bad("mode 'mxfp4' scales must be uint8 (E8M0), not " +
                                                std::string(tensor::dtype_name(scales->dtype)));
      q.dtype = tensor::DType::MXFP4;
      q.group_dtype = tensor::DType::U8;
      out.add(std::move(q));
      continue;
    }
    if (scales->shape != gshape || biases->shape != gshape)
      throw bad("scales/biases shape does not match " + geometry);
    if (scales->dtype != biases->dtype || (scales->dtype != tensor::DType::F16 && scales->dtype != tensor::DType::BF16 && scales->dtype != tensor::DType::F32))
      throw bad("scales/biases must share one float dtype");
    q.dtype = tensor::DType::MLX_AFFINE;
    q.group_dtype = scales->dtype;
    q.biases = biases->data;
    out.add(std::move(q));
  }
}

struct FileRead {
  size_t at, n;
  uint8_t* dst;
};
// The reads split over the machine's cores by bytes: the first touch of the copies' huge pages
// (zeroed by the kernel) and the copy are memory-bound, and one thread took 1.06 s for the
// Qwen3.5-0.8B-shaped MLX 4-bit model's 424 MB.
void read_in_parallel(const MappedFile& f, const std::vector<FileRead>& reads) {
  size_t total = 0;
  for (const FileRead& r : reads) total += r.n;
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  std::vector<std::thread> ts;
  std::vector<std::exception_ptr> errors(threads);
  size_t i = 0;
  for (size_t k = 0; k < threads && i < reads.size(); ++k) {
    const size_t first = i;
    for (size_t bytes = 0; i < reads.size() && (k + 1 == threads || bytes < total / threads); ++i) bytes += reads[i].n;
    ts.emplace_back([&f, &reads, &error = errors[k], first, last = i] {
      try {
        for (size_t j = first; j < last; ++j) f.read(reads[j].at, reads[j].n, reads[j].dst);
      } catch (...) {
        error = std::current_exception();  // a short read (the file shrank) names the file
      }
    });
  }
  for (auto& t : ts) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The copies are read with pread, but the header's parse mapped the folios around it: once all are
// copied, the copied ranges (merged) leave the mapping, the pages tensors share at their ends too
// (a Qwen3.5-0.8B-shaped MLX 4-bit model ran at 969 MB against 472 MB of weights when the copies'
// pages stayed; the mapping stays valid: a later read faults them in).
void drop_copied_pages(const MappedFile& f, std::vector<std::pair<size_t, size_t>>& ranges) {
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 0; i < ranges.size();) {
    size_t lo = ranges[i].first, hi = lo + ranges[i].second;
    for (++i; i < ranges.size() && ranges[i].first <= hi; ++i) hi = std::max(hi, ranges[i].first + ranges[i].second);
    f.drop_pages(lo, hi - lo);
  }
}

}  // namespace

std::unique_ptr<Checkpoint> load_hf_checkpoint(const std::string& dir) {
  auto ck = std::make_unique<Checkpoint>();
  ck->path = dir;
  ck->config = load_hf_config(dir);
  std::string cpath = (fs::path(dir) / "config.json").string();
  json cfg;
  try {
    cfg = json::parse(read_file(cpath));
  } catch (const json::exception& e) {
    throw FileError(cpath, e.what());
  }
  std::optional<mlx::QuantConfig> qc;
  try {
    qc = mlx::parse_quant_config(cfg);
  } catch (const FileError&) {
    throw;
  } catch (const Error& e) {
    throw FileError(cpath, e.what());
  }
  // Per-module overrides name modules as the file does (language_model.model.layers.0.mlp.gate);
  // the tensors are looked up under their normalized names.
  if (qc) {
    std::map<std::string, std::optional<mlx::QuantSpec>> norm;
    for (auto& [m, spec] : qc->overrides)
      if (std::string n = normalize_hf_name(m); !n.empty()) norm[n] = spec;
    qc->overrides = std::move(norm);
  }
  std::map<std::string, std::string> weight_map;
  WeightStore raw;
  for (auto& file : shard_files(dir, weight_map)) {
    SafetensorsFile sf = read_safetensors(file);
    std::string fname = fs::path(file).filename().string();
    std::vector<std::pair<size_t, size_t>> copied;  // file byte ranges now held by aligned copies
    // safetensors only aligns data when the writer pads its header (MLX's does not): a file with a
    // misaligned tensor is read into aligned copies whole, so every consumer may read typed arrays.
    // Whole, not just the misaligned tensors: a read of an aligned one left in the mapping would map
    // the page-cache folio around it (up to 2 MB on Linux 6.18), copied neighbours included.
    // Stacked experts stay in the mapping: MoeBlock copies an expert when it is first used.
    auto misaligned = [](const tensor::Tensor& t) {
      const size_t align = block_bytes(t.dtype);
      return align > 1 && reinterpret_cast<uintptr_t>(t.data) % align != 0;
    };
    const bool copy_all = std::any_of(sf.tensors.begin(), sf.tensors.end(), [&](const tensor::Tensor& t) {
      const std::string name = normalize_hf_name(t.name);
      return !name.empty() && misaligned(t) && !stacked_experts(name, t.shape.size());
    });
    // The copies share one buffer, on huge pages where the kernel allows (common/huge_buffer.h).
    size_t slices = 0;
    if (copy_all)
      for (auto& t : sf.tensors)
        if (!stacked_experts(normalize_hf_name(t.name), t.shape.size())) slices += BufferSlicer::padded(t.nbytes);
    BufferSlicer slicer(slices);
    std::vector<FileRead> reads;
    if (slicer.buffer()) ck->weights.keep_alive(std::shared_ptr<const uint8_t[]>(slicer.buffer()));
    for (auto& t : sf.tensors) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(t.name);
        if (it != weight_map.end() && it->second != fname)
          throw FileError(file, "tensor '" + t.name + "' is listed in the index under " + it->second);
      }
      tensor::Tensor n = t;
      n.name = normalize_hf_name(t.name);
      if (n.name.empty()) continue;
      if (copy_all && n.nbytes > 0 && !stacked_experts(n.name, n.shape.size())) {
        const size_t at = static_cast<size_t>(static_cast<const uint8_t*>(n.data) - sf.file->data());
        copied.emplace_back(at, n.nbytes);
        uint8_t* dst = slicer.take(n.nbytes);
        reads.push_back({at, n.nbytes, dst});
        n.data = dst;
      }
      if (raw.find(n.name)) throw FileError(file, "tensor '" + n.name + "' appears twice");
      raw.add(std::move(n));
    }
    read_in_parallel(*sf.file, reads);
    drop_copied_pages(*sf.file, copied);
    ck->weights.keep_alive(sf.file);
  }
  for (auto& [name, f] : weight_map) {
    std::string n = normalize_hf_name(name);
    if (!n.empty() && !raw.find(n)) throw FileError(dir, "index lists '" + name + "' in " + f + " but it is not there");
  }
  fold_mlx_quantized(raw, qc, dir, ck->weights);
  if (fs::exists(fs::path(dir) / "tokenizer.json")) ck->tokenizer_path = dir;
  else if (fs::exists(fs::path(dir) / "tokenizer.gguf")) ck->tokenizer_path = (fs::path(dir) / "tokenizer.gguf").string();
  else ck->tokenizer_path = dir;
  return ck;
}

}  // namespace rapid::model
