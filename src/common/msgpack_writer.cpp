#include "common/msgpack_writer.h"

#include <cstring>

namespace rapid::msgpack {

void Writer::be(uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out_.push_back(char((v >> (8 * i)) & 0xff));
}

void Writer::header(uint32_t n, uint8_t fix, uint32_t fix_max, uint8_t wide) {
  if (n <= fix_max) {
    out_.push_back(char(fix | n));
  } else if (n <= 0xffff) {
    out_.push_back(char(wide));
    be(n, 2);
  } else {
    out_.push_back(char(wide + 1));
    be(n, 4);
  }
}

void Writer::uint(uint64_t v) {
  if (v <= 0x7f) {
    out_.push_back(char(v));
  } else if (v <= 0xff) {
    out_.push_back(char(0xcc));
    be(v, 1);
  } else if (v <= 0xffff) {
    out_.push_back(char(0xcd));
    be(v, 2);
  } else if (v <= 0xffffffffull) {
    out_.push_back(char(0xce));
    be(v, 4);
  } else {
    out_.push_back(char(0xcf));
    be(v, 8);
  }
}

void Writer::sint(int64_t v) {
  if (v >= 0) return uint(uint64_t(v));
  if (v >= -32) {
    out_.push_back(char(uint8_t(int8_t(v))));  // negative fixint: 111xxxxx
  } else if (v >= INT8_MIN) {
    out_.push_back(char(0xd0));
    be(uint64_t(v), 1);
  } else if (v >= INT16_MIN) {
    out_.push_back(char(0xd1));
    be(uint64_t(v), 2);
  } else if (v >= INT32_MIN) {
    out_.push_back(char(0xd2));
    be(uint64_t(v), 4);
  } else {
    out_.push_back(char(0xd3));
    be(uint64_t(v), 8);
  }
}

void Writer::float64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  out_.push_back(char(0xcb));
  be(bits, 8);
}

// str 8/16/32 and bin 8/16/32 use three consecutive type bytes starting at `c8`.
void Writer::sized(size_t n, uint8_t c8) {
  const int width = n <= 0xff ? 1 : n <= 0xffff ? 2 : 4;
  out_.push_back(char(c8 + (width == 1 ? 0 : width == 2 ? 1 : 2)));
  be(n, width);
}

void Writer::str(std::string_view s) {
  if (s.size() <= 31)
    out_.push_back(char(0xa0 | s.size()));
  else
    sized(s.size(), 0xd9);
  out_.append(s);
}

void Writer::bin(std::string_view b) {
  sized(b.size(), 0xc4);
  out_.append(b);
}

}  // namespace rapid::msgpack
