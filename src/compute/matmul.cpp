#include "compute/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/error.h"
#include "compute/aligned_buffer.h"
#include "compute/kernels.h"
#include "tensor/dequantize.h"
#include "tensor/fp16.h"
#include "tensor/lane_layout.h"
#include "tensor/mlx_affine.h"
#include "tensor/mxfp4.h"
#include "tensor/quant_formats.h"

namespace rapid::compute {

namespace {
// MLX affine rows, as the file has them or (4- and 8-bit) in lane order: scales and biases apart.
bool is_mlx(tensor::DType t) { return t == tensor::DType::MLX_AFFINE || t == tensor::DType::MLX_LANES; }
}  // namespace

WeightView WeightView::of(const tensor::Tensor& t) {
  WeightView w;
  if (t.shape.empty() || t.shape.size() > 2)
    throw Error("matmul: weight " + t.name + " must be 1-D or 2-D");
  w.dtype = t.dtype;
  w.data = t.data;
  w.rows = t.rows();
  w.cols = t.cols();
  if (is_mlx(t.dtype)) {
    if (t.bits <= 0 || t.group_size <= 0 || w.cols % t.group_size != 0 || (w.cols * t.bits) % 32 != 0 ||
        (t.dtype == tensor::DType::MLX_LANES && t.bits != 4 && t.bits != 8))
      throw Error("matmul: MLX weight " + t.name + " has bad bits/group_size");
    w.bits = t.bits;
    w.group_size = t.group_size;
    w.group_dtype = t.group_dtype;
    w.scales = t.scales;
    w.biases = t.biases;
    w.row_stride = static_cast<size_t>(w.cols * t.bits / 8);
    return w;
  }
  if (t.dtype == tensor::DType::MXFP4) {
    if (w.cols % tensor::mxfp4::kBlock != 0 || !t.scales)
      throw Error("matmul: MXFP4 weight " + t.name + " needs whole 32-element blocks and its scales");
    w.scales = t.scales;
    w.bits = 4;
    w.group_size = tensor::mxfp4::kBlock;
    w.scale_stride = static_cast<size_t>(w.cols / tensor::mxfp4::kBlock);
  }
  switch (t.dtype) {
    case tensor::DType::I32: case tensor::DType::U32: case tensor::DType::I8: case tensor::DType::U8:
      throw Error("matmul: weight " + t.name + " has integer dtype " + tensor::dtype_name(t.dtype));
    default: break;
  }
  w.row_stride = tensor::row_bytes(t.dtype, w.cols);
  if (t.nbytes && t.nbytes < w.row_stride * static_cast<size_t>(w.rows))
    throw Error("matmul: weight " + t.name + " is smaller than its shape says");
  return w;
}

void weight_row_f32(const WeightView& w, int64_t r, float* out) {
  if (is_mlx(w.dtype)) {
    int64_t groups = w.cols / w.group_size;
    const size_t gsz = tensor::block_bytes(w.group_dtype);
    const auto* row = static_cast<const uint8_t*>(w.data) + r * w.row_stride;
    std::vector<uint8_t> plain;
    if (w.dtype == tensor::DType::MLX_LANES) {  // the row's blocks back in element order
      plain.resize(w.row_stride);
      tensor::mlx_lanes_row(w.bits, row, w.cols / tensor::kQK, plain.data());
      row = plain.data();
    }
    tensor::mlx::dequantize_row(row,
                        static_cast<const uint8_t*>(w.scales) + r * groups * gsz,
                        static_cast<const uint8_t*>(w.biases) + r * groups * gsz, w.group_dtype,
                        w.bits, w.group_size, w.cols, out);
    return;
  }
  if (w.dtype == tensor::DType::MXFP4)
    return tensor::mxfp4::dequantize_row(static_cast<const uint8_t*>(w.data) + r * w.row_stride,
                                 static_cast<const uint8_t*>(w.scales) + r * w.scale_stride, w.cols, out);
  tensor::dequantize_row_raw(w.dtype, static_cast<const uint8_t*>(w.data) + r * w.row_stride, w.cols, out);
}

namespace {

Kernels::QDot int_kernel(const Kernels& k, tensor::DType t) {
  switch (t) {
    case tensor::DType::Q4_0: return k.dot_q4_0;
    case tensor::DType::Q4_1: return k.dot_q4_1;
    case tensor::DType::Q8_0: return k.dot_q8_0;
    case tensor::DType::Q4_K: return k.dot_q4_k;
    case tensor::DType::Q6_K: return k.dot_q6_k;
    case tensor::DType::Q5_0: return k.dot_q5_0;
    case tensor::DType::Q5_1: return k.dot_q5_1;
    case tensor::DType::Q5_K: return k.dot_q5_k;
    default: return nullptr;
  }
}

// Multi-token variant (vector activation scales), used for every n so results never depend on n.
Kernels::QDotV int_kernel_v(const Kernels& k, tensor::DType t) {
  switch (t) {
    case tensor::DType::Q4_0: return k.dot_q4_0v;
    case tensor::DType::Q4_1: return k.dot_q4_1v;
    case tensor::DType::Q8_0: return k.dot_q8_0v;
    case tensor::DType::Q5_0: return k.dot_q5_0v;
    case tensor::DType::Q5_1: return k.dot_q5_1v;
    case tensor::DType::Q2_K: return k.dot_q2_kv;
    case tensor::DType::Q3_K: return k.dot_q3_kv;
    case tensor::DType::Q4_K: return k.dot_q4_kv;
    case tensor::DType::Q5_K: return k.dot_q5_kv;
    case tensor::DType::Q6_K: return k.dot_q6_kv;
    case tensor::DType::Q8_0_LANES: return k.dot_q8_0_lanes;
    case tensor::DType::Q4_0_LANES: return k.dot_q4_0_lanes;
    case tensor::DType::Q4_1_LANES: return k.dot_q4_1_lanes;
    case tensor::DType::Q4_K_LANES: return k.dot_q4_k_lanes;
    case tensor::DType::Q6_K_LANES: return k.dot_q6_k_lanes;
    case tensor::DType::IQ4_NL_LANES: return k.dot_iq4_nl_lanes;
    case tensor::DType::IQ4_XS_LANES: return k.dot_iq4_xs_lanes;
    case tensor::DType::IQ4_NL: return k.dot_iq4_nlv;
    case tensor::DType::IQ4_XS: return k.dot_iq4_xsv;
    case tensor::DType::IQ2_XXS: return k.dot_iq2_xxsv;
    case tensor::DType::IQ2_XS: return k.dot_iq2_xsv;
    case tensor::DType::IQ2_S: return k.dot_iq2_sv;
    case tensor::DType::IQ3_XXS: return k.dot_iq3_xxsv;
    case tensor::DType::IQ3_S: return k.dot_iq3_sv;
    case tensor::DType::IQ1_S: return k.dot_iq1_sv;
    case tensor::DType::IQ1_M: return k.dot_iq1_mv;
    default: return nullptr;
  }
}

// Rows per parallel chunk: enough work to amortise scheduling, small enough to balance.
int64_t row_grain(const WeightView& w, int64_t n) {
  int64_t per_row = std::max<int64_t>(1, w.cols * n);
  return std::clamp<int64_t>(65536 / per_row, 4, 256);
}

}  // namespace

namespace {

// MLX rows of any width in whole 32-element blocks on the fast path; mlx_fast: of a width with
// per-block kernels too (4 and 8 bits; the others have lane kernels only, mlx_lane_kernel).
bool mlx_blocks(const WeightView& w, MatmulPath path) {
  return path == MatmulPath::Fast && is_mlx(w.dtype) && w.group_size % 32 == 0;
}
bool mlx_fast(const WeightView& w, MatmulPath path) { return mlx_blocks(w, path) && (w.bits == 4 || w.bits == 8); }

// n group values starting at index i, as f32 (the ISA's conversions: a scalar f16 one was ~20 % of
// an MLX 4-bit decode step's GEMV, bench/README.md "MLX scales").
void groups_f32(const void* p, tensor::DType dt, int64_t i, int64_t n, float* out, const Kernels& k) {
  switch (dt) {
    case tensor::DType::F32: std::memcpy(out, static_cast<const float*>(p) + i, n * sizeof(float)); break;
    case tensor::DType::F16: k.f16_to_f32(static_cast<const uint16_t*>(p) + i, out, n); break;
    default: k.bf16_to_f32(static_cast<const uint16_t*>(p) + i, out, n);
  }
}

// For activation rows t in [t0, t1) and each group g of group_size gs: Σ over the group's blocks of
// dx·Σx, the activation side of an MLX row's bias term (w = scale·q + bias); see Kernels::MlxDot.
void mlx_bias_sums(const tensor::ActQ8* xq, int64_t nb, int64_t t0, int64_t t1, int gs, float* out) {
  const int bpg = gs / tensor::kQK;
  const int64_t groups = nb / bpg;
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      float s = 0;
      for (int i = 0; i < bpg; ++i) {
        const tensor::ActQ8& a = xq[t * nb + g * bpg + i];
        s += a.d * static_cast<float>(a.sum);
      }
      out[t * groups + g] = s;
    }
}

// Both MXFP4 layouts (separate scales, or GGML's blocks in place): the same activations and results.
bool mxfp4_fast(const WeightView& w, MatmulPath path) {
  return path == MatmulPath::Fast && (w.dtype == tensor::DType::MXFP4 || w.dtype == tensor::DType::MXFP4_GGML);
}
// MXFP4 weights that take a lane kernel (Mxfp4DotV, or QDotV on GGML's blocks): for every n, like
// QDotV, so that a row's result never depends on the batch (the per-block kernels give other bits).
// GGML's blocks read the plain-order lanes (xl), the MXFP4 layout the nibble-order ones (xl4).
bool mxfp4_lanes(const WeightView& w, MatmulPath path, const Kernels& k) {
  if (!mxfp4_fast(w, path)) return false;
  return w.dtype == tensor::DType::MXFP4_GGML ? k.dot_mxfp4_ggmlv != nullptr : k.dot_mxfp4v != nullptr;
}

float* mlx_gsum_for(MatmulScratch& s, int gs) {
  for (auto& [g, v] : s.mlx_gsum)
    if (g == gs) return v.data();
  return nullptr;
}

// The MLX lane kernel (Kernels::MlxDotV) of w's bit width, if this ISA has one: it then runs for
// every n, like QDotV. 2-, 3-, 5- and 6-bit rows have no other integer kernel (without one, the
// dequantizing fallback).
Kernels::MlxDotV mlx_lane_kernel(const WeightView& w, MatmulPath path, const Kernels& k) {
  const int bpg = w.group_size / tensor::kQK;
  if (!mlx_blocks(w, path) || (bpg != 1 && bpg != 2 && bpg != 4)) return nullptr;
  if (w.dtype == tensor::DType::MLX_LANES) return w.bits == 4 ? k.dot_mlx4_lanes : k.dot_mlx8_lanes;
  switch (w.bits) {
    case 2: return k.dot_mlx2v;
    case 3: return k.dot_mlx3v;
    case 4: return k.dot_mlx4v;
    case 5: return k.dot_mlx5v;
    case 6: return k.dot_mlx6v;
    case 8: return k.dot_mlx8v;
    default: return nullptr;
  }
}
bool mlx_lanes(const WeightView& w, MatmulPath path, const Kernels& k) { return mlx_lane_kernel(w, path, k) != nullptr; }

// One matmul's activations in every form a kernel reads.
struct MatmulInputs {
  const float* x;                 // f32 rows
  const tensor::ActQ8* xq;        // int8 blocks
  const tensor::ActQ8* xq4;       // the same in nibble order (MLX 4-bit, MXFP4)
  ActLanes xl, xl4;               // xq / xq4 packed by pack_act_lanes (QDotV and MLX 8-bit / MLX 4-bit)
  ActLanes xlb;                   // xl's values biased to unsigned (Kernels::dot_iq_decodedv)
  PanelActs xp;                   // xq packed by pack_panel_acts (Kernels::Panel)
  int64_t n;                      // rows
};

// Row tiles as large as the lane kernels allow, balanced (n = 9: one tile of 9, n = 17: 9 + 8).
int64_t lane_tile(int64_t n) {
  constexpr int kMax = Kernels::kQDotVMaxNT;
  const int64_t tiles = (n + kMax - 1) / kMax;
  return (n + tiles - 1) / tiles;
}

// AMX panels (Kernels::Panel) pay once enough tokens share a panel's unpacking (bench/README.md:
// compute_bench's Gemm rows); below that the lane kernels run. Either gives the same bits.
constexpr int64_t kPanelMinTokens = 32;

// The GGUF formats whose blocks panel_amx.cpp unpacks (MLX rows: mlx_lanes). Q2_K, Q3_K, Q5_K and
// the IQ4 types have lane kernels but no panel: they stay on the lane kernel at every n.
bool has_panel(tensor::DType t) {
  switch (t) {
    case tensor::DType::Q4_0: case tensor::DType::Q4_1: case tensor::DType::Q5_0: case tensor::DType::Q5_1:
    case tensor::DType::Q8_0: case tensor::DType::Q4_K: case tensor::DType::Q6_K: case tensor::DType::Q8_0_LANES:
    case tensor::DType::Q4_0_LANES: case tensor::DType::Q4_1_LANES: case tensor::DType::Q4_K_LANES:
    case tensor::DType::Q6_K_LANES: return true;
    default: return false;
  }
}
bool use_panels(const WeightView& w, int64_t n, MatmulPath path, const Kernels& k) {
  if (!k.panel || n < kPanelMinTokens || path != MatmulPath::Fast) return false;
  return (int_kernel_v(k, w.dtype) != nullptr && has_panel(w.dtype)) ||
         (mlx_lanes(w, path, k) && (w.bits == 4 || w.bits == 8));  // the MLX widths panel_amx.cpp unpacks
}

// Rows [r0, r1) in panels of up to Kernels::kPanelRows.
void run_panels(const WeightView& w, int64_t r0, int64_t r1, const MatmulInputs& in, float* y, const Kernels& k) {
  constexpr int kRows = Kernels::kPanelRows;
  PanelRows p{w.dtype, nullptr, w.row_stride, 0};
  const bool mlx = is_mlx(w.dtype);
  const int64_t groups = mlx ? w.cols / w.group_size : 0;
  thread_local std::vector<float> sb;  // MLX: the panel rows' scales, then their biases, as f32
  if (mlx) {
    sb.resize(static_cast<size_t>(2 * kRows * groups));
    p.scales = sb.data(), p.biases = sb.data() + kRows * groups, p.sstride = groups, p.group_size = w.group_size;
    p.bits = w.bits;
  }
  for (int64_t r = r0; r < r1; r += kRows) {
    p.rows = static_cast<int>(std::min<int64_t>(kRows, r1 - r));
    p.w = static_cast<const uint8_t*>(w.data) + r * w.row_stride;
    for (int i = 0; mlx && i < p.rows; ++i) {
      groups_f32(w.scales, w.group_dtype, (r + i) * groups, groups, sb.data() + i * groups, k);
      groups_f32(w.biases, w.group_dtype, (r + i) * groups, groups, sb.data() + (kRows + i) * groups, k);
    }
    k.panel(p, in.xp, y + r, w.rows);
  }
}

}  // namespace

