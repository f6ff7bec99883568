// y = x · Wᵀ for a weight W [rows, cols] in any supported format and n activation rows.
// Decode (n = 1) is a GEMV, prefill (n > 1) a GEMM that reuses each weight row for a tile of
// tokens (4, or up to 16 with the Kernels::QDotV kernels).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "compute/prefetch.h"
#include "compute/thread_pool.h"
#include "tensor/quant_formats.h"
#include "tensor/tensor.h"

namespace rapid::compute {

enum class MatmulPath {
  Fast,   // int8 activations × quantized weights (VNNI) where a kernel exists
  Exact,  // dequantize weights to f32 and multiply in f32 (parity checks)
};

struct WeightView {
  tensor::DType dtype = tensor::DType::F32;
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;
  size_t row_stride = 0;  // bytes between rows (non-MLX)
  // MXFP4: `scales` holds one E8M0 byte per 32 elements, rows scale_stride bytes apart (gpt-oss's
  // interleaved gate/up rows are views with both strides doubled).
  size_t scale_stride = 0;
  // MLX affine
  int bits = 0, group_size = 0;
  tensor::DType group_dtype = tensor::DType::F16;
  const void* scales = nullptr;
  const void* biases = nullptr;

  static WeightView of(const tensor::Tensor& t);  // throws Error for unsupported dtypes / shapes
};

// Reusable scratch (activation quantization); one per calling thread.
struct MatmulScratch {
  std::vector<tensor::ActQ8> xq;
  std::vector<tensor::ActQ8> xq_mlx4;  // xq in nibble order, for the per-block MLX 4-bit / MXFP4 kernels
  // Per MLX group size: for each activation row and group, Σ dx·Σx over the group's blocks.
  std::vector<std::pair<int, std::vector<float>>> mlx_gsum;
  std::vector<int32_t> lq, lsum, lhs;  // xq packed by pack_act_lanes (for Kernels::QDotV)
  std::vector<int32_t> lq4;       // xq packed the same way in nibble order (Kernels::MlxDotV, MXFP4)
  std::vector<int32_t> lqb;       // lq's values + 128 (bias_act_lanes, Kernels::dot_iq_decodedv)
  std::vector<float> ld, lds;
  std::vector<int32_t> tq, tq4, tsum;  // lq's / lq4's tail group in token pairs (pair_tail_lanes)
  std::vector<float> td, tds;
  std::vector<int8_t> pq;  // xq packed by pack_panel_acts (AMX panels)
  std::vector<float> pd, pds;
};

// y[t*rows + r] = Σ_c W[r, c] · x[t*cols + c] for t < n.
void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
            MatmulScratch& scratch, MatmulPath path = MatmulPath::Fast);

// Several weights over the same input (q/k/v, gate/up): x is quantized once and all rows share
// one parallel region. outs[i].y receives [n, outs[i].w->rows].
struct MatmulOut {
  const WeightView* w;
  float* y;
};
void matmul_multi(const MatmulOut* outs, int count, const float* x, int64_t n, ThreadPool& pool,
                  MatmulScratch& scratch, MatmulPath path = MatmulPath::Fast);

// Two weights of one shape over the same input (gate/up): the chunk that computes rows [r0, r1)
// of both then calls combine(r0, r1) (for all n tokens), so an elementwise epilogue such as the
// MLP's act(gate)·up runs inside the matmul's parallel region instead of one of its own.
void matmul_pair(const MatmulOut& a, const MatmulOut& b, const float* x, int64_t n, ThreadPool& pool,
                 MatmulScratch& scratch, const std::function<void(int64_t, int64_t)>& combine,
                 MatmulPath path = MatmulPath::Fast);

