// The tensor module: fp16/bf16 conversions against the hardware's (F16C), the block-size table,
// and what dequantize_row refuses. Its dequantized values are checked against gguf-py and
// mlx.core goldens in model_loader_test (they need the loaders to read the golden files) and the
// compute kernels against it in compute_test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "tensor/dequantize.h"
#include "tensor/fp16.h"
#include "tensor/mlx_affine.h"
#include "tensor/quant_formats.h"

using namespace rapid;
using namespace rapid::tensor;

namespace {

// Hardware conversions (F16C) as the independent reference for the scalar ones.
__attribute__((target("f16c"))) float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t hw_f2h(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

Tensor view(DType t, std::vector<int64_t> shape, const std::vector<uint8_t>& bytes) {
  Tensor tt;
  tt.name = "blk.0.w";
  tt.dtype = t;
  tt.shape = std::move(shape);
  tt.data = bytes.data();
  tt.nbytes = bytes.size();
  return tt;
}

// The error dequantize_row throws, or "" if it does not.
std::string refusal(const Tensor& t, int64_t row) {
  std::vector<float> out(size_t(std::max<int64_t>(t.cols(), 1)));
  try {
    dequantize_row(t, row, out.data());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Fp16, HalfToFloatIsExactForAllHalves) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "needs F16C as the reference";
  for (uint32_t h = 0; h < 65536; ++h) {
    float ref = hw_h2f(static_cast<uint16_t>(h));
    float got = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(ref)) EXPECT_TRUE(std::isnan(got));
    else ASSERT_EQ(std::memcmp(&ref, &got, 4), 0) << h;
  }
}

TEST(Fp16, FloatToHalfRoundsLikeF16C) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "needs F16C as the reference";
  std::mt19937 rng(1);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    uint16_t ref = hw_f2h(f);
    ASSERT_EQ(f32_to_f16(f), ref) << f;
  }
}

// Block sizes as ggml-common.h lays the blocks out (bytes per 32 or 256 elements).
TEST(BlockTable, SizesOfEveryFormat) {
  const std::pair<DType, std::pair<int64_t, size_t>> want[] = {
      {DType::F32, {1, 4}},     {DType::F16, {1, 2}},     {DType::BF16, {1, 2}},    {DType::I32, {1, 4}},
      {DType::U32, {1, 4}},     {DType::I8, {1, 1}},      {DType::U8, {1, 1}},      {DType::Q4_0, {32, 18}},
      {DType::Q4_1, {32, 20}},  {DType::Q5_0, {32, 22}},  {DType::Q5_1, {32, 24}},  {DType::Q8_0, {32, 34}},
      {DType::Q2_K, {256, 84}}, {DType::Q3_K, {256, 110}}, {DType::Q4_K, {256, 144}}, {DType::Q5_K, {256, 176}},
      {DType::Q6_K, {256, 210}}, {DType::Q8_K, {256, 292}}};
  for (auto& [t, eb] : want) {
    EXPECT_EQ(block_elems(t), eb.first) << dtype_name(t);
    EXPECT_EQ(block_bytes(t), eb.second) << dtype_name(t);
    EXPECT_EQ(is_ggml_quant(t), eb.first > 1) << dtype_name(t);
  }
  EXPECT_EQ(row_bytes(DType::Q4_K, 512), 288u);
  EXPECT_THROW(row_bytes(DType::Q4_K, 320), Error);  // not whole super-blocks
  // MLX packing depends on each tensor's bits: no fixed block, asking is a bug.
  EXPECT_THROW(block_bytes(DType::MLX_AFFINE), Error);
  EXPECT_EQ(mlx::packed_row_bytes(64, 3), 24);
}

// Index-like tensors read as floats, whatever their byte offset in the file.
TEST(Dequantize, IntegerRowsAtAnyOffset) {
  std::vector<uint8_t> buf(1 + 2 * 3 * 4);
  const int32_t v[6] = {-7, 0, 123456, 5, -2147483647, 42};
  std::memcpy(buf.data() + 1, v, sizeof v);
  std::vector<float> out(3);
  dequantize_row_raw(DType::I32, buf.data() + 1 + 12, 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{5.0f, float(-2147483647), 42.0f}));
  const std::vector<uint8_t> bytes = {0, 1, 255, 128};
  std::vector<float> four(4);
  dequantize_row_raw(DType::I8, bytes.data(), 4, four.data());
  EXPECT_EQ(four, (std::vector<float>{0, 1, -1, -128}));
  dequantize_row_raw(DType::U8, bytes.data(), 4, four.data());
  EXPECT_EQ(four, (std::vector<float>{0, 1, 255, 128}));
}

// A corrupt or lying tensor is refused with its name, never read past its bytes.
TEST(Dequantize, RefusesRowsTheTensorDoesNotHold) {
  std::vector<uint8_t> q4(2 * 18);  // two Q4_0 blocks
  EXPECT_EQ(refusal(view(DType::Q4_0, {2, 32}, q4), 1), "");
  EXPECT_NE(refusal(view(DType::Q4_0, {2, 32}, q4), 2).find("out of range for 'blk.0.w'"), std::string::npos);
  EXPECT_NE(refusal(view(DType::Q4_0, {2, 32}, q4), -1).find("out of range"), std::string::npos);
  EXPECT_NE(refusal(view(DType::Q4_0, {3, 32}, q4), 0).find("fewer bytes"), std::string::npos);
  EXPECT_NE(refusal(view(DType::Q4_0, {1, 48}, q4), 0).find("whole number of blocks"), std::string::npos);
  Tensor m = view(DType::MLX_AFFINE, {2, 64}, std::vector<uint8_t>(2 * 32));
  std::vector<float> sb(4, 1.0f);
  m.bits = 4;
  m.group_size = 32;
  m.group_dtype = DType::F32;
  m.scales = m.biases = sb.data();
  EXPECT_EQ(refusal(m, 1), "");
  m.bits = 7;
  EXPECT_NE(refusal(m, 0).find("invalid MLX quantization"), std::string::npos);
  m.bits = 8;  // needs 64 bytes a row
  EXPECT_NE(refusal(m, 0).find("fewer bytes"), std::string::npos);
}