namespace {
// Whether row_prefetch asks for anything (set_row_prefetch, RAPID_ROW_PREFETCH=1): off unless asked.
std::atomic<bool> g_row_prefetch{[] {
  const char* e = std::getenv("RAPID_ROW_PREFETCH");
  return e && !std::strcmp(e, "1");
}()};
}  // namespace

void set_row_prefetch(bool on) { g_row_prefetch.store(on, std::memory_order_relaxed); }

namespace {
std::atomic<size_t> g_weight_bytes{0};
std::atomic<bool> g_prefetch_to_l2{false};
// The last-level cache's size (sysconf; 32 MiB where it says nothing).
size_t llc_bytes() {
  const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? static_cast<size_t>(l3) : size_t{32} << 20;
}
}  // namespace

// Over half the cache: the rest holds activations, the KV cache and, on a VM, other guests' lines
// (this Xeon's 480 MB L3 is the socket's: SmolLM2's 98 MB gained from T0, Qwen3.5-0.8B's 433 MB from T1).
void note_weight_bytes(size_t bytes) {
  const size_t total = g_weight_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  g_prefetch_to_l2.store(total > llc_bytes() / 2, std::memory_order_relaxed);
}

// Decode streams each weight row once; asking for the row ~4 KiB ahead is meant to keep more lines
// in flight than the hardware prefetcher does on one core. Off unless asked for (RAPID_ROW_PREFETCH=1,
// set_row_prefetch). From 8c8fd8b on, GCC had deleted it from the build (compute/prefetch.h says
// why), so every figure since was measured without it. Compiled in, it slows the AMD EPYC (Zen 4):
// compute_bench's prefetch_* rows (off and on in alternate calls) give off / on 0.47-0.88, and a
// 2-thread SmolLM2 Q4_1 decode ran 212-223 tok/s with it, 271-289 without (bench/README.md:
// "Prefetches the compiler deleted"). Sapphire Rapids measured a gain before that commit (Q4_0 LM
// head +12-15 % best of 5, medians within noise; Qwen3.5-0.8B-shape Q8_0 decode 9.0 -> 9.6
// tok/s): check there with the prefetch_* rows before turning it on for any machine.
// It covers every format a decode row loop streams (the K-quants, Q5_0 / Q5_1, the IQ4 types, MLX
// affine, both MXFP4 layouts; not dense float rows, nor the IQ1-IQ3 lattice types), and every
// stream of a row: the packed values and, where they are arrays of their own, the row's MLX scales
// and biases or MXFP4 scales; only the row's own bytes, not its stride (gpt-oss's interleaved gate /
// up views skip a row). T0, or T1 once the weights exceed half the last-level cache.
RowPrefetch row_prefetch(const WeightView& w) {
  constexpr size_t kAheadBytes = 4096;
  RowPrefetch p;
  if (!g_row_prefetch.load(std::memory_order_relaxed)) return p;
  switch (w.dtype) {
    case tensor::DType::Q4_0: case tensor::DType::Q4_1: case tensor::DType::Q8_0: case tensor::DType::Q2_K:
    case tensor::DType::Q3_K: case tensor::DType::Q4_K: case tensor::DType::Q5_K: case tensor::DType::Q6_K:
    case tensor::DType::Q5_0: case tensor::DType::Q5_1: case tensor::DType::Q8_0_LANES: case tensor::DType::Q4_0_LANES:
    case tensor::DType::Q4_1_LANES: case tensor::DType::Q4_K_LANES: case tensor::DType::Q6_K_LANES:
    case tensor::DType::MLX_AFFINE: case tensor::DType::MLX_LANES: case tensor::DType::MXFP4:
    case tensor::DType::MXFP4_GGML: case tensor::DType::IQ4_NL: case tensor::DType::IQ4_XS:
    case tensor::DType::IQ4_NL_LANES: case tensor::DType::IQ4_XS_LANES: break;
    default: return p;
  }
  auto add = [&](const void* b, size_t stride, size_t bytes) {
    p.base[p.streams] = static_cast<const uint8_t*>(b), p.stride[p.streams] = stride, p.bytes[p.streams++] = bytes;
  };
  const bool mlx = is_mlx(w.dtype);
  const size_t bytes = mlx ? w.row_stride : tensor::row_bytes(w.dtype, w.cols);
  add(w.data, w.row_stride, bytes);
  if (mlx) {
    const size_t gbytes = static_cast<size_t>(w.cols / w.group_size) * tensor::block_bytes(w.group_dtype);
    add(w.scales, gbytes, gbytes);
    add(w.biases, gbytes, gbytes);
  } else if (w.dtype == tensor::DType::MXFP4) {
    add(w.scales, w.scale_stride, static_cast<size_t>(w.cols / tensor::mxfp4::kBlock));
  }
  p.ahead = static_cast<int64_t>(std::max<size_t>(1, kAheadBytes / bytes));
  p.to_l2 = g_prefetch_to_l2.load(std::memory_order_relaxed);
  return p;
}

