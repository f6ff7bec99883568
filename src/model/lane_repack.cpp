#include "model/lane_repack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/huge_buffer.h"
#include "compute/kernels.h"
#include "tensor/lane_layout.h"
#include "tensor/quant_formats.h"

namespace rapid::model {

namespace {

bool repack_off() {
  const char* e = std::getenv("RAPID_REPACK");
  return e && !std::strcmp(e, "0");
}

// The GGUF types whose lane layout the active ISA has a kernel for (none with RAPID_REPACK=0).
std::vector<tensor::DType> repackable_types() {
  if (repack_off()) return {};
  const compute::Kernels& k = compute::kernels();
  const std::pair<tensor::DType, compute::Kernels::QDotV> kernel_of[] = {
      {tensor::DType::Q8_0, k.dot_q8_0_lanes},
      {tensor::DType::Q4_0, k.dot_q4_0_lanes},
      {tensor::DType::Q4_1, k.dot_q4_1_lanes},
      {tensor::DType::Q4_K, k.dot_q4_k_lanes},
      {tensor::DType::Q6_K, k.dot_q6_k_lanes},
      {tensor::DType::IQ4_NL, k.dot_iq4_nl_lanes},
      {tensor::DType::IQ4_XS, k.dot_iq4_xs_lanes},
  };
  std::vector<tensor::DType> r;
  for (auto [t, kernel] : kernel_of)
    if (kernel) r.push_back(t);
  return r;
}

// MLX affine 4- and 8-bit matrices whose lane kernel reads MLX_LANES (the group sizes it takes).
bool mlx_repackable(const tensor::Tensor& t) {
  const compute::Kernels& k = compute::kernels();
  const bool kernel = t.bits == 4 ? k.dot_mlx4_lanes != nullptr : t.bits == 8 && k.dot_mlx8_lanes != nullptr;
  return !repack_off() && kernel && t.dtype == tensor::DType::MLX_AFFINE &&
         (t.group_size == 32 || t.group_size == 64 || t.group_size == 128);
}

// A repacked tensor's row bytes, and one row from src into dst (dst may be src for MLX_LANES).
size_t packed_row_bytes(const tensor::Tensor& t) {
  return t.dtype == tensor::DType::MLX_AFFINE ? static_cast<size_t>(t.cols() * t.bits / 8)
                                              : tensor::row_bytes(t.dtype, t.cols());
}
void repack_row(const tensor::Tensor& t, const uint8_t* src, uint8_t* dst) {
  if (t.dtype == tensor::DType::MLX_AFFINE) return tensor::repack_mlx_lanes(t.bits, src, t.cols() / tensor::kQK, dst);
  tensor::repack_lanes(t.dtype, src, t.cols(), dst);
}

// MemAvailable from /proc/meminfo in bytes (0 when unknown).
size_t available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  while (f >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024;
    f.ignore(256, '\n');
  }
  return 0;
}

// f(r0, r1) over [0, rows) split across the machine's cores (a load-time copy of the weights:
// memory-bound, so every core helps).
template <class F>
void parallel_rows(int64_t rows, F&& f) {
  const int64_t n = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(1, rows / 64));
  std::vector<std::thread> ts;
  for (int64_t i = 1; i < n; ++i) ts.emplace_back([&, i] { f(rows * i / n, rows * (i + 1) / n); });
  f(0, rows / n);
  for (auto& t : ts) t.join();
}

// n bytes at p into dst: with pread where p lies in a file mapping (MappedFile::read says why).
void copy_bytes(const WeightStore& ws, const void* p, size_t n, void* dst) {
  if (const MappedFile* f = ws.mapping_of(p))
    f->read(static_cast<size_t>(static_cast<const uint8_t*>(p) - f->data()), n, dst);
  else
    std::memcpy(dst, p, n);
}

// Tables read a row per token: the input embedding when the LM head is another tensor, Gemma's
// per-layer embeddings. Copied, all their rows would be resident.
bool lookup_table(const WeightStore& ws, const std::string& name, const tensor::Tensor& t) {
  if (name == "model.embed_tokens_per_layer.weight") return true;
  if (name != "model.embed_tokens.weight" && name != "embeddings.word_embeddings.weight") return false;
  const tensor::Tensor* head = ws.find("lm_head.weight");
  return head && head->data != t.data;
}

