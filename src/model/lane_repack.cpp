#include "model/lane_repack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "compute/kernels.h"
#include "tensor/lane_layout.h"
#include "tensor/quant_formats.h"

namespace rapid::model {

namespace {

// The GGUF types whose lane layout the active ISA has a kernel for (none with RAPID_REPACK=0).
std::vector<tensor::DType> repackable_types() {
  const char* e = std::getenv("RAPID_REPACK");
  if (e && !std::strcmp(e, "0")) return {};
  const compute::Kernels& k = compute::kernels();
  const std::pair<tensor::DType, compute::Kernels::QDotV> kernel_of[] = {
      {tensor::DType::Q8_0, k.dot_q8_0_lanes},
      {tensor::DType::Q4_0, k.dot_q4_0_lanes},
      {tensor::DType::Q4_1, k.dot_q4_1_lanes},
      {tensor::DType::Q4_K, k.dot_q4_k_lanes},
  };
  std::vector<tensor::DType> r;
  for (auto [t, kernel] : kernel_of)
    if (kernel) r.push_back(t);
  return r;
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

}  // namespace

RepackReport repack_for_lane_kernels(WeightStore& ws, std::optional<size_t> available) {
  RepackReport rep;
  const std::vector<tensor::DType> types = repackable_types();
  // Matrices only: stacked experts ([E, rows, cols]) stay mapped, so an expert never routed to is
  // never resident (and the page cache may evict the cold ones; a copy could not be).
  auto repackable = [&](const tensor::Tensor& t) {
    return std::find(types.begin(), types.end(), t.dtype) != types.end() && t.data && t.shape.size() == 2 &&
           tensor::lanes_fit(t.cols());
  };
  std::vector<std::string> names;
  std::map<const void*, size_t> sources;
  for (auto& [name, t] : ws.all())
    if (repackable(t)) {
      names.push_back(name);
      sources[t.data] = tensor::row_bytes(t.dtype, t.cols()) * static_cast<size_t>(t.rows());
    }
  // The copies are anonymous memory the kernel cannot evict as it can the file's pages: a model
  // that would fill most of memory keeps its mapping (and runs at the file layout's speed).
  size_t total = 0;
  for (auto& [p, n] : sources) total += n;
  if (const size_t avail = available ? *available : available_memory(); avail && total > avail / 10 * 6) {
    rep.skipped_bytes = total;
    return rep;
  }
  std::map<const void*, const void*> done;  // source bytes -> their copy
  for (const std::string& name : names) {
    tensor::Tensor t = ws.get(name);
    const size_t row = tensor::row_bytes(t.dtype, t.cols()), bytes = row * static_cast<size_t>(t.rows());
    auto it = done.find(t.data);
    if (it == done.end()) {
      // Not value-initialised: every byte is written below, and zeroing first would be a pass more.
      std::shared_ptr<uint8_t[]> buf(new uint8_t[bytes]);
      const auto* src = static_cast<const uint8_t*>(t.data);
      // The source pages leave the resident set a few MB at a time as they are copied, so the
      // load's peak is the weights plus a few MB per thread, not plus the largest tensor (a
      // tied LM head is a third of Qwen3.5-0.8B); the pages the chunks share go with
      // drop_repacked_sources.
      const MappedFile* f = ws.mapping_of(src);
      const int64_t step = std::max<int64_t>(1, static_cast<int64_t>((4u << 20) / row));
      parallel_rows(t.rows(), [&](int64_t r0, int64_t r1) {
        for (int64_t c = r0; c < r1; c += step) {
          const int64_t e = std::min(r1, c + step);
          for (int64_t r = c; r < e; ++r) tensor::repack_lanes(t.dtype, src + r * row, t.cols(), buf.get() + r * row);
          if (f) f->drop_pages(static_cast<size_t>(src + c * row - f->data()), static_cast<size_t>(e - c) * row);
        }
      });
      it = done.emplace(t.data, buf.get()).first;
      ws.keep_alive(std::shared_ptr<const uint8_t[]>(std::move(buf)));
      rep.bytes += bytes;
    }
    t.dtype = tensor::lane_layout_of(t.dtype);
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
