// A minimal MessagePack encoder (https://github.com/msgpack/msgpack/blob/master/spec.md): the
// smallest encoding of each value, as msgpack-python and msgspec produce it. Only what the KV-event
// stream needs: nil, bool, integers, float64, str, bin, arrays and maps by count.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rapid::msgpack {

class Writer {
 public:
  void nil() { out_.push_back(char(0xc0)); }
  void boolean(bool v) { out_.push_back(char(v ? 0xc3 : 0xc2)); }
  void uint(uint64_t v);
  void sint(int64_t v);
  void float64(double v);
  void str(std::string_view s);
  void bin(std::string_view b);
  void array(uint32_t n) { header(n, 0x90, 15, 0xdc); }
  void map(uint32_t n) { header(n, 0x80, 15, 0xde); }
  // map 16 even for n <= 15: msgspec sizes a struct's map header by its field count, not by the
  // fields it writes.
  void map16(uint16_t n) {
    out_.push_back(char(0xde));
    be(n, 2);
  }
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  // fix form (prefix | n) while n <= fix_max, else the 16- or 32-bit form starting at `wide`.
  void header(uint32_t n, uint8_t fix, uint32_t fix_max, uint8_t wide);
  void sized(size_t n, uint8_t c8);
  void be(uint64_t v, int bytes);
  std::string out_;
};

}  // namespace rapid::msgpack