namespace {

// Rows [r0, r1) × n tokens in token tiles of `tile`: f(r, t, nt) computes row r for tokens
// [t, t + nt); block(b, e) runs before rows [b, e) start. The rows go in blocks of about
// kRowBlockBytes; with one tile (decode, small batches) they simply run in order. With several
// (prefill, long verifications) each block meets every token tile in turn: the block's weights stay in
// L2 after the first tile has read them from memory, and a tile's activations (tens of KB) in L1 /
// L2 across the block. Rows outermost would stream all n tokens' activations once per row, hundreds
// of KB at n = 512, from L3 (bench/README.md: "Prefill in row blocks"). The kernel calls and their
// arguments are the same in either order, so are the bits.
// (row_span_tiles: f(r, e, t, nt) takes rows [r, e), up to `span` of them, in one call.)
// The lane kernels' span (Kernels::Rows): a call per 576-wide SmolLM2 row was ~15 % of a decode step;
// decode's four-row passes (avx2_row_quad.h) set their tail activations up once a call, which at 8
// rows a call ate their gain (bench/README.md, "Decode rows four at a time").
constexpr int64_t kLaneRowSpan = 32;
template <class Block, class Span>
void row_span_tiles(int64_t r0, int64_t r1, int64_t n, int64_t tile, size_t row_bytes, const RowPrefetch& prefetch,
                    int64_t span, Block&& block, Span&& f) {
  constexpr size_t kRowBlockBytes = 128 * 1024;
  // One tile (decode) takes the same blocks: rows run in order either way, and a block's setup
  // (MLX: its rows' scales and biases as f32) then stays in L1 / L2 instead of being written for
  // all of a thread's rows (megabytes at an LM head) and read back.
  const int64_t rb = std::max<int64_t>(1, static_cast<int64_t>(kRowBlockBytes / row_bytes));
  for (int64_t b = r0; b < r1; b += rb) {
    const int64_t e = std::min(r1, b + rb);
    block(b, e);
    for (int64_t t = 0; t < n; t += tile) {
      const int nt = static_cast<int>(std::min(tile, n - t));
      for (int64_t r = b; r < e; r += span) {
        const int64_t end = std::min(e, r + span);
        if (t == 0)
          for (int64_t i = r; i < end; ++i) prefetch(i, r1);
        f(r, end, t, nt);
      }
    }
  }
}
template <class Block, class Row>
void row_tiles(int64_t r0, int64_t r1, int64_t n, int64_t tile, size_t row_bytes, const RowPrefetch& prefetch,
               Block&& block, Row&& f) {
  row_span_tiles(r0, r1, n, tile, row_bytes, prefetch, 1, block, [&](int64_t r, int64_t, int64_t t, int nt) { f(r, t, nt); });
}
constexpr auto kNoBlockSetup = [](int64_t, int64_t) {};

// The IQ1-IQ3 lattice types over several token tiles (prefill): their kernels decode each
// super-block per call, most of their cost, so rows are decoded once per row block instead
// (Kernels::decode_iq) and every tile dots the decoded rows. The same integer dots and float
// operations as the type's kernel, so the same bits.
bool lattice_predecode(const WeightView& w, int64_t n, const Kernels& k) {
  switch (w.dtype) {
    case tensor::DType::IQ2_XXS: case tensor::DType::IQ2_XS: case tensor::DType::IQ2_S: case tensor::DType::IQ3_XXS:
    case tensor::DType::IQ3_S: case tensor::DType::IQ1_S: case tensor::DType::IQ1_M:
      return k.decode_iq != nullptr && n > lane_tile(n);
    default: return false;
  }
}
void run_predecoded(const WeightView& w, int64_t r0, int64_t r1, const MatmulInputs& in, float* y, const Kernels& k) {
  const int64_t nb = w.cols / tensor::block_elems(w.dtype);
  const size_t drow = static_cast<size_t>(nb) * Kernels::kIqDecodedBytes;
  const auto* base = static_cast<const uint8_t*>(w.data);
  thread_local std::vector<uint8_t> buf;
  uint8_t* dec = nullptr;
  int64_t b0 = r0;
  auto decode = [&](int64_t b, int64_t e) {
    dec = aligned64(buf, static_cast<size_t>(e - b) * drow);
    k.decode_iq(w.dtype, {.w = base + b * w.row_stride, .stride = w.row_stride, .rows = e - b}, nb, dec);
    b0 = b;
  };
  // Blocks of about 128 KiB decoded (row_span_tiles' size): they stay in L2 across the tiles.
  row_span_tiles(r0, r1, in.n, lane_tile(in.n), drow, RowPrefetch{}, kLaneRowSpan, decode,
                 [&](int64_t r, int64_t e, int64_t t, int nt) {
                   const Kernels::Rows m{.w = dec + (r - b0) * drow, .stride = drow, .rows = e - r};
                   k.dot_iq_decodedv(m, in.xlb.at(t), nb, nt, y + t * w.rows + r, w.rows);
                 });
}

void run_rows(const WeightView& w, int64_t r0, int64_t r1, const MatmulInputs& in, float* y, Kernels::QDot qdot,
              Kernels::QDotV qv, const float* gsum, const Kernels& k, MatmulPath path) {
  if (use_panels(w, in.n, path, k)) return run_panels(w, r0, r1, in, y, k);
  const int64_t rows = w.rows, cols = w.cols, n = in.n;
  const float* x = in.x;
  const tensor::ActQ8 *xq = in.xq, *xq4 = in.xq4;
  const auto* base = static_cast<const uint8_t*>(w.data);
  if (mlx_fast(w, path) || mlx_lanes(w, path, k)) {
    const int64_t nb = cols / tensor::kQK, groups = cols / w.group_size;
    const tensor::ActQ8* xa = w.bits == 4 ? xq4 : xq;
    auto fn = w.bits == 4 ? k.dot_mlx4 : k.dot_mlx8;
    const Kernels::MlxDotV lanes = mlx_lane_kernel(w, path, k);
    if (!lanes && w.dtype == tensor::DType::MLX_LANES)  // only repacked where the kernel exists
      throw Error("matmul: MLX_LANES rows need this ISA's MLX lane kernel");
    const ActLanes& xl = w.bits == 4 ? in.xl4 : in.xl;
    const int64_t tile = lanes ? lane_tile(n) : 4;
    float tmp[Kernels::kQDotVMaxNT];
    const size_t gbytes = static_cast<size_t>(groups) * tensor::block_bytes(w.group_dtype);
    const auto *scales = static_cast<const uint8_t*>(w.scales), *biases = static_cast<const uint8_t*>(w.biases);
    if (lanes) {  // the lane kernels read the row's scales and biases as stored
      // A partial last lane group reads up to 7 entries past its row: the next rows', or, for the
      // tensor's last rows (those within 7 entries of its end), a zero-padded copy's (past the
      // tensor may be another's data, or unmapped).
      thread_local std::vector<uint8_t> last;
      const int64_t near_end = nb % 8 ? std::min<int64_t>(rows, (7 + groups - 1) / groups) : 0, first_padded = rows - near_end;
      const size_t pad_bytes = static_cast<size_t>(near_end) * gbytes, half = pad_bytes + 32;
      if (r1 > first_padded) {
        last.assign(2 * half, 0);
        std::memcpy(last.data(), scales + first_padded * gbytes, pad_bytes);
        std::memcpy(last.data() + half, biases + first_padded * gbytes, pad_bytes);
      }
      // Rows [a, z) in one call (Kernels::Rows), with the tensor's scales or the padded copy's.
      auto run = [&](int64_t a, int64_t z, int64_t t, int nt, bool padded) {
        if (a >= z) return;
        const uint8_t* s = padded ? last.data() + (a - first_padded) * gbytes : scales + a * gbytes;
        const uint8_t* b = padded ? last.data() + half + (a - first_padded) * gbytes : biases + a * gbytes;
        const Kernels::Rows m{.w = base + a * w.row_stride, .stride = w.row_stride, .rows = z - a, .scales = s,
                              .biases = b, .group_stride = gbytes, .group_dtype = w.group_dtype,
                              .group_size = w.group_size};
        lanes(m, xl.at(t), nb, nt, y + t * rows + a, rows);
      };
      row_span_tiles(r0, r1, n, tile, w.row_stride, row_prefetch(w), kLaneRowSpan, kNoBlockSetup,
                     [&](int64_t r, int64_t e, int64_t t, int nt) {
                       const int64_t split = std::clamp(first_padded, r, e);
                       run(r, split, t, nt, false);
                       run(split, e, t, nt, true);
                     });
      return;
    }
    // The per-block kernels take a block's rows' scales, then their biases, as f32 (contiguous over
    // the block's rows, so each is one conversion).
    thread_local std::vector<float> sb;
    int64_t b0 = r0, bn = 0;
    auto block = [&](int64_t b, int64_t e) {
      b0 = b, bn = groups * (e - b);
      sb.resize(static_cast<size_t>(2 * bn));
      groups_f32(w.scales, w.group_dtype, b * groups, bn, sb.data(), k);
      groups_f32(w.biases, w.group_dtype, b * groups, bn, sb.data() + bn, k);
    };
    row_tiles(r0, r1, n, tile, w.row_stride, row_prefetch(w), block, [&](int64_t r, int64_t t, int nt) {
      const float* s = sb.data() + groups * (r - b0);
      fn(base + r * w.row_stride, s, s + bn, w.group_size, xa + t * nb, nb, nb, nt, gsum + t * groups, tmp);
      for (int i = 0; i < nt; ++i) y[(t + i) * rows + r] = tmp[i];
    });
    return;
  }
  if (mxfp4_lanes(w, path, k)) {
    const int64_t nb = cols / tensor::kQK;
    const bool ggml = w.dtype == tensor::DType::MXFP4_GGML;
    const Kernels::QDotV lanes = ggml ? k.dot_mxfp4_ggmlv : k.dot_mxfp4v;
    const ActLanes& xl = ggml ? in.xl : in.xl4;
    row_span_tiles(r0, r1, n, lane_tile(n), w.row_stride, row_prefetch(w), kLaneRowSpan, kNoBlockSetup,
                   [&](int64_t r, int64_t e, int64_t t, int nt) {
                     Kernels::Rows m{.w = base + r * w.row_stride, .stride = w.row_stride, .rows = e - r};
                     if (!ggml) {  // the E8M0 bytes sit apart from the codes
                       m.scales = static_cast<const uint8_t*>(w.scales) + r * w.scale_stride;
                       m.group_stride = w.scale_stride;
                     }
                     lanes(m, xl.at(t), nb, nt, y + t * rows + r, rows);
                   });
    return;
  }
  if (mxfp4_fast(w, path)) {  // per block (no lane kernel at this ISA)
    const int64_t nb = cols / tensor::kQK;
    const auto* sc = static_cast<const uint8_t*>(w.scales);
    float tmp[4];
    row_tiles(r0, r1, n, 4, w.row_stride, row_prefetch(w), kNoBlockSetup, [&](int64_t r, int64_t t, int nt) {
      const uint8_t* row = base + r * w.row_stride;
      if (w.dtype == tensor::DType::MXFP4_GGML) k.dot_mxfp4_ggml(row, xq4 + t * nb, nb, nb, nt, tmp);
      else k.dot_mxfp4(row, sc + r * w.scale_stride, xq4 + t * nb, nb, nb, nt, tmp);
      for (int i = 0; i < nt; ++i) y[(t + i) * rows + r] = tmp[i];
    });
    return;
  }
  if (qv && lattice_predecode(w, n, k)) return run_predecoded(w, r0, r1, in, y, k);
  if (qv) {
    const int64_t nbw = cols / tensor::block_elems(w.dtype);
    // A tile's tokens share each unpacked weight group; a call takes a span of rows.
    row_span_tiles(r0, r1, n, lane_tile(n), w.row_stride, row_prefetch(w), kLaneRowSpan, kNoBlockSetup,
                   [&](int64_t r, int64_t e, int64_t t, int nt) {
                     const Kernels::Rows m{.w = base + r * w.row_stride, .stride = w.row_stride, .rows = e - r};
                     qv(m, in.xl.at(t), nbw, nt, y + t * rows + r, rows);
                   });
    return;
  }
  if (qdot) {
    const int64_t nb = cols / tensor::kQK;                    // activation blocks per row
    const int64_t nbw = cols / tensor::block_elems(w.dtype);  // weight blocks per row
    float tmp[4];
    // The weights stream from memory once per call whatever n is (row_tiles keeps a block in L2).
    row_tiles(r0, r1, n, 4, w.row_stride, row_prefetch(w), kNoBlockSetup, [&](int64_t r, int64_t t, int nt) {
      qdot(base + r * w.row_stride, xq + t * nb, nb, nbw, nt, tmp);
      for (int i = 0; i < nt; ++i) y[(t + i) * rows + r] = tmp[i];
    });
    return;
  }
  if (w.dtype == tensor::DType::F32 || w.dtype == tensor::DType::F16 || w.dtype == tensor::DType::BF16) {
    // In row blocks and token tiles (row_tiles): rows outermost read every token's f32 activations
    // once per row, 4 MB per row for a 512-token prefill at 2048 columns, from L3 (an MoE router
    // spent 5 % of a Qwen3-30B-A3B-shape prefill so). The same dots, so the same bits.
    row_tiles(r0, r1, n, 16, w.row_stride, RowPrefetch{}, kNoBlockSetup, [&](int64_t r, int64_t t0, int nt) {
      const void* row = base + r * w.row_stride;
      for (int64_t t = t0; t < t0 + nt; ++t) {
        const float* xt = x + t * cols;
        y[t * rows + r] = w.dtype == tensor::DType::F32 ? k.dot_f32(xt, static_cast<const float*>(row), cols)
                        : w.dtype == tensor::DType::F16 ? k.dot_f16(xt, static_cast<const uint16_t*>(row), cols)
                                                : k.dot_bf16(xt, static_cast<const uint16_t*>(row), cols);
      }
    });
    return;
  }
  // Generic: dequantize each weight row once, then f32 dots against every activation row.
  thread_local std::vector<float> buf;
  buf.resize(static_cast<size_t>(cols));
  for (int64_t r = r0; r < r1; ++r) {
    weight_row_f32(w, r, buf.data());
    for (int64_t t = 0; t < n; ++t) y[t * rows + r] = k.dot_f32(x + t * cols, buf.data(), cols);
  }
}

}  // namespace

