#include "model/lane_repack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
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

bool repack_enabled() {
  const char* e = std::getenv("RAPID_REPACK");
  return !(e && !std::strcmp(e, "0")) && compute::kernels().dot_q8_0_lanes != nullptr;
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

RepackReport repack_for_lane_kernels(WeightStore& ws) {
  RepackReport rep;
  if (!repack_enabled()) return rep;
  std::vector<std::string> names;
  for (auto& [name, t] : ws.all())
    if (t.dtype == tensor::DType::Q8_0 && t.data && tensor::q8_0_lanes_fit(t.cols())) names.push_back(name);
  std::map<const void*, const void*> done;  // source bytes -> their copy
  for (const std::string& name : names) {
    tensor::Tensor t = ws.get(name);
    const size_t row = tensor::row_bytes(t.dtype, t.cols()), bytes = row * static_cast<size_t>(t.rows());
    auto it = done.find(t.data);
    if (it == done.end()) {
      // Not value-initialised: every byte is written below, and zeroing first would be a pass more.
      std::shared_ptr<uint8_t[]> buf(new uint8_t[bytes]);
      const auto* src = static_cast<const uint8_t*>(t.data);
      const int64_t nb = t.cols() / tensor::kQK;
      parallel_rows(t.rows(), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          tensor::repack_q8_0_lanes(reinterpret_cast<const tensor::BlockQ8_0*>(src + r * row), nb, buf.get() + r * row);
      });
      if (const MappedFile* f = ws.mapping_of(src)) f->drop_pages(static_cast<size_t>(src - f->data()), bytes);
      it = done.emplace(t.data, buf.get()).first;
      ws.keep_alive(std::shared_ptr<const uint8_t[]>(std::move(buf)));
      rep.bytes += bytes;
    }
    t.dtype = tensor::DType::Q8_0_LANES;
    t.data = it->second;
    t.nbytes = bytes;
    ws.add(std::move(t));
    ++rep.tensors;
  }
  return rep;
}

}  // namespace rapid::model
