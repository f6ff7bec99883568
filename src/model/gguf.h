// GGUF v2/v3 reader (little-endian): header, metadata key/values (all value types, nested
// arrays), tensor infos, alignment and data offsets, every field bounds-checked. Tensors keep
// their GGUF names here; gguf_names.h maps them to HF names and layouts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/mapped_file.h"
#include "tensor/tensor.h"

namespace rapid::model {

struct GgufFile {
  std::string path;
  std::shared_ptr<MappedFile> file;
  uint32_t version = 0;
  // Metadata by key. Integers/floats/bools/strings map to JSON scalars, arrays to JSON arrays.
  // Strings are the raw bytes (GGUF does not promise UTF-8 for token pieces): never dump() them.
  nlohmann::json metadata = nlohmann::json::object();
  // The tokenizer's arrays (vocab, merges, scores, types: ~100k elements each) stay in the file:
  // as JSON they cost more heap than the KV cache of a short run. Read them on demand.
  struct ArraySpan {
    uint32_t type = 0;
    uint64_t count = 0, offset = 0;
  };
  std::vector<std::pair<std::string, ArraySpan>> lazy_arrays;
  // Views of `file` (every type, MXFP4 too), GGUF names; shape in row-major order (GGUF's ne reversed).
  std::vector<tensor::Tensor> tensors;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;     // absolute file offset of the tensor data section

  const tensor::Tensor* find(const std::string& name) const;
  // Typed metadata access (nullptr/fallback when absent; FileError when the type is wrong).
  const nlohmann::json* get(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback = "") const;
  // A lazy array's elements (views into the mapping); empty when absent or of another type.
  std::vector<std::string_view> string_array(const std::string& key) const;
  std::vector<int64_t> int_array(const std::string& key) const;
  // Once config and tensors are read, the header (tokenizer arrays, chat template, tensor infos) is
  // not needed again: drop its pages rather than hold them for the life of the model. Lazy arrays
  // still read correctly afterwards (the pages fault back in).
  void drop_header_pages() const;
};

// Throws FileError(path, reason) for anything truncated, inconsistent or unsupported.
GgufFile read_gguf(const std::string& path);

// GGML type id (as stored in GGUF) → DType; false for types we do not support.
bool ggml_type_to_dtype(uint32_t id, tensor::DType& out);
uint32_t dtype_to_ggml_type(tensor::DType t);  // throws Error for dtypes GGUF cannot hold

}  // namespace rapid::model