void pack_act_lanes(const tensor::ActQ8* x, int64_t nb, int64_t n, int64_t t0, int64_t t1, int32_t* q, float* d,
                    float* ds, int32_t* sum, int32_t* hs, bool nibble_order) {
  const int64_t ng = (nb + 7) / 8;
  for (int64_t g = 0; g < ng; ++g)
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = g * n + t;
      for (int k = 0; k < 8; ++k) {
        const int64_t b = 8 * g + k;
        const tensor::ActQ8* a = b < nb ? &x[t * nb + b] : nullptr;
        for (int m = 0; m < 8; ++m) {
          int32_t v = 0;
          if (a && !nibble_order) {
            std::memcpy(&v, a->qs + 4 * m, 4);
          } else if (a) {  // bytes 4m..4m+3 of permute_act_for_mlx4's order: every other value from e
            const auto* e = reinterpret_cast<const uint8_t*>(a->qs) + 8 * (m & 3) + (m >> 2);
            v = static_cast<int32_t>(e[0] | e[2] << 8 | e[4] << 16 | static_cast<uint32_t>(e[6]) << 24);
          }
          q[i * 64 + 8 * m + k] = v;
        }
        d[i * 8 + k] = a ? a->d : 0.0f;
        ds[i * 8 + k] = a ? a->d * static_cast<float>(a->sum) : 0.0f;
        sum[i * 8 + k] = a ? a->sum : 0;
        if (hs) {
          int32_t h0 = 0;  // the first half's sum; the second's is the block's sum less it
          for (int e = 0; a && e < 16; ++e) h0 += a->qs[e];
          const int32_t h1 = a ? a->sum - h0 : 0;
          hs[i * 8 + k] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(h0)) |
                                               static_cast<uint32_t>(static_cast<uint16_t>(h1)) << 16);
        }
      }
    }
}

