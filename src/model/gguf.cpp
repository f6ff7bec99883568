#include "model/gguf.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "tensor/quant_formats.h"

namespace rapid::model {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDepth = 4;             // nesting of arrays we accept

enum ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};

// Bounds-checked cursor over the mapping; every read names what it was reading on failure.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, size_t size) : path_(path), d_(data), n_(size) {}

  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, d_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(d_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }
  void skip_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    need(len, what);
    pos_ += size_t(len);
  }
  void need(uint64_t bytes, const char* what) const {
    if (bytes > n_ - pos_)
      throw FileError(path_, std::string("truncated while reading ") + what + " at offset " + std::to_string(pos_));
  }
  const uint8_t* read_bytes(uint64_t n) {
    need(n, "bytes");
    const uint8_t* p = d_ + pos_;
    pos_ += size_t(n);
    return p;
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }

 private:
  const std::string& path_;
  const uint8_t* d_;
  size_t n_, pos_ = 0;
};

size_t min_value_size(uint32_t type) {
  switch (type) {
    case U8: case I8: case BOOL: return 1;
    case U16: case I16: return 2;
    case U32: case I32: case F32: return 4;
    case U64: case I64: case F64: case STRING: return 8;
    case ARRAY: return 12;
    default: return 0;
  }
}

nlohmann::json read_value(Cursor& c, uint32_t type, const std::string& key, const std::string& path, int depth) {
  switch (type) {
    case U8: return c.read<uint8_t>("u8 value");
    case I8: return c.read<int8_t>("i8 value");
    case U16: return c.read<uint16_t>("u16 value");
    case I16: return c.read<int16_t>("i16 value");
    case U32: return c.read<uint32_t>("u32 value");
    case I32: return c.read<int32_t>("i32 value");
    case F32: return double(c.read<float>("f32 value"));
    case U64: return c.read<uint64_t>("u64 value");
    case I64: return c.read<int64_t>("i64 value");
    case F64: return c.read<double>("f64 value");
    case BOOL: {
      uint8_t b = c.read<uint8_t>("bool value");
      if (b > 1) throw FileError(path, "metadata '" + key + "': bool value " + std::to_string(b));
      return b != 0;
    }
    case STRING: return c.read_string("string value");
    case ARRAY: {
      if (depth >= kMaxDepth) throw FileError(path, "metadata '" + key + "': arrays nested too deeply");
      uint32_t et = c.read<uint32_t>("array element type");
      uint64_t count = c.read<uint64_t>("array length");
      size_t es = min_value_size(et);
      if (es == 0) throw FileError(path, "metadata '" + key + "': unknown array element type " + std::to_string(et));
      // Refuse lengths the rest of the file cannot hold before allocating anything.
      if (count > c.remaining() / es)
        throw FileError(path, "metadata '" + key + "': array of " + std::to_string(count) + " elements extends past end of file");
      nlohmann::json arr = nlohmann::json::array();
      arr.get_ref<nlohmann::json::array_t&>().reserve(size_t(count));
      for (uint64_t i = 0; i < count; ++i) arr.push_back(read_value(c, et, key, path, depth + 1));
      return arr;
    }
    default: throw FileError(path, "metadata '" + key + "': unknown value type " + std::to_string(type));
  }
}

// Walks over a tokenizer array, checking its bounds as read_value would, without building it.
GgufFile::ArraySpan skip_array(Cursor& c, const std::string& key, const std::string& path) {
  GgufFile::ArraySpan a;
  a.type = c.read<uint32_t>("array element type");
  a.count = c.read<uint64_t>("array length");
  a.offset = c.pos();
  size_t es = min_value_size(a.type);
  if (es == 0 || a.type == ARRAY)
    throw FileError(path, "metadata '" + key + "': unsupported array element type " + std::to_string(a.type));
  if (a.count > c.remaining() / es)
    throw FileError(path, "metadata '" + key + "': array of " + std::to_string(a.count) + " elements extends past end of file");
  if (a.type == STRING)
    for (uint64_t i = 0; i < a.count; ++i) c.skip_string("string value");
  else
    c.read_bytes(a.count * es);  // bounds-checked
  return a;
}

// "16 (IQ2_XXS)": the id and, where GGML names it, the name a user knows from the file's name.
std::string ggml_type_label(uint32_t id) {
  static const char* const kNames[] = {"F32", "F16", "Q4_0", "Q4_1", nullptr, nullptr, "Q5_0", "Q5_1", "Q8_0",
                                       "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS",
                                       "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",
                                       "I16", "I32", "I64", "F64", "IQ1_M", "BF16", nullptr, nullptr, nullptr,
                                       "TQ1_0", "TQ2_0", nullptr, nullptr, nullptr, "MXFP4", "NVFP4", "Q1_0"};
  const char* name = id < std::size(kNames) ? kNames[id] : nullptr;
  return std::to_string(id) + (name ? std::string(" (") + name + ")" : "");
}
}  // namespace