// The bytes of an MLX tensor's scales (as many again for its biases).
size_t group_bytes(const tensor::Tensor& t) {
  return static_cast<size_t>(t.rows() * (t.cols() / t.group_size)) * tensor::block_bytes(t.group_dtype);
}

}  // namespace

RepackReport repack_for_lane_kernels(WeightStore& ws, std::optional<size_t> available) {
  RepackReport rep;
  const std::vector<tensor::DType> types = repackable_types();
  // Matrices only: stacked experts ([E, rows, cols]) stay mapped, so an expert never routed to is
  // never resident (and the page cache may evict the cold ones; a copy could not be).
  auto repackable = [&](const tensor::Tensor& t) {
    const bool typed = std::find(types.begin(), types.end(), t.dtype) != types.end() || mlx_repackable(t);
    return typed && t.data && t.shape.size() == 2 && tensor::lanes_fit(t.cols());
  };
  // MLX tensors the loader already copied out of the file (to align them) are rewritten in place
  // and cost nothing; everything else is copied.
  auto in_place = [&](const tensor::Tensor& t) { return t.dtype == tensor::DType::MLX_AFFINE && !ws.mapping_of(t.data); };
  // Tensors kept in the file's layout leave the mapping too, so that nothing reads it once the
  // repacked copies exist: on Linux 6.18 a fault there maps the whole page-cache folio around the
  // page (up to 2 MB), so the reads of SmolLM2-135M Q4_1's 61 norms mapped 39 MB of the repacked
  // matrices' sources back, and Gemma 3's Q5_0 / Q6_K matrices, read every token, kept ~15 MB of
  // their neighbours resident. Stacked experts stay (an expert never routed to is never resident),
  // and so do lookup tables.
  auto kept = [&](const std::string& name, const tensor::Tensor& t) {
    return !repackable(t) && t.data && ws.mapping_of(t.data) && t.shape.size() <= 2 &&
           name.find(".experts.") == std::string::npos && !lookup_table(ws, name, t);
  };
  std::vector<std::string> names, kept_names;
  std::map<const void*, size_t> sources;  // the bytes copied, by source
  for (auto& [name, t] : ws.all())
    if (repackable(t)) {
      names.push_back(name);
      if (!in_place(t)) sources[t.data] = packed_row_bytes(t) * static_cast<size_t>(t.rows());
    } else if (kept(name, t)) {
      kept_names.push_back(name);
    }
  if (names.empty()) return rep;
  // What own_copy below copies besides the repacked rows: the kept tensors, and MLX scales and
  // biases still in the mapping (by source: tied tensors share one copy).
  std::map<const void*, size_t> copies;
  auto will_copy = [&](const void* p, size_t n) {
    if (p && ws.mapping_of(p)) copies[p] = n;
  };
  for (const std::string& name : kept_names) {
    const tensor::Tensor& t = ws.get(name);
    will_copy(t.data, t.nbytes);
  }
  for (const std::vector<std::string>* group : {&kept_names, &names})
    for (const std::string& name : *group)
      if (const tensor::Tensor& t = ws.get(name); t.dtype == tensor::DType::MLX_AFFINE) {
        will_copy(t.scales, group_bytes(t));
        will_copy(t.biases, group_bytes(t));
      }
  size_t total = 0, slices = 0;
  for (const auto* m : {&sources, &copies})
    for (auto& [p, n] : *m) total += n, slices += BufferSlicer::padded(n);
  // The copies are anonymous memory the kernel cannot evict as it can the file's pages: a model
  // that would fill most of memory keeps its mapping (and runs at the file layout's speed).
  if (const size_t avail = available ? *available : available_memory(); avail && total > avail / 10 * 6) {
    rep.skipped_bytes = total;
    return rep;
  }
  // All copies share one buffer, on huge pages where the kernel allows (common/huge_buffer.h).
  BufferSlicer slicer(slices);
  if (slicer.buffer()) ws.keep_alive(std::shared_ptr<const uint8_t[]>(slicer.buffer()));
  std::map<const void*, const void*> done;  // source bytes -> their copy
  // Whatever of the files an earlier read mapped (the folios around the GGUF metadata's end, up to
  // 4 MB of Gemma 3's tensors) leaves now: the copies below read the files with pread, and a tensor
  // still read from its mapping faults its pages back in.
  std::set<const MappedFile*> files;
  for (auto& [p, n] : sources)
    if (const MappedFile* f = ws.mapping_of(p)) files.insert(f);
  for (const std::string& name : kept_names) files.insert(ws.mapping_of(ws.get(name).data));
  for (const MappedFile* f : files) f->drop_pages_touching(0, f->size());
  // Copies n bytes at p (in the mapping or not) to a new array the store keeps; p becomes the copy.
  auto own_copy = [&](const void*& p, size_t n) {
    const MappedFile* f = ws.mapping_of(p);
    if (!f) return;
    auto it = done.find(p);
    if (it == done.end()) {
      uint8_t* buf = slicer.take(n);
      copy_bytes(ws, p, n, buf);
      rep.sources.emplace_back(static_cast<const uint8_t*>(p), n);
      it = done.emplace(p, buf).first;
    }
    p = it->second;
  };
  for (const std::string& name : kept_names) {
    tensor::Tensor t = ws.get(name);
    own_copy(t.data, t.nbytes);
    if (t.dtype == tensor::DType::MLX_AFFINE) {
      own_copy(t.scales, group_bytes(t));
      own_copy(t.biases, group_bytes(t));
    }
    ws.add(std::move(t));
  }
  for (const std::string& name : names) {
    tensor::Tensor t = ws.get(name);
    const size_t row = packed_row_bytes(t), bytes = row * static_cast<size_t>(t.rows());
    auto it = done.find(t.data);
    if (it == done.end() && in_place(t)) {  // the store's own heap copy
      auto* own = const_cast<uint8_t*>(static_cast<const uint8_t*>(t.data));
      parallel_rows(t.rows(), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) repack_row(t, own + r * row, own + r * row);
      });
      it = done.emplace(t.data, t.data).first;
    } else if (it == done.end()) {
      uint8_t* buf = slicer.take(bytes);
      const auto* src = static_cast<const uint8_t*>(t.data);
      // The rows are read into their place in the copy a few MB at a time, and each is repacked
      // there through one row of scratch.
      const int64_t step = std::max<int64_t>(1, static_cast<int64_t>((4u << 20) / row));
      parallel_rows(t.rows(), [&](int64_t r0, int64_t r1) {
        std::vector<uint8_t> line(row);
        for (int64_t c = r0; c < r1; c += step) {
          const int64_t e = std::min(r1, c + step);
          copy_bytes(ws, src + c * row, static_cast<size_t>(e - c) * row, buf + c * row);
          for (int64_t r = c; r < e; ++r) {
            std::memcpy(line.data(), buf + r * row, row);
            repack_row(t, line.data(), buf + r * row);
          }
        }
      });
      it = done.emplace(t.data, buf).first;
      rep.bytes += bytes;
    }
    if (t.dtype == tensor::DType::MLX_AFFINE) {
      own_copy(t.scales, group_bytes(t));  // out of the mapping too, as the kept tensors
      own_copy(t.biases, group_bytes(t));
    }
    t.dtype = t.dtype == tensor::DType::MLX_AFFINE ? tensor::DType::MLX_LANES : tensor::lane_layout_of(t.dtype);
    t.data = it->second;
    t.nbytes = bytes;
    ws.add(std::move(t));
    ++rep.tensors;
  }
  for (auto& [p, n] : sources) rep.sources.emplace_back(static_cast<const uint8_t*>(p), n);
  return rep;
}

void drop_repacked_sources(const WeightStore& ws, const RepackReport& rep) {
  for (auto& [p, n] : rep.sources)
    if (const MappedFile* f = ws.mapping_of(p)) f->drop_pages_touching(static_cast<size_t>(p - f->data()), n);
}

}  // namespace rapid::model