void pair_tail_lanes(const ActLanes& x, int64_t nb, int64_t n, int32_t* pq, float* pd, float* pds, int32_t* psum) {
  const int64_t g = nb / 8;  // the tail group
  for (int64_t t = 0; t < n; ++t)
    for (int h = 0; h < 2; ++h) {
      const int64_t u = t + h, i = g * x.ld + u;  // the pair's token h; past n: zeros
      for (int k = 0; k < 4; ++k) {
        for (int v = 0; v < 8; ++v) pq[64 * t + 8 * v + 4 * h + k] = u < n ? x.q[64 * i + 8 * v + k] : 0;
        pd[8 * t + 4 * h + k] = u < n ? x.d[8 * i + k] : 0.0f;
        pds[8 * t + 4 * h + k] = u < n ? x.ds[8 * i + k] : 0.0f;
        psum[8 * t + 4 * h + k] = u < n ? x.sum[8 * i + k] : 0;
      }
    }
}

void bias_act_lanes(const int32_t* q, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(static_cast<uint32_t>(q[i]) ^ 0x80808080u);
}

void pack_panel_acts(const tensor::ActQ8* x, int64_t nb, int64_t n, int64_t i0, int64_t i1, int8_t* q, float* d,
                     float* ds) {
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t j = i * nb + b;
      for (int64_t t = 0; t < 16; ++t) {
        const tensor::ActQ8* a = 16 * i + t < n ? &x[(16 * i + t) * nb + b] : nullptr;
        if (a) std::memcpy(q + j * 512 + t * 32, a->qs, 32);
        else std::memset(q + j * 512 + t * 32, 0, 32);
        d[j * 16 + t] = a ? a->d : 0.0f;
        ds[j * 16 + t] = a ? a->d * static_cast<float>(a->sum) : 0.0f;  // as pack_act_lanes
      }
    }
}

