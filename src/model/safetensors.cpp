#include "model/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tensor/quant_formats.h"

namespace rapid::model {
namespace {

bool parse_dtype(const std::string& s, tensor::DType& t) {
  static const std::pair<const char*, tensor::DType> table[] = {
      {"F32", tensor::DType::F32}, {"F16", tensor::DType::F16}, {"BF16", tensor::DType::BF16}, {"I32", tensor::DType::I32},
      {"U32", tensor::DType::U32}, {"I8", tensor::DType::I8},   {"U8", tensor::DType::U8}};
  for (auto& [n, d] : table)
    if (s == n) {
      t = d;
      return true;
    }
  return false;
}

// Largest header we accept: real headers are < 10 MB even for thousands of tensors.
constexpr uint64_t kMaxHeader = 100ull << 20;

}  // namespace

const char* safetensors_dtype_name(tensor::DType t) {
  switch (t) {
    case tensor::DType::F32: return "F32";
    case tensor::DType::F16: return "F16";
    case tensor::DType::BF16: return "BF16";
    case tensor::DType::I32: return "I32";
    case tensor::DType::U32: return "U32";
    case tensor::DType::I8: return "I8";
    case tensor::DType::U8: return "U8";
    default: throw Error(std::string("safetensors cannot store dtype ") + tensor::dtype_name(t));
  }
}

SafetensorsFile read_safetensors(const std::string& path) {
  SafetensorsFile out;
  out.file = std::make_shared<MappedFile>(path);
  const MappedFile& f = *out.file;
  if (f.size() < 8) throw FileError(path, "too small for a safetensors header (" + std::to_string(f.size()) + " bytes)");
  uint64_t n;
  std::memcpy(&n, f.data(), 8);
  if (n > kMaxHeader) throw FileError(path, "header length " + std::to_string(n) + " is implausibly large");
  if (n > f.size() - 8)
    throw FileError(path, "header length " + std::to_string(n) + " extends past end of file (" +
                              std::to_string(f.size()) + " bytes)");
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(f.data() + 8, f.data() + 8 + n);
  } catch (const std::exception& e) {
    throw FileError(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!h.is_object()) throw FileError(path, "header is not a JSON object");
  const uint8_t* base = f.data() + 8 + n;
  const uint64_t data_size = f.size() - 8 - n;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto& [name, e] : h.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) throw FileError(path, "__metadata__ is not an object");
      for (auto& [k, v] : e.items())
        if (v.is_string()) out.metadata[k] = v.get<std::string>();
      continue;
    }
    auto bad = [&](const std::string& why) { return FileError(path, "tensor '" + name + "': " + why); };
    if (!e.is_object()) throw bad("entry is not an object");
    if (!e.contains("dtype") || !e["dtype"].is_string()) throw bad("missing dtype");
    if (!e.contains("shape") || !e["shape"].is_array()) throw bad("missing shape");
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      throw bad("missing data_offsets");
    tensor::Tensor t;
    t.name = name;
    std::string ds = e["dtype"].get<std::string>();
    if (!parse_dtype(ds, t.dtype)) throw bad("unsupported dtype " + ds);
    uint64_t numel = 1;
    for (auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) throw bad("shape has a non-integer or negative dimension");
      uint64_t v = d.get<uint64_t>();
      if (v > (1ull << 40) || (v && numel > (1ull << 62) / v)) throw bad("shape is implausibly large");
      numel *= v;
      t.shape.push_back(int64_t(v));
    }
    auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) throw bad("data_offsets are not non-negative integers");
    uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en) throw bad("data_offsets begin > end");
    if (en > data_size)
      throw bad("data [" + std::to_string(b) + ", " + std::to_string(en) + ") extends past end of file (data section is " +
                std::to_string(data_size) + " bytes)");
    uint64_t want = numel * block_bytes(t.dtype);
    if (en - b != want)
      throw bad("has " + std::to_string(en - b) + " bytes but dtype " + ds + " and its shape need " + std::to_string(want));
    t.data = base + b;
    t.nbytes = size_t(en - b);
    ranges.push_back({b, en});
    out.tensors.push_back(std::move(t));
  }
  // Overlapping tensors mean a corrupted or hostile header.
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw FileError(path, "tensor data ranges overlap");
  return out;
}

size_t write_safetensors_streamed(const std::string& path, std::vector<SafetensorsPlanned> entries,
                                  const std::map<std::string, std::string>& metadata) {
  std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.name < b.name; });
  nlohmann::ordered_json h;
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  std::vector<uint64_t> sizes;
  for (auto& e : entries) {
    uint64_t numel = 1;
    for (auto d : e.shape) numel *= uint64_t(d);
    uint64_t n = numel * block_bytes(e.dtype);
    h[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {off, off + n}}};
    sizes.push_back(n);
    off += n;
  }
  std::string hs = h.dump();
  while ((hs.size() + 8) % 8) hs.push_back(' ');  // keeps tensor data 8-byte aligned
  std::string tmp = path + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    if (!o) throw FileError(tmp, "cannot open for writing");
    uint64_t n = hs.size();
    o.write(reinterpret_cast<const char*>(&n), 8);
    o.write(hs.data(), std::streamsize(hs.size()));
    for (size_t i = 0; i < entries.size(); ++i) {
      std::vector<uint8_t> bytes = entries[i].produce();
      if (bytes.size() != sizes[i])
        throw Error("write_safetensors: '" + entries[i].name + "' produced " + std::to_string(bytes.size()) +
                    " bytes, its shape needs " + std::to_string(sizes[i]));
      o.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
      if (!o) throw FileError(tmp, "write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw FileError(path, "cannot rename temporary file");
  return size_t(off);
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsPlanned> planned;
  for (auto& e : entries) planned.push_back({e.name, e.dtype, e.shape, [&e] { return e.bytes; }});
  write_safetensors_streamed(path, std::move(planned), metadata);
}

}  // namespace rapid::model