bool ggml_type_to_dtype(uint32_t id, tensor::DType& out) {
  switch (id) {
    case 0: out = tensor::DType::F32; return true;
    case 1: out = tensor::DType::F16; return true;
    case 2: out = tensor::DType::Q4_0; return true;
    case 3: out = tensor::DType::Q4_1; return true;
    case 6: out = tensor::DType::Q5_0; return true;
    case 7: out = tensor::DType::Q5_1; return true;
    case 8: out = tensor::DType::Q8_0; return true;
    case 10: out = tensor::DType::Q2_K; return true;
    case 11: out = tensor::DType::Q3_K; return true;
    case 12: out = tensor::DType::Q4_K; return true;
    case 13: out = tensor::DType::Q5_K; return true;
    case 14: out = tensor::DType::Q6_K; return true;
    case 15: out = tensor::DType::Q8_K; return true;
    case 16: out = tensor::DType::IQ2_XXS; return true;
    case 17: out = tensor::DType::IQ2_XS; return true;
    case 18: out = tensor::DType::IQ3_XXS; return true;
    case 19: out = tensor::DType::IQ1_S; return true;
    case 20: out = tensor::DType::IQ4_NL; return true;
    case 21: out = tensor::DType::IQ3_S; return true;
    case 22: out = tensor::DType::IQ2_S; return true;
    case 23: out = tensor::DType::IQ4_XS; return true;
    case 29: out = tensor::DType::IQ1_M; return true;
    case 24: out = tensor::DType::I8; return true;
    case 26: out = tensor::DType::I32; return true;
    case 30: out = tensor::DType::BF16; return true;
    case 39: out = tensor::DType::MXFP4_GGML; return true;  // read in place, as every other type
    default: return false;
  }
}

uint32_t dtype_to_ggml_type(tensor::DType t) {
  for (uint32_t id = 0; id <= 39; ++id) {
    tensor::DType d;
    if (ggml_type_to_dtype(id, d) && d == t) return id;
  }
  throw Error(std::string("GGUF cannot hold dtype ") + tensor::dtype_name(t));
}