void matmul(const WeightView& w, const float* x, int64_t n, float* y, ThreadPool& pool,
            MatmulScratch& scratch, MatmulPath path) {
  MatmulOut o{&w, y};
  matmul_multi(&o, 1, x, n, pool, scratch, path);
}

namespace {

// Where prepare writes each form of the activations (null: no weight of the call reads it), sized
// for all n rows. Every form is per row (panels per 32 rows), so any split of the rows fills them.
struct Forms {
  tensor::ActQ8 *xq = nullptr, *xq4 = nullptr;  // int8 blocks; the same in nibble order
  int32_t *lq = nullptr, *lq4 = nullptr;         // xq packed by pack_act_lanes, plain / nibble order
  int32_t *lqb = nullptr;                        // lq's values biased to unsigned
  int32_t *lsum = nullptr, *lhs = nullptr;       // their sums; Q2_K's half sums
  float *ld = nullptr, *lds = nullptr;
  int32_t *tq = nullptr, *tq4 = nullptr, *tsum = nullptr;  // lq's / lq4's tail in token pairs
  float *td = nullptr, *tds = nullptr;
  int8_t* pq = nullptr;                          // xq packed by pack_panel_acts
  float *pd = nullptr, *pds = nullptr;
  std::pair<int, float*> gsum[8];                // MLX bias sums per group size
  int ngsum = 0;
};

// Rows [t0, t1) of every form f names, from x's rows of cols values (t0 a multiple of 32).
void fill_forms(const Forms& f, const float* x, int64_t cols, int64_t n, int64_t t0, int64_t t1, const Kernels& k) {
  const int64_t nb = cols / tensor::kQK, ng = (nb + 7) / 8;
  for (int64_t t = t0; t < t1; ++t) k.quantize_act(x + t * cols, cols, f.xq + t * nb);
  if (f.pq) pack_panel_acts(f.xq, nb, n, t0 / 16, (t1 + 31) / 32 * 2, f.pq, f.pd, f.pds);
  if (f.lq) pack_act_lanes(f.xq, nb, n, t0, t1, f.lq, f.ld, f.lds, f.lsum, f.lhs);
  for (int64_t g = 0; f.lqb && g < ng; ++g)
    bias_act_lanes(f.lq + (g * n + t0) * 64, (t1 - t0) * 64, f.lqb + (g * n + t0) * 64);
  for (int i = 0; i < f.ngsum; ++i) mlx_bias_sums(f.xq, nb, t0, t1, f.gsum[i].first, f.gsum[i].second);
  if (f.xq4) {
    std::copy(f.xq + t0 * nb, f.xq + t1 * nb, f.xq4 + t0 * nb);
    permute_act_for_mlx4(f.xq4 + t0 * nb, (t1 - t0) * nb);
  }
  // The same scales and sums as lq's (written again, to the same values); the values permuted as
  // they are packed, not through xq4, which only the per-block kernels read.
  if (f.lq4) pack_act_lanes(f.xq, nb, n, t0, t1, f.lq4, f.ld, f.lds, f.lsum, nullptr, true);
}

// Rows per chunk when prepare spreads over the pool: whole panel pairs, and enough work per chunk
// to pay for a parallel region (a decode step's few rows stay on the calling thread).
constexpr int64_t kFormRows = 32;

}  // namespace

