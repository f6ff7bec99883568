#include "tensor/quant_formats.h"

#include <string>

#include "common/error.h"
#include "tensor/mxfp4.h"

namespace rapid::tensor {

int64_t block_elems(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
    case DType::MXFP4_GGML: case DType::Q8_0_LANES: case DType::Q4_0_LANES: case DType::Q4_1_LANES:
    case DType::IQ4_NL: case DType::IQ4_NL_LANES:
      return kQK;
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
    case DType::Q8_K: case DType::Q4_K_LANES: case DType::Q6_K_LANES: case DType::IQ4_XS: case DType::IQ4_XS_LANES:
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: case DType::IQ1_M:
      return kQKK;
    case DType::MXFP4:
      return mxfp4::kBlock;
    default:
      return 1;
  }
}

size_t block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: case DType::BF16: return 2;
    case DType::Q4_0: case DType::Q4_0_LANES: return sizeof(BlockQ4_0);
    case DType::Q4_1: case DType::Q4_1_LANES: return sizeof(BlockQ4_1);
    case DType::Q5_0: return sizeof(BlockQ5_0);
    case DType::Q5_1: return sizeof(BlockQ5_1);
    case DType::Q8_0: case DType::Q8_0_LANES: return sizeof(BlockQ8_0);
    case DType::Q2_K: return sizeof(BlockQ2_K);
    case DType::Q3_K: return sizeof(BlockQ3_K);
    case DType::Q4_K: case DType::Q4_K_LANES: return sizeof(BlockQ4_K);
    case DType::Q5_K: return sizeof(BlockQ5_K);
    case DType::Q6_K: case DType::Q6_K_LANES: return sizeof(BlockQ6_K);
    case DType::Q8_K: return sizeof(BlockQ8_K);
    case DType::MXFP4: return mxfp4::kBlockBytes;  // the nibbles; the scale byte is in `scales`
    case DType::MXFP4_GGML: return sizeof(BlockMXFP4);
    case DType::IQ4_NL: case DType::IQ4_NL_LANES: return sizeof(BlockIQ4_NL);
    case DType::IQ4_XS: case DType::IQ4_XS_LANES: return sizeof(BlockIQ4_XS);
    case DType::IQ2_XXS: return sizeof(BlockIQ2_XXS);
    case DType::IQ2_XS: return sizeof(BlockIQ2_XS);
    case DType::IQ2_S: return sizeof(BlockIQ2_S);
    case DType::IQ3_XXS: return sizeof(BlockIQ3_XXS);
    case DType::IQ3_S: return sizeof(BlockIQ3_S);
    case DType::IQ1_S: return sizeof(BlockIQ1_S);
    case DType::IQ1_M: return sizeof(BlockIQ1_M);
    case DType::I32: case DType::U32: return 4;
    case DType::I8: case DType::U8: return 1;
    case DType::MLX_AFFINE: case DType::MLX_LANES: break;
  }
  throw Error("block_bytes: dtype has no fixed block size");
}

size_t row_bytes(DType t, int64_t cols) {
  int64_t be = block_elems(t);
  if (cols % be != 0)
    throw Error("row of " + std::to_string(cols) + " elements is not a multiple of the block size " +
                std::to_string(be));
  return static_cast<size_t>(cols / be) * block_bytes(t);
}

bool is_ggml_quant(DType t) { return block_elems(t) > 1 && t != DType::MXFP4; }

}  // namespace rapid::tensor