const tensor::Tensor* GgufFile::find(const std::string& name) const {
  for (auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const nlohmann::json* GgufFile::get(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &*it;
}

int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const {
  auto* v = get(key);
  if (!v) return fallback;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_boolean()) return v->get<bool>();
  throw FileError(path, "metadata '" + key + "' is not an integer");
}

double GgufFile::get_float(const std::string& key, double fallback) const {
  auto* v = get(key);
  if (!v) return fallback;
  if (v->is_number()) return v->get<double>();
  throw FileError(path, "metadata '" + key + "' is not a number");
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  auto* v = get(key);
  if (!v) return fallback;
  if (v->is_string()) return v->get<std::string>();
  throw FileError(path, "metadata '" + key + "' is not a string");
}

void GgufFile::drop_header_pages() const {
  file->drop_pages(0, std::min<uint64_t>(data_offset, file->size()));
}

std::vector<std::string_view> GgufFile::string_array(const std::string& key) const {
  std::vector<std::string_view> out;
  for (auto& [k, a] : lazy_arrays) {
    if (k != key || a.type != STRING) continue;
    // Bounds were checked when the file was read.
    Cursor c(path, file->data() + a.offset, file->size() - a.offset);
    out.reserve(size_t(a.count));
    for (uint64_t i = 0; i < a.count; ++i) {
      uint64_t len = c.read<uint64_t>("string length");
      out.emplace_back(reinterpret_cast<const char*>(c.read_bytes(len)), size_t(len));
    }
  }
  return out;
}

std::vector<int64_t> GgufFile::int_array(const std::string& key) const {
  std::vector<int64_t> out;
  for (auto& [k, a] : lazy_arrays) {
    if (k != key) continue;
    const uint8_t* p = file->data() + a.offset;
    auto at = [&](auto zero, uint64_t i) {
      decltype(zero) v;
      std::memcpy(&v, p + i * sizeof v, sizeof v);
      return int64_t(v);
    };
    for (uint64_t i = 0; i < a.count; ++i) switch (a.type) {
        case I32: out.push_back(at(int32_t{}, i)); break;
        case U32: out.push_back(at(uint32_t{}, i)); break;
        case I64: out.push_back(at(int64_t{}, i)); break;
        case I8: out.push_back(at(int8_t{}, i)); break;
        case U8: out.push_back(at(uint8_t{}, i)); break;
        default: return {};
      }
  }
  return out;
}

GgufFile read_gguf(const std::string& path) {
  GgufFile g;
  g.path = path;
  g.file = std::make_shared<MappedFile>(path);
  Cursor c(path, g.file->data(), g.file->size());
  if (g.file->size() < 4 || c.read<uint32_t>("magic") != kMagic) throw FileError(path, "not a GGUF file (bad magic)");
  g.version = c.read<uint32_t>("version");
  if (g.version == 1) throw FileError(path, "GGUF version 1 is not supported (re-convert the model)");
  if (g.version != 2 && g.version != 3) {
    if ((g.version & 0xFFFF) == 0) throw FileError(path, "big-endian GGUF is not supported");
    throw FileError(path, "unsupported GGUF version " + std::to_string(g.version));
  }
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each KV needs >= 8+4+1 bytes and each tensor info >= 8+4+8+4+8.
  if (n_kv > c.remaining() / 13) throw FileError(path, "metadata count " + std::to_string(n_kv) + " exceeds file size");
  if (n_tensors > c.remaining() / 32) throw FileError(path, "tensor count " + std::to_string(n_tensors) + " exceeds file size");
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key");
    uint32_t type = c.read<uint32_t>("metadata value type");
    bool dup = g.metadata.contains(key);
    for (auto& [k, a] : g.lazy_arrays) dup |= k == key;
    if (dup) throw FileError(path, "duplicate metadata key '" + key + "'");
    if (type == ARRAY && key.rfind("tokenizer.ggml.", 0) == 0)
      g.lazy_arrays.emplace_back(key, skip_array(c, key, path));
    else
      g.metadata[key] = read_value(c, type, key, path, 0);
  }
  if (auto* a = g.get("general.alignment")) {
    if (!a->is_number_unsigned()) throw FileError(path, "general.alignment is not an unsigned integer");
    g.alignment = a->get<uint64_t>();
    if (g.alignment == 0 || (g.alignment & (g.alignment - 1)) || g.alignment > (1u << 20))
      throw FileError(path, "general.alignment " + std::to_string(g.alignment) + " is not a power of two");
  }
  struct Info {
    uint64_t offset;
    uint64_t nbytes;
  };
  std::vector<Info> infos;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    tensor::Tensor t;
    t.name = c.read_string("tensor name");
    auto bad = [&](const std::string& why) { return FileError(path, "tensor '" + t.name + "': " + why); };
    uint32_t nd = c.read<uint32_t>("tensor dims");
    if (nd == 0 || nd > 4) throw bad(std::to_string(nd) + " dimensions (1..4 supported)");
    std::vector<int64_t> ne(nd);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t v = c.read<uint64_t>("tensor dim");
      if (v == 0 || v > (1ull << 40) || numel > (1ull << 50) / v) throw bad("dimension " + std::to_string(v) + " is invalid");
      numel *= v;
      ne[d] = int64_t(v);
    }
    uint32_t type = c.read<uint32_t>("tensor type");
    if (!ggml_type_to_dtype(type, t.dtype)) throw bad("unsupported GGML type " + ggml_type_label(type));
    uint64_t off = c.read<uint64_t>("tensor offset");
    int64_t be = tensor::block_elems(t.dtype);
    if (ne[0] % be) throw bad("row of " + std::to_string(ne[0]) + " elements is not a whole number of " + tensor::dtype_name(t.dtype) + " blocks");
    for (int d = int(nd) - 1; d >= 0; --d) t.shape.push_back(ne[d]);
    uint64_t nbytes = numel / uint64_t(be) * block_bytes(t.dtype);
    if (off % g.alignment) throw bad("data offset " + std::to_string(off) + " is not aligned to " + std::to_string(g.alignment));
    for (auto& other : g.tensors)
      if (other.name == t.name) throw bad("duplicate tensor name");
    t.nbytes = size_t(nbytes);
    infos.push_back({off, nbytes});
    g.tensors.push_back(std::move(t));
  }
  uint64_t pos = c.pos();
  g.data_offset = (pos + g.alignment - 1) / g.alignment * g.alignment;
  uint64_t fsize = g.file->size();
  if (n_tensors && g.data_offset > fsize) throw FileError(path, "tensor data section starts past end of file");
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    auto& t = g.tensors[i];
    uint64_t avail = fsize - g.data_offset;
    if (infos[i].offset > avail || infos[i].nbytes > avail - infos[i].offset)
      throw FileError(path, "tensor '" + t.name + "' data [" + std::to_string(infos[i].offset) + ", +" +
                                std::to_string(infos[i].nbytes) + ") extends past end of file");
    t.data = g.file->data() + g.data_offset + infos[i].offset;
  }
  return g;
}

}  // namespace rapid::model
