#include "tensor/lane_layout.h"

#include <cstring>
#include <string>

#include "common/error.h"

namespace rapid::tensor {

namespace {

// A format's lane layout: group size in bytes, qs dwords per block, head bytes (the block's first
// bytes: d, or d and m), the byte mask xored into every quant, and where dword d of lane k goes.
template <class B>
struct Lanes;
template <>
struct Lanes<BlockQ8_0> {
  static constexpr int kGroup = 256, kDwords = 8, kHead = 2;
  static constexpr uint32_t kXor = 0x80808080u;
  static size_t at(int k, int d) { return 32 * d + 4 * k; }
};
struct NibbleLanes {
  static constexpr int kGroup = 128, kDwords = 4;
  static constexpr uint32_t kXor = 0;
  static size_t at(int k, int d) { return 64 * (d / 2) + 4 * (8 * (d % 2) + k); }
};
template <>
struct Lanes<BlockQ4_0> : NibbleLanes {
  static constexpr int kHead = 2;
};
template <>
struct Lanes<BlockQ4_1> : NibbleLanes {
  static constexpr int kHead = 4;
};
template <>
struct Lanes<BlockIQ4_NL> : NibbleLanes {
  static constexpr int kHead = 2;
};

// The regions of a row (lane_layout.h): the tail is its m blocks' heads, then their quants.
template <class B>
struct Regions {
  static constexpr size_t kQs = sizeof(B) - Lanes<B>::kHead;  // quant bytes of a block
  uint8_t *groups, *tail, *tail_qs, *heads;
  Regions(uint8_t* row, int64_t nb)
      : groups(row), tail(row + Lanes<B>::kGroup * (nb / kLaneGroupBlocks)),
        tail_qs(tail + Lanes<B>::kHead * (nb % kLaneGroupBlocks)),
        heads(tail + sizeof(B) * (nb % kLaneGroupBlocks)) {}
};

template <class B>
void repack(const B* src, int64_t nb, uint8_t* dst) {
  using L = Lanes<B>;
  const Regions<B> r(dst, nb);
  const int64_t full = nb / kLaneGroupBlocks * kLaneGroupBlocks;
  for (int64_t b = 0; b < full; ++b) {
    const auto* blk = reinterpret_cast<const uint8_t*>(&src[b]);
    uint8_t* g = r.groups + L::kGroup * (b / kLaneGroupBlocks);
    for (int d = 0; d < L::kDwords; ++d) {
      uint32_t v;
      std::memcpy(&v, blk + L::kHead + 4 * d, 4);
      v ^= L::kXor;
      std::memcpy(g + L::at(static_cast<int>(b % kLaneGroupBlocks), d), &v, 4);
    }
    std::memcpy(r.heads + L::kHead * b, blk, L::kHead);
  }
  for (int64_t b = full; b < nb; ++b) {
    const auto* blk = reinterpret_cast<const uint8_t*>(&src[b]);
    std::memcpy(r.tail + L::kHead * (b - full), blk, L::kHead);
    std::memcpy(r.tail_qs + r.kQs * (b - full), blk + L::kHead, r.kQs);
  }
}

template <class B>
B block_of(const uint8_t* row, int64_t nb, int64_t b) {
  using L = Lanes<B>;
  const Regions<B> r(const_cast<uint8_t*>(row), nb);
  B out;
  auto* o = reinterpret_cast<uint8_t*>(&out);
  const int64_t full = nb / kLaneGroupBlocks * kLaneGroupBlocks;
  if (b >= full) {
    std::memcpy(o, r.tail + L::kHead * (b - full), L::kHead);
    std::memcpy(o + L::kHead, r.tail_qs + r.kQs * (b - full), r.kQs);
    return out;
  }
  const uint8_t* g = r.groups + L::kGroup * (b / kLaneGroupBlocks);
  for (int d = 0; d < L::kDwords; ++d) {
    uint32_t v;
    std::memcpy(&v, g + L::at(static_cast<int>(b % kLaneGroupBlocks), d), 4);
    v ^= L::kXor;
    std::memcpy(o + L::kHead + 4 * d, &v, 4);
  }
  std::memcpy(o, r.heads + L::kHead * b, L::kHead);
  return out;
}

static_assert(offsetof(BlockQ8_0, qs) == 2 && offsetof(BlockQ4_0, qs) == 2 && offsetof(BlockQ4_1, qs) == 4,
              "the heads are the blocks' first bytes");

// Q4_K: the GGUF qs byte and nibble shift (0 / 4) of the value in byte i of lane L of pair j.
inline void q4_k_source(int j, int lane, int i, int& byte, int& shift) {
  const int k = lane % 8, e = lane / 8;
  byte = 4 * (8 * (k / 2) + 2 * j + e) + i;
  shift = 4 * (k % 2);
}

// Where each nibble of a super-block's 128 qs bytes comes from, both ways (a table: the repack and
// the AMX panels' rebuild run this per super-block, and computing q4_k_source per nibble made the
// load-time repack ~10 % of a Q4_K_M MoE model's load and prefill profile).
struct NibbleSource {
  uint8_t byte[2], shift[2];  // the low and the high nibble's source byte and its shift
};
struct Q4KTables {
  NibbleSource to_lanes[128], to_gguf[128];
  Q4KTables() {
    for (int j = 0; j < 4; ++j)
      for (int lane = 0; lane < 16; ++lane)
        for (int i = 0; i < 4; ++i) {
          int b, sh;
          q4_k_source(j, lane, i, b, sh);
          const int o = 64 * (j % 2) + 4 * lane + i;  // the lane layout's byte, nibble j / 2
          to_lanes[o].byte[j / 2] = static_cast<uint8_t>(b), to_lanes[o].shift[j / 2] = static_cast<uint8_t>(sh);
          to_gguf[b].byte[sh / 4] = static_cast<uint8_t>(o), to_gguf[b].shift[sh / 4] = static_cast<uint8_t>(4 * (j / 2));
        }
  }
};
const Q4KTables& q4k_tables() {
  static const Q4KTables t;
  return t;
}
// qs bytes rebuilt from the two nibble sources of each output byte.
void move_nibbles(const uint8_t* in, const NibbleSource* from, uint8_t* out) {
  for (int o = 0; o < 128; ++o)
    out[o] = static_cast<uint8_t>(((in[from[o].byte[0]] >> from[o].shift[0]) & 0x0f) |
                                  (((in[from[o].byte[1]] >> from[o].shift[1]) & 0x0f) << 4));
}

}  // namespace

void repack_q4_k_lanes(const BlockQ4_K* src, int64_t nsb, BlockQ4_K* dst) {
  const Q4KTables& t = q4k_tables();
  for (int64_t s = 0; s < nsb; ++s) {
    BlockQ4_K out = src[s];
    move_nibbles(src[s].qs, t.to_lanes, out.qs);
    dst[s] = out;
  }
}

namespace {
// IQ4_XS_LANES: qs dword d of sub-block k sits where Q4_0_LANES puts dword d of block k. b with
// its qs moved into that order (to_lanes) or back.
BlockIQ4_XS iq4_xs_moved(const BlockIQ4_XS& b, bool to_lanes) {
  BlockIQ4_XS out = b;
  for (int k = 0; k < kLaneGroupBlocks; ++k)
    for (int d = 0; d < NibbleLanes::kDwords; ++d) {
      const size_t plain = 16 * k + 4 * d, lanes = NibbleLanes::at(k, d);
      std::memcpy(out.qs + (to_lanes ? lanes : plain), b.qs + (to_lanes ? plain : lanes), 4);
    }
  return out;
}
}  // namespace

void repack_iq4_xs_lanes(const BlockIQ4_XS* src, int64_t nsb, BlockIQ4_XS* dst) {
  for (int64_t s = 0; s < nsb; ++s) dst[s] = iq4_xs_moved(src[s], true);
}
BlockIQ4_XS iq4_xs_lanes_block(const BlockIQ4_XS& lanes) { return iq4_xs_moved(lanes, false); }

BlockQ4_K q4_k_lanes_block(const BlockQ4_K& lanes) {
  BlockQ4_K out = lanes;
  move_nibbles(lanes.qs, q4k_tables().to_gguf, out.qs);
  return out;
}

namespace {

// Q6_K_LANES (lane_layout.h): the value in byte i of lane L = 8·e + k of pair j is element
// 8·j + 4·e + i of sub-block k. GGUF keeps sub-block k (k = 4·n + m) in half n: the low nibble (high
// for m >= 2) of ql[64·n + 32·(m & 1) + l] and bits 2·m of qh[32·n + l] for its element l. So the
// four values of a lane's dword are four consecutive GGUF bytes under one shift: the layouts convert
// a dword at a time (the load-time repack of a 255 MB LM head).
constexpr uint32_t kNibbles = 0x0f0f0f0fu, kCrumbs = 0x03030303u;
inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// f(ql_gguf, qh_gguf, ql_lanes, qh_lanes, nibble shift, crumb shift, j): byte offsets of one dword
// of values in each layout, for every (k, e, j).
template <class F>
void q6_k_dwords(F f) {
  for (int k = 0; k < 8; ++k) {
    const int n = k / 4, m = k % 4;
    for (int e = 0; e < 2; ++e)
      for (int j = 0; j < 4; ++j) {
        const int l = 8 * j + 4 * e, lane = 8 * e + k;
        f(64 * n + 32 * (m & 1) + l, 32 * n + l, 64 * (j % 2) + 4 * lane, 4 * lane, 4 * (m / 2), 2 * m, j);
      }
  }
}

}  // namespace

void repack_q6_k_lanes(const BlockQ6_K* src, int64_t nsb, BlockQ6_K* dst) {
  for (int64_t s = 0; s < nsb; ++s) {
    const BlockQ6_K& in = src[s];
    uint32_t ql[32] = {}, qh[16] = {};
    q6_k_dwords([&](int gl, int gh, int ol, int oh, int ns, int cs, int j) {
      ql[ol / 4] |= ((load32(in.ql + gl) >> ns) & kNibbles) << (4 * (j / 2));
      qh[oh / 4] |= ((load32(in.qh + gh) >> cs) & kCrumbs) << (2 * j);
    });
    BlockQ6_K out = in;
    std::memcpy(out.ql, ql, sizeof ql);
    std::memcpy(out.qh, qh, sizeof qh);
    dst[s] = out;
  }
}

BlockQ6_K q6_k_lanes_block(const BlockQ6_K& lanes) {
  uint32_t ql[32] = {}, qh[16] = {};
  q6_k_dwords([&](int gl, int gh, int ol, int oh, int ns, int cs, int j) {
    ql[gl / 4] |= ((load32(lanes.ql + ol) >> (4 * (j / 2))) & kNibbles) << ns;
    qh[gh / 4] |= ((load32(lanes.qh + oh) >> (2 * j)) & kCrumbs) << cs;
  });
  BlockQ6_K out = lanes;
  std::memcpy(out.ql, ql, sizeof ql);
  std::memcpy(out.qh, qh, sizeof qh);
  return out;
}

// MLX_LANES keeps dword d of block k where the Q4 lane layouts keep theirs (NibbleLanes::at):
// 32·d + 4·k, with bits dwords a block (4 or 8) and a group of 32·bits bytes.
void repack_mlx_lanes(int bits, const uint8_t* src, int64_t nb, uint8_t* dst) {
  const int64_t groups = nb / kLaneGroupBlocks;
  const size_t group = 32 * static_cast<size_t>(bits), block = 4 * static_cast<size_t>(bits);
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t in[256];
    std::memcpy(in, src + group * g, group);
    for (int k = 0; k < kLaneGroupBlocks; ++k)
      for (int d = 0; d < bits; ++d) std::memcpy(dst + group * g + NibbleLanes::at(k, d), in + block * k + 4 * d, 4);
  }
  if (dst != src) std::memcpy(dst + group * groups, src + group * groups, block * static_cast<size_t>(nb - 8 * groups));
}

