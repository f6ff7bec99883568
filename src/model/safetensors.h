// safetensors reader (mmapped, zero-copy) and writer. Format: u64 little-endian header length N,
// N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the data; offsets are relative to the byte after the header.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "tensor/tensor.h"

namespace rapid::model {

struct SafetensorsFile {
  std::shared_ptr<MappedFile> file;
  std::vector<tensor::Tensor> tensors;  // file order (sorted by name in the header); data points into file
  std::map<std::string, std::string> metadata;
};

// Opens and validates every header field, offset and size. Throws FileError(path, reason).
SafetensorsFile read_safetensors(const std::string& path);

// A tensor to write: raw little-endian bytes of `dtype` (F32/F16/BF16/I32/U32/I8/U8).
struct SafetensorsEntry {
  std::string name;
  tensor::DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes a safetensors file (entries sorted by name, 8-byte aligned header). Throws FileError.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const std::map<std::string, std::string>& metadata = {});

// Streaming form: the header is written from names/dtypes/shapes, then each tensor's bytes are
// produced in name order and written at once, so peak memory is one tensor. Returns data bytes.
struct SafetensorsPlanned {
  std::string name;
  tensor::DType dtype;
  std::vector<int64_t> shape;
  std::function<std::vector<uint8_t>()> produce;  // must return exactly numel * element size bytes
};
size_t write_safetensors_streamed(const std::string& path, std::vector<SafetensorsPlanned> entries,
                                  const std::map<std::string, std::string>& metadata = {});

const char* safetensors_dtype_name(tensor::DType t);  // "F32", "BF16", ... (throws for block types)

}  // namespace rapid::model
