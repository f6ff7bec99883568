// Internal interface between the attention driver (attention.cpp) and its per-ISA inner loops
// (attention_scalar/avx2/avx512.cpp). Keys are processed in chunks of Fns::chunk positions aligned to
// absolute positions (not to pages), so the arithmetic a query sees does not depend on the block
// size, on the tile it falls in, or on which other queries share the tile.
#pragma once
#include <cstdint>

#include "compute/attention.h"

namespace rapid::compute::attn {

constexpr int kChunk = 16;  // chunk of the scalar and AVX2 paths (AVX-512 uses 64)

// Bytes of one K/V element in the pages (KvView::dtype: f32, or f16 / bf16).
constexpr int64_t kv_elem_bytes(tensor::DType dt) { return dt == tensor::DType::F32 ? 4 : 2; }

// Online-softmax state of one (query token, query head) pair.
struct Row {
  const float* q;  // head_dim values
  float* acc;      // padded head_dim: running sum of p_j * V_j (scaled to the running max)
  float m, l;      // running max of the scores and running sum of exp(score - m)
  int jlo, jhi;    // slots of the current chunk this row sees (jlo > jhi: none)
};

struct Fns {
  // Converts slots jlo..jhi of the chunk starting at position c0 (kv head h) to f32: kt holds the
  // keys in the layout `step` wants (hdp*chunk floats), vf the values, vf[j*hdp + d] (columns
  // hd..hdp zero). Other slots only feed masked-out scores.
  void (*load)(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd, int64_t hdp,
               float* kt, float* vf);
  // One chunk for each row with jlo <= jhi: scores, online-softmax update, V accumulation.
  // Every row's arithmetic is independent of the other rows.
  void (*step)(const float* kt, const float* vf, int64_t hd, int64_t hdp, float scale,
               float softcap, Row* rows, int nrows);
  int64_t lanes;  // hdp is head_dim rounded up to this
  int chunk;      // keys per chunk (chunks start at multiples of it); kt/vf hold chunk rows
  // Optional: `step` reading slots jlo..jhi straight from the pages (no load), bitwise the same
  // as load + step; used when a chunk serves too few rows for a conversion pass to pay off.
  void (*step_paged)(const KvView& kv, int64_t h, int64_t c0, int jlo, int jhi, int64_t hd,
                     int64_t hdp, float scale, float softcap, Row* rows, int nrows);
};

Fns fns_scalar();
Fns fns_avx2();
Fns fns_avx512();

}  // namespace rapid::compute::attn