namespace {

// One call's weights with their kernels, and the activations in every form they read.
struct Prepared {
  Kernels::QDot qd[8];
  Kernels::QDotV qv[8];
  const float* gsum[8] = {};
  MatmulInputs in;
  bool panels = false;
};

// Which forms a call's weights read (what each of their kernels needs).
struct Needs {
  bool q = false, q4 = false, v = false, v4 = false, biased = false, hs = false;
  int gs[8], ngs = 0;  // MLX group sizes whose bias sums a per-block kernel reads
};

Needs choose_kernels(const MatmulOut* outs, int count, int64_t n, MatmulPath path, const Kernels& k, Prepared& p) {
  const int64_t cols = outs[0].w->cols;
  Needs need;
  if (count > 8) throw Error("matmul_multi: at most 8 weights");
  for (int i = 0; i < count; ++i) {
    const WeightView& w = *outs[i].w;
    if (w.cols != cols) throw Error("matmul_multi: weights differ in input size");
    p.qd[i] = path == MatmulPath::Fast ? int_kernel(k, w.dtype) : nullptr;
    p.qv[i] = path == MatmulPath::Fast ? int_kernel_v(k, w.dtype) : nullptr;
    // A weight that takes panels reads only their packing: no lane packing or nibble-order copy.
    const bool pan = use_panels(w, n, path, k);
    p.panels |= pan;
    need.v |= p.qv[i] != nullptr && !pan;
    const bool mlx_v = mlx_lanes(w, path, k) && !pan;
    (w.bits == 4 ? need.v4 : need.v) |= mlx_v;
    const bool fp4 = mxfp4_fast(w, path), fp4_lanes = mxfp4_lanes(w, path, k);
    const bool ggml = w.dtype == tensor::DType::MXFP4_GGML;
    need.v |= fp4_lanes && ggml;
    need.v4 |= fp4_lanes && !ggml;
    need.q |= p.qd[i] != nullptr || p.qv[i] != nullptr || mlx_fast(w, path) || mlx_v || fp4;
    // Nibble-order blocks only for the per-block kernels (the lane ones read nibble-order lanes).
    need.q4 |= (mlx_fast(w, path) && w.bits == 4 && !pan && !mlx_v) || (fp4 && !fp4_lanes);
    // Only the lattice predecode reads biased values, only Q2_K half sums.
    need.biased |= p.qv[i] != nullptr && lattice_predecode(w, n, k);
    need.hs |= p.qv[i] != nullptr && w.dtype == tensor::DType::Q2_K;
    // The per-block MLX kernels read bias sums per group (the lane kernel takes the biases per block).
    const bool fresh_gs = std::find(need.gs, need.gs + need.ngs, w.group_size) == need.gs + need.ngs;
    if (mlx_fast(w, path) && !mlx_lanes(w, path, k) && fresh_gs) need.gs[need.ngs++] = w.group_size;
  }
  return need;
}

// v holds n elements; their start.
template <class T>
T* sized(std::vector<T>& v, size_t n) {
  v.resize(n);
  return v.data();
}

// Sizes the scratch for n rows of nb blocks in every form need names (kept across calls, so
// nothing is reallocated once the largest call has run).
Forms size_forms(const Needs& need, int64_t nb, int64_t n, bool panels, MatmulScratch& s) {
  Forms f;
  if (!need.q) return f;
  const size_t groups = static_cast<size_t>((nb + 7) / 8 * n), nn = static_cast<size_t>(n);
  f.xq = sized(s.xq, static_cast<size_t>(nb) * nn);
  if (panels) {
    const size_t tb = static_cast<size_t>((n + 31) / 32 * 2 * nb);  // (tile, block) pairs
    f.pq = aligned64(s.pq, tb * 512);
    f.pd = sized(s.pd, tb * 16);
    f.pds = sized(s.pds, tb * 16);
  }
  if (need.v || need.v4) {  // lanes' values aligned to a 64-byte line, as the kernels load 64 bytes
    f.ld = sized(s.ld, groups * 8);
    f.lds = sized(s.lds, groups * 8);
    f.lsum = sized(s.lsum, groups * 8);
  }
  if (need.v) f.lq = aligned64(s.lq, groups * 64);
  // Half sums (which the nibble order changes) only for the plain order.
  if (need.v && need.hs) f.lhs = sized(s.lhs, groups * 8);
  if (need.v && need.biased) f.lqb = aligned64(s.lqb, groups * 64);
  for (int i = 0; i < need.ngs; ++i) {
    auto it = std::find_if(s.mlx_gsum.begin(), s.mlx_gsum.end(), [&](auto& e) { return e.first == need.gs[i]; });
    if (it == s.mlx_gsum.end()) it = s.mlx_gsum.insert(it, {need.gs[i], {}});
    it->second.resize(static_cast<size_t>(n * (nb / (need.gs[i] / tensor::kQK))));
  }
  for (int i = 0; i < need.ngs; ++i)  // after every insert, which may move the entries
    f.gsum[f.ngsum++] = {need.gs[i], mlx_gsum_for(s, need.gs[i])};
  if (need.q4) f.xq4 = sized(s.xq_mlx4, static_cast<size_t>(nb) * nn);
  if (need.v4) f.lq4 = aligned64(s.lq4, groups * 64);
  if ((need.v || need.v4) && n >= 2 && pairs_tail(nb)) {  // the lane kernels' paired tails (both ISAs)
    if (need.v) f.tq = aligned64(s.tq, nn * 64);
    if (need.v4) f.tq4 = aligned64(s.tq4, nn * 64);
    f.td = sized(s.td, nn * 8);
    f.tds = sized(s.tds, nn * 8);
    f.tsum = sized(s.tsum, nn * 8);
  }
  return f;
}

// Quantizes and packs x once for all count weights, spread over the pool (when given) for many rows.
void prepare(const MatmulOut* outs, int count, const float* x, int64_t n, MatmulScratch& scratch, MatmulPath path,
             const Kernels& k, ThreadPool* pool, Prepared& p) {
  const int64_t cols = outs[0].w->cols, nb = cols / tensor::kQK;
  const Needs need = choose_kernels(outs, count, n, path, k, p);
  const Forms f = size_forms(need, nb, n, p.panels, scratch);
  if (f.xq) {
    auto fill = [&](int64_t t0, int64_t t1) { fill_forms(f, x, cols, n, t0, t1, k); };
    if (pool) pool->parallel_for(n, kFormRows, fill);
    else fill(0, n);
  }
  const ActLanes none{nullptr, nullptr, nullptr, nullptr, n};
  MatmulInputs& in = p.in;
  in = MatmulInputs{x, f.xq, f.xq4, none, none, none, {}, n};
  if (f.pq) in.xp = PanelActs{f.pq, f.pd, f.pds, nb, n};
  if (f.lq) in.xl = ActLanes{f.lq, f.ld, f.lds, f.lsum, n, f.lhs};
  if (f.lqb) in.xlb = ActLanes{f.lqb, f.ld, f.lds, f.lsum, n, f.lhs};
  if (f.lq4) in.xl4 = ActLanes{f.lq4, f.ld, f.lds, f.lsum, n, nullptr};
  // After every token is packed (an entry reads the next token's lanes).
  auto pair = [&](ActLanes& l, int32_t* tq) {
    pair_tail_lanes(l, nb, n, tq, f.td, f.tds, f.tsum);
    l.pq = tq, l.pd = f.td, l.pds = f.tds, l.psum = f.tsum;
  };
  if (f.tq) pair(in.xl, f.tq);
  if (f.tq4) pair(in.xl4, f.tq4);
  for (int i = 0; i < count; ++i)
    if (mlx_fast(*outs[i].w, path) && !mlx_lanes(*outs[i].w, path, k))
      p.gsum[i] = mlx_gsum_for(scratch, outs[i].w->group_size);
}

// Rows [r0, r1) of weight i of a prepared call.
void run_rows(const MatmulOut& o, int i, int64_t r0, int64_t r1, const Prepared& p, const Kernels& k, MatmulPath path) {
  run_rows(*o.w, r0, r1, p.in, o.y, p.qd[i], p.qv[i], p.gsum[i], k, path);
}

// Rows per chunk for a call (panels want whole 32-row panels per chunk).
int64_t call_grain(const WeightView& w, int64_t n, bool panels) {
  return panels ? std::max<int64_t>(64, row_grain(w, n)) : row_grain(w, n);
}

}  // namespace