void mlx_lanes_block(int bits, const uint8_t* row, int64_t nb, int64_t b, uint8_t* out) {
  const size_t block = 4 * static_cast<size_t>(bits);
  if (b >= nb / kLaneGroupBlocks * kLaneGroupBlocks) {
    std::memcpy(out, row + block * b, block);
    return;
  }
  const uint8_t* g = row + 8 * block * (b / kLaneGroupBlocks);
  for (int d = 0; d < bits; ++d) std::memcpy(out + 4 * d, g + NibbleLanes::at(static_cast<int>(b % kLaneGroupBlocks), d), 4);
}

void mlx_lanes_row(int bits, const uint8_t* row, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b) mlx_lanes_block(bits, row, nb, b, out + 4 * bits * b);
}

bool is_lane_layout(DType t) {
  return t == DType::Q8_0_LANES || t == DType::Q4_0_LANES || t == DType::Q4_1_LANES || t == DType::Q4_K_LANES ||
         t == DType::Q6_K_LANES || t == DType::MLX_LANES || t == DType::IQ4_NL_LANES || t == DType::IQ4_XS_LANES;
}

DType lane_layout_of(DType t) {
  switch (t) {
    case DType::Q8_0: return DType::Q8_0_LANES;
    case DType::Q4_0: return DType::Q4_0_LANES;
    case DType::Q4_1: return DType::Q4_1_LANES;
    case DType::Q4_K: return DType::Q4_K_LANES;
    case DType::Q6_K: return DType::Q6_K_LANES;
    case DType::IQ4_NL: return DType::IQ4_NL_LANES;
    case DType::IQ4_XS: return DType::IQ4_XS_LANES;
    default: return t;
  }
}

