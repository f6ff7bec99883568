// Load-time repacking of weights into the layouts this machine's lane kernels read fastest
// (tensor/lane_layout.h). Values, results and row sizes are unchanged; only the bytes move.
#pragma once
#include <cstddef>

#include "model/weights.h"

namespace rapid::model {

struct RepackReport {
  int tensors = 0;
  size_t bytes = 0;
};

// Rewrites every Q8_0 / Q4_0 / Q4_1 tensor whose rows hold at least one 8-block group as
// Q8_0_LANES / Q4_0_LANES / Q4_1_LANES when the active kernels read that layout (AVX-512 VNNI). The copies live in `ws`; the source pages leave this
// process's resident set (drop_pages), so resident memory does not grow. Tensors sharing bytes
// share one copy. RAPID_REPACK=0 in the environment turns it off (A/B measurements).
RepackReport repack_for_lane_kernels(WeightStore& ws);

}  // namespace rapid::model