void matmul_multi(const MatmulOut* outs, int count, const float* x, int64_t n, ThreadPool& pool,
                  MatmulScratch& scratch, MatmulPath path) {
  if (count <= 0) return;
  const Kernels& k = kernels();
  Prepared p;
  prepare(outs, count, x, n, scratch, path, k, &pool, p);
  int64_t start[9];
  start[0] = 0;
  for (int i = 0; i < count; ++i) start[i + 1] = start[i] + outs[i].w->rows;
  // One parallel region over the rows of all weights (fewer synchronisations per layer).
  pool.parallel_for(start[count], call_grain(*outs[0].w, n, p.panels), [&](int64_t b, int64_t e) {
    for (int i = 0; i < count && b < e; ++i) {
      int64_t lo = std::max(b, start[i]), hi = std::min(e, start[i + 1]);
      if (lo < hi) run_rows(outs[i], i, lo - start[i], hi - start[i], p, k, path);
    }
  });
}

void matmul_pair(const MatmulOut& a, const MatmulOut& b, const float* x, int64_t n, ThreadPool& pool,
                 MatmulScratch& scratch, const std::function<void(int64_t, int64_t)>& combine, MatmulPath path) {
  if (a.w->rows != b.w->rows) throw Error("matmul_pair: weights differ in output size");
  const MatmulGroup g{a, b, x, n};
  matmul_groups(&g, 1, pool, &scratch, [&](int, int64_t r0, int64_t r1) { combine(r0, r1); }, path);
}

namespace {

// Whether two weights take the same kernels and activation forms (so may share a Prepared).
bool same_format(const WeightView* a, const WeightView* b) {
  if (!a || !b) return a == b;
  return a->dtype == b->dtype && a->bits == b->bits && a->group_size == b->group_size && a->cols == b->cols;
}

}  // namespace

void matmul_groups(const MatmulGroup* groups, int count, ThreadPool& pool, MatmulScratch* scratch,
                   const std::function<void(int, int64_t, int64_t)>& combine, MatmulPath path) {
  if (count <= 0) return;
  const Kernels& k = kernels();
  // Kept per calling thread: no allocation per call (calls do not nest). Named by reference so the
  // workers read the caller's (a thread_local's name would be each worker's own).
  thread_local std::vector<Prepared> prep_kept;
  thread_local std::vector<int64_t> start_kept;
  std::vector<Prepared>& prep = prep_kept;
  std::vector<int64_t>& start = start_kept;
  prep.assign(static_cast<size_t>(count), Prepared{});
  start.assign(static_cast<size_t>(count + 1), 0);
  bool panels = false;
  for (int g = 0; g < count; ++g) {
    const MatmulGroup& G = groups[g];
    if (G.b.w && G.b.w->rows != G.a.w->rows) throw Error("matmul_groups: a group's weights differ in output size");
    int same = 0;  // an earlier group over the same input: reuse its quantization
    while (same < g && !(groups[same].x == G.x && groups[same].n == G.n && same_format(groups[same].a.w, G.a.w) &&
                         same_format(groups[same].b.w, G.b.w)))
      ++same;
    if (same < g) {
      prep[g] = prep[same];
    } else {
      const MatmulOut outs[2] = {G.a, G.b};
      prepare(outs, G.b.w ? 2 : 1, G.x, G.n, scratch[g], path, k, &pool, prep[g]);
    }
    panels |= prep[g].panels;
    start[g + 1] = start[g] + G.a.w->rows;
  }
  // One parallel region over the rows of every group (one synchronisation for all of them).
  pool.parallel_for(start[count], call_grain(*groups[0].a.w, groups[0].n, panels), [&](int64_t b, int64_t e) {
    for (int g = 0; g < count && b < e; ++g) {
      const int64_t lo = std::max(b, start[g]) - start[g], hi = std::min(e, start[g + 1]) - start[g];
      if (lo >= hi) continue;
      run_rows(groups[g].a, 0, lo, hi, prep[g], k, path);
      if (groups[g].b.w) run_rows(groups[g].b, 1, lo, hi, prep[g], k, path);
      if (combine) combine(g, lo, hi);
    }
  });
}

struct MatmulPrepared {
  MatmulOut outs[8];
  Prepared p;
  MatmulPath path;
};

MatmulPlan::MatmulPlan(const MatmulOut* outs, int count, const float* x, int64_t n, MatmulScratch& scratch,
                       MatmulPath path, ThreadPool* pool)
    : p_(std::make_unique<MatmulPrepared>()) {
  prepare(outs, count, x, n, scratch, path, kernels(), pool, p_->p);
  std::copy_n(outs, count, p_->outs);
  p_->path = path;
}

MatmulPlan::~MatmulPlan() = default;

void MatmulPlan::rows(int i, int64_t r0, int64_t r1) const {
  if (r0 < r1) run_rows(p_->outs[i], i, r0, r1, p_->p, kernels(), p_->path);
}

}  // namespace rapid::compute
