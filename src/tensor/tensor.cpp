#include "tensor/tensor.h"

namespace rapid::tensor {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::Q4_0: return "Q4_0";
    case DType::Q4_1: return "Q4_1";
    case DType::Q5_0: return "Q5_0";
    case DType::Q5_1: return "Q5_1";
    case DType::Q8_0: return "Q8_0";
    case DType::Q2_K: return "Q2_K";
    case DType::Q3_K: return "Q3_K";
    case DType::Q4_K: return "Q4_K";
    case DType::Q5_K: return "Q5_K";
    case DType::Q6_K: return "Q6_K";
    case DType::Q8_K: return "Q8_K";
    case DType::MLX_AFFINE: return "MLX_AFFINE";
    case DType::MXFP4: return "MXFP4";
    case DType::MXFP4_GGML: return "MXFP4_GGML";
    case DType::Q8_0_LANES: return "Q8_0_LANES";
    case DType::Q4_0_LANES: return "Q4_0_LANES";
    case DType::Q4_1_LANES: return "Q4_1_LANES";
    case DType::Q4_K_LANES: return "Q4_K_LANES";
    case DType::Q6_K_LANES: return "Q6_K_LANES";
    case DType::IQ4_NL_LANES: return "IQ4_NL_LANES";
    case DType::IQ4_XS_LANES: return "IQ4_XS_LANES";
    case DType::MLX_LANES: return "MLX_LANES";
    case DType::I32: return "I32";
    case DType::U32: return "U32";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::IQ4_NL: return "IQ4_NL";
    case DType::IQ4_XS: return "IQ4_XS";
    case DType::IQ2_XXS: return "IQ2_XXS";
    case DType::IQ2_XS: return "IQ2_XS";
    case DType::IQ2_S: return "IQ2_S";
    case DType::IQ3_XXS: return "IQ3_XXS";
    case DType::IQ3_S: return "IQ3_S";
    case DType::IQ1_S: return "IQ1_S";
    case DType::IQ1_M: return "IQ1_M";
  }
  return "?";
}

}  // namespace rapid::tensor