void repack_lanes(DType from, const void* src, int64_t cols, void* dst) {
  auto* d = static_cast<uint8_t*>(dst);
  switch (from) {
    case DType::Q8_0: return repack_q8_0_lanes(static_cast<const BlockQ8_0*>(src), cols / kQK, d);
    case DType::Q4_0: return repack_q4_0_lanes(static_cast<const BlockQ4_0*>(src), cols / kQK, d);
    case DType::Q4_1: return repack_q4_1_lanes(static_cast<const BlockQ4_1*>(src), cols / kQK, d);
    case DType::IQ4_NL: return repack(static_cast<const BlockIQ4_NL*>(src), cols / kQK, d);
    case DType::Q4_K:
      return repack_q4_k_lanes(static_cast<const BlockQ4_K*>(src), cols / kQKK, static_cast<BlockQ4_K*>(dst));
    case DType::Q6_K:
      return repack_q6_k_lanes(static_cast<const BlockQ6_K*>(src), cols / kQKK, static_cast<BlockQ6_K*>(dst));
    case DType::IQ4_XS:
      return repack_iq4_xs_lanes(static_cast<const BlockIQ4_XS*>(src), cols / kQKK, static_cast<BlockIQ4_XS*>(dst));
    default: throw Error(std::string("repack_lanes: ") + dtype_name(from) + " has no lane layout");
  }
}

bool lanes_fit(int64_t cols) { return cols > 0 && cols % kQK == 0 && cols / kQK >= kLaneGroupBlocks; }

void repack_q8_0_lanes(const BlockQ8_0* src, int64_t nb, uint8_t* dst) { repack(src, nb, dst); }
void repack_q4_0_lanes(const BlockQ4_0* src, int64_t nb, uint8_t* dst) { repack(src, nb, dst); }
void repack_q4_1_lanes(const BlockQ4_1* src, int64_t nb, uint8_t* dst) { repack(src, nb, dst); }
BlockQ8_0 q8_0_lanes_block(const uint8_t* row, int64_t nb, int64_t b) { return block_of<BlockQ8_0>(row, nb, b); }
BlockQ4_0 q4_0_lanes_block(const uint8_t* row, int64_t nb, int64_t b) { return block_of<BlockQ4_0>(row, nb, b); }
BlockQ4_1 q4_1_lanes_block(const uint8_t* row, int64_t nb, int64_t b) { return block_of<BlockQ4_1>(row, nb, b); }
BlockIQ4_NL iq4_nl_lanes_block(const uint8_t* row, int64_t nb, int64_t b) { return block_of<BlockIQ4_NL>(row, nb, b); }

}  // namespace rapid::tensor
