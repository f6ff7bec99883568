// A view of one weight tensor as stored on disk (mmapped, never copied unless converted).
// Shapes follow the HF/PyTorch convention: a Linear weight is [out_features, in_features],
// rows contiguous; quantized formats quantize along the row (in_features) in blocks/groups.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rapid::tensor {

enum class DType : uint8_t {
  F32, F16, BF16,
  // GGML block formats (block layout exactly as ggml's).
  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
  // MLX affine quantization: uint32-packed `bits`-bit values, per-group f16/bf16/f32 scale and bias.
  MLX_AFFINE,
  // MXFP4 (tensor/mxfp4.h): 16 bytes of E2M1 nibbles per 32 elements in `data`, one E8M0 byte
  // per 32 elements in `scales` (shape [rows, cols/32]); bits 4, group_size 32, no biases.
  MXFP4,
  // GGML's MXFP4 (GGUF type 39, the released gpt-oss GGUFs' expert type), read in place from the
  // file: 17-byte blocks (tensor::BlockMXFP4: the E8M0 byte, then Q4_0's nibble order), no scales
  // array. The same values as MXFP4, and the same results from every kernel (compute/kernels.h).
  MXFP4_GGML,
  // Q8_0 / Q4_0 / Q4_1 / Q4_K / Q6_K repacked at load time for the lane kernels
  // (tensor/lane_layout.h): the same values and row size, quants in lane order. Never in a file.
  Q8_0_LANES, Q4_0_LANES, Q4_1_LANES, Q4_K_LANES, Q6_K_LANES,
  // MLX affine 4- or 8-bit rows (MLX_AFFINE's fields) whose full 8-block groups hold their bytes
  // in lane order (tensor/lane_layout.h); the same bytes per row, scales and biases apart as
  // MLX_AFFINE's. Never in a file.
  MLX_LANES,
  I32, U32, I8, U8,
  // GGML's non-linear 4-bit formats (tensor::BlockIQ4_NL / BlockIQ4_XS): each nibble indexes a
  // fixed table of 16 int8 values (kIq4Values); IQ4_NL has Q4_0's 32-element blocks with an f16
  // scale, IQ4_XS 256-element super-blocks of eight 32-element sub-blocks with 6-bit scales.
  IQ4_NL, IQ4_XS,
  // GGML's lattice formats (tensor::BlockIQ2_XXS ... BlockIQ1_M, tensor/iq_grids.h): 256-element
  // super-blocks whose groups of 8 or 4 weights index a fixed table of magnitudes.
  IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M,
  // IQ4_NL repacked at load time as Q4_0_LANES (its blocks are Q4_0's in layout); IQ4_XS with each
  // super-block's 128 qs bytes (Q4_0's 8 blocks) in a Q4_0_LANES group's order. Never in a file.
  IQ4_NL_LANES, IQ4_XS_LANES,
};

const char* dtype_name(DType t);

struct Tensor {
  std::string name;            // HF naming, e.g. "model.layers.0.self_attn.q_proj.weight"
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // logical shape (unpacked element counts), row-major
  const void* data = nullptr;  // raw bytes in the file mapping (or owned buffer)
  size_t nbytes = 0;

  // MLX_AFFINE (and MXFP4, see above): bits in {2,3,4,5,6,8}, group_size in {32,64,128}; scales/biases have shape
  // [rows, cols/group_size] in `group_dtype` (F16/BF16/F32).
  int bits = 0;
  int group_size = 0;
  DType group_dtype = DType::F16;
  const void* scales = nullptr;
  const void* biases = nullptr;

  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  int64_t rows() const { return shape.size() >= 2 ? numel() / shape.back() : 1; }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
};

}  // namespace rapid::tensor
