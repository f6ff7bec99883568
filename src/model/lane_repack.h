// Load-time repacking of weights into the layouts this machine's lane kernels read fastest
// (tensor/lane_layout.h). Values, results and row sizes are unchanged; only the bytes move.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "model/weights.h"

namespace rapid::model {

struct RepackReport {
  int tensors = 0;
  size_t bytes = 0;
  size_t skipped_bytes = 0;  // what would have been copied, when that was over 60 % of MemAvailable
  std::vector<std::pair<const uint8_t*, size_t>> sources;  // the copied byte ranges of the mapping
};

// Rewrites every Q8_0 / Q4_0 / Q4_1 / Q4_K matrix whose rows hold at least one 8-block group as
// its *_LANES layout when the active kernels read that layout (AVX-512 VNNI), and MLX affine 4- and
// 8-bit ones as MLX_LANES (in place where the loader had copied them out of the file). Stacked experts stay
// mapped, and nothing is copied when the copies would exceed 60 % of MemAvailable. The copies live
// in `ws`, read from the file with pread (MappedFile::read), so the source pages never enter this
// process's resident set and resident memory does not grow. The tensors kept in the file's layout
// are copied out the same way (but stacked experts and lookup tables: input embeddings the LM head
// does not share), so nothing reads the mapping afterwards: a read there maps the page-cache folio
// around it, copied neighbours included. Tensors sharing bytes share one copy. RAPID_REPACK=0 in
// the environment turns it off (A/B measurements).
// `available` stands for MemAvailable (tests); unset, /proc/meminfo is read.
RepackReport repack_for_lane_kernels(WeightStore& ws, std::optional<size_t> available = std::nullopt);

// Drops every page holding a byte of a copied range, edges included, once the model is built: a
// read of a tensor still in the mapping maps the folio around it (the kernel's fault-around, up to
// 2 MB with large folios), which may hold a copied neighbour's bytes. A tensor still read from the
// mapping reads its pages back.
void drop_repacked_sources(const WeightStore& ws, const RepackReport& rep);

}  // namespace rapid::model
