#include "tokenizer/gguf_vocab.h"

#include <cstring>

#include "common/error.h"
#include "common/mapped_file.h"

namespace rapid::tok {
namespace {

class Reader {
 public:
  Reader(const uint8_t* d, size_t n, const std::string& path) : d_(d), n_(n), path_(path) {}
  void need(size_t k) const {
    if (k > n_ - p_) fail("truncated at offset " + std::to_string(p_));
  }
  [[noreturn]] void fail(const std::string& why) const { throw FileError(path_, "bad GGUF: " + why); }
  template <class T> T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, d_ + p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::string str() {
    uint64_t len = pod<uint64_t>();
    need(len);
    std::string s(reinterpret_cast<const char*>(d_ + p_), len);
    p_ += len;
    return s;
  }
  std::string_view view() {
    uint64_t len = pod<uint64_t>();
    need(len);
    std::string_view s(reinterpret_cast<const char*>(d_ + p_), len);
    p_ += len;
    return s;
  }
  size_t remaining() const { return n_ - p_; }

 private:
  const uint8_t* d_;
  size_t n_, p_ = 0;
  const std::string& path_;
};

enum : uint32_t { U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 };

size_t scalar_size(uint32_t t) {
  switch (t) {
    case U8: case I8: case BOOL: return 1;
    case U16: case I16: return 2;
    case U32: case I32: case F32: return 4;
    case U64: case I64: case F64: return 8;
    case STR: return 8;  // at least the length field
    default: return 0;
  }
}

double read_number(Reader& r, uint32_t t) {
  switch (t) {
    case U8: return r.pod<uint8_t>();
    case I8: return r.pod<int8_t>();
    case U16: return r.pod<uint16_t>();
    case I16: return r.pod<int16_t>();
    case U32: return r.pod<uint32_t>();
    case I32: return r.pod<int32_t>();
    case F32: return r.pod<float>();
    case BOOL: return r.pod<uint8_t>() != 0;
    case U64: return static_cast<double>(r.pod<uint64_t>());
    case I64: return static_cast<double>(r.pod<int64_t>());
    case F64: return r.pod<double>();
  }
  r.fail("unknown value type " + std::to_string(t));
}

GgufValue read_value(Reader& r, uint32_t t, int depth) {
  GgufValue v;
  switch (t) {
    case STR: v.kind = GgufValue::String; v.s = r.str(); return v;
    case BOOL: v.kind = GgufValue::Bool; v.b = r.pod<uint8_t>() != 0; v.i = v.b; return v;
    case F32: v.kind = GgufValue::Float; v.f = r.pod<float>(); return v;
    case F64: v.kind = GgufValue::Float; v.f = r.pod<double>(); return v;
    case U64: v.kind = GgufValue::Int; v.i = static_cast<int64_t>(r.pod<uint64_t>()); return v;
    case ARR: {
      if (depth > 2) r.fail("arrays nested too deep");
      v.kind = GgufValue::Array;
      uint32_t et = r.pod<uint32_t>();
      uint64_t count = r.pod<uint64_t>();
      size_t es = scalar_size(et);
      if (et == ARR) {
        // Nested arrays are not used by tokenizer keys: skip their contents.
        for (uint64_t k = 0; k < count; ++k) {
          if (r.remaining() < 12) r.fail("truncated nested array");
          read_value(r, ARR, depth + 1);
        }
        return v;
      }
      if (es == 0) r.fail("unknown array element type " + std::to_string(et));
      if (count > r.remaining() / es) r.fail("array count " + std::to_string(count) + " exceeds file size");
      if (et == STR) {
        v.strs.reserve(count);
        for (uint64_t k = 0; k < count; ++k) v.strs.push_back(r.view());
      } else {
        v.nums.reserve(count);
        for (uint64_t k = 0; k < count; ++k) v.nums.push_back(read_number(r, et));
      }
      return v;
    }
    default:
      v.kind = GgufValue::Int;
      v.i = static_cast<int64_t>(read_number(r, t));
      return v;
  }
}
}  // namespace

GgufMetadata GgufMetadata::parse(const uint8_t* data, size_t size, const std::string& path) {
  Reader r(data, size, path);
  GgufMetadata m;
  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0) throw FileError(path, "not a GGUF file (bad magic)");
  r.pod<uint32_t>();
  m.version = r.pod<uint32_t>();
  if (m.version < 2 || m.version > 3) r.fail("unsupported version " + std::to_string(m.version));
  m.tensor_count = r.pod<uint64_t>();
  uint64_t kv_count = r.pod<uint64_t>();
  if (kv_count > r.remaining() / 12) r.fail("key count " + std::to_string(kv_count) + " exceeds file size");
  for (uint64_t k = 0; k < kv_count; ++k) {
    std::string key = r.str();
    uint32_t t = r.pod<uint32_t>();
    m.kv[key] = read_value(r, t, 0);
  }
  return m;
}

GgufMetadata GgufMetadata::read(const std::string& path) {
  auto f = std::make_shared<MappedFile>(path);
  GgufMetadata m = parse(f->data(), f->size(), path);
  m.backing = std::move(f);
  return m;
}

const GgufValue* GgufMetadata::get(const std::string& key) const {
  auto it = kv.find(key);
  return it == kv.end() ? nullptr : &it->second;
}
std::optional<std::string> GgufMetadata::get_string(const std::string& key) const {
  auto* v = get(key);
  if (!v || v->kind != GgufValue::String) return std::nullopt;
  return v->s;
}
std::optional<int64_t> GgufMetadata::get_int(const std::string& key) const {
  auto* v = get(key);
  if (!v || (v->kind != GgufValue::Int && v->kind != GgufValue::Bool)) return std::nullopt;
  return v->i;
}
std::optional<bool> GgufMetadata::get_bool(const std::string& key) const {
  auto* v = get(key);
  if (!v || (v->kind != GgufValue::Int && v->kind != GgufValue::Bool)) return std::nullopt;
  return v->i != 0;
}
const std::vector<std::string_view>* GgufMetadata::get_strings(const std::string& key) const {
  auto* v = get(key);
  return v && v->kind == GgufValue::Array ? &v->strs : nullptr;
}
const std::vector<double>* GgufMetadata::get_numbers(const std::string& key) const {
  auto* v = get(key);
  return v && v->kind == GgufValue::Array ? &v->nums : nullptr;
}

}  // namespace rapid::tok
