#include "tensor/mxfp4.h"

namespace rapid::tensor::mxfp4 {

void dequantize_row(const uint8_t* packed, const uint8_t* scales, int64_t cols, float* out) {
  for (int64_t b = 0; b < cols / kBlock; ++b) {
    const float half_scale = 0.5f * e8m0_to_f32(scales[b]);  // kTwiceE2M1 holds 2·value
    const uint8_t* q = packed + b * kBlockBytes;
    float* y = out + b * kBlock;
    for (int j = 0; j < kBlockBytes; ++j) {
      y[2 * j] = half_scale * kTwiceE2M1[q[j] & 0x0f];
      y[2 * j + 1] = half_scale * kTwiceE2M1[q[j] >> 4];
    }
  }
}

}  // namespace rapid::tensor::mxfp4