// A call prepared once (x quantized and packed for every weight's kernel), whose rows are then
// computed by the caller in any threads, interleaved with other work: a caller's own parallel
// region can split the rows its way (the Gated DeltaNet's input projections per head, each task
// going on to that head's conv and recurrence) instead of a region per matmul. Any split of the
// rows gives the same values. Holds pointers into scratch: use it before scratch's next call.
struct MatmulPrepared;
class MatmulPlan {
 public:
  MatmulPlan(const MatmulOut* outs, int count, const float* x, int64_t n, MatmulScratch& scratch,
             MatmulPath path = MatmulPath::Fast, ThreadPool* pool = nullptr);
  ~MatmulPlan();
  // Rows [r0, r1) of weight i into outs[i].y, for all n activation rows.
  void rows(int i, int64_t r0, int64_t r1) const;

 private:
  std::unique_ptr<MatmulPrepared> p_;
};

// Independent matmuls, each over its own input, in one parallel region (a mixture-of-experts
// layer's routed experts: every expert's gate/up over the rows routed to it, then every down).
// Group g multiplies x [n, cols] by a, and by b (of a's rows) when b.w is set; the chunk that
// computed rows [r0, r1) of a group then calls combine(g, r0, r1) if combine is set. Groups with
// the same x and n (and weight formats) share one quantization of x. scratch: count of them, one
// per group. A row's result is bitwise that of matmul() (the same kernels per row).
struct MatmulGroup {
  MatmulOut a, b{nullptr, nullptr};
  const float* x = nullptr;
  int64_t n = 0;
};
void matmul_groups(const MatmulGroup* groups, int count, ThreadPool& pool, MatmulScratch* scratch,
                   const std::function<void(int, int64_t, int64_t)>& combine, MatmulPath path = MatmulPath::Fast);

// The software prefetch of a decode row loop (matmul.cpp's row_prefetch says which formats and
// why): each stream a row of the weight reads (packed values; MLX scales and biases; MXFP4 scales),
// its row stride and the bytes of one row, and how many rows ahead to ask for. Public for its test.
struct RowPrefetch {
  int64_t ahead = 0;  // rows ahead; 0: no prefetch
  bool to_l2 = false;  // into L2 only (T1), not every level (T0): see note_weight_bytes
  int streams = 0;
  const uint8_t* base[3] = {};
  size_t stride[3] = {}, bytes[3] = {};
  // Asks for row r + ahead of every stream while that row is before `end` (a hint: no arithmetic).
  void operator()(int64_t r, int64_t end) const {
    if (!ahead || r + ahead >= end) return;
    for (int i = 0; i < streams; ++i) {
      const uint8_t* p = base[i] + (r + ahead) * stride[i];
      if (to_l2) {
        for (size_t o = 0; o < bytes[i]; o += 64) prefetch_l2(p + o);
      } else {
        for (size_t o = 0; o < bytes[i]; o += 64) prefetch_l1(p + o);
      }
    }
  }
};
RowPrefetch row_prefetch(const WeightView& w);
// Turns that prefetch on (or back off) for every later matmul: for paired before / after
// measurements in one process (compute_bench's prefetch_* rows). It starts off; RAPID_ROW_PREFETCH=1
// starts a process with it on, to compare the same binary end to end.
void set_row_prefetch(bool on);
// The bytes of weights a model streams (create_model, after its repack), added to those of the
// process's other models (a draft model decodes beside its target). Weights over half the
// last-level cache come from DRAM each step, and decode's row prefetch then asks for them into L2
// only: more of the stream in flight than the L1 fill buffers hold. Measured on the Xeon with a
// 480 MB L3, alternated (bench/README.md): Qwen3.5-0.8B-shape Q4_0 decode +8-12 %, Qwen3-30B-A3B-
// shape Q4_K_M +9-12 %, but SmolLM2 (98 MB, L3-resident) 3-6 % slower, so smaller models keep T0.
void note_weight_bytes(size_t bytes);

// Dequantizes row r of w into out (cols floats).
void weight_row_f32(const WeightView& w, int64_t r, float* out);

}  // namespace rapid::compute
