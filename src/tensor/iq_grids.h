// The lattices of GGML's IQ1 / IQ2 / IQ3 formats. A block of those formats stores, per group of 8
// (IQ1, IQ2) or 4 (IQ3) weights, an index into one of these fixed tables of magnitudes; signs and
// scales are stored apart (tensor/quant_formats.h). The tables are part of the formats:
// iq_grids.cpp holds them packed as gguf-py does (scripts/make_iq_grids.py), grids() their values.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace rapid::tensor::iq {

// Packed rows: element j is index (row >> (b·j)) & (2^b − 1) into the format's value map, b = 2 for
// the 8-element rows, 3 for the 4-element ones (iq_grids.cpp names each table's map).
extern const uint16_t kIq2xxsPacked[256], kIq2xsPacked[512], kIq2sPacked[1024];
extern const uint16_t kIq3xxsPacked[256], kIq3sPacked[512];
extern const uint16_t kIq1sPacked[2048];

// Rows as values, byte j = element j: IQ2 magnitudes 8 / 25 / 43, IQ3_XXS 4..62, IQ3_S 1..15
// (odd), IQ1 int8 −1 / 0 / 1 (IQ1_S and IQ1_M share the table).
struct Grids {
  uint64_t iq2xxs[256], iq2xs[512], iq2s[1024], iq1s[2048];
  uint32_t iq3xxs[256], iq3s[512];
  // For each 7-bit sign group i, byte j = 0xff where signs_of_seven(i) makes element j negative.
  uint64_t sign_bytes[128];
};
const Grids& grids();  // expanded once, on first use

// IQ2_XXS, IQ2_XS and IQ3_XXS store 7 of every 8 sign bits: the eighth makes the number of minus
// signs even. Bit j set = element j negative.
inline uint8_t signs_of_seven(uint32_t seven) {
  return static_cast<uint8_t>(seven | (static_cast<uint32_t>(__builtin_parity(seven)) << 7));
}

// nb super-blocks of an IQ1 / IQ2 / IQ3 row (t one of IQ2_XXS ... IQ1_M) as 256·nb floats, with
// gguf-py's operations in its order, so the same floats.
void dequantize(DType t, const void* blocks, int64_t nb, float* y);

}  // namespace rapid::tensor::iq
