// Read-only memory map of a whole file. Weights are served straight from the page cache, so
// resident memory stays close to the size of the weights actually touched.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace rapid {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws FileError
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the whole pages inside [offset, offset + len) from this process's resident set (the
  // bytes stay valid: touching them again reads them back from the page cache). For parts of the
  // file that have been parsed into other structures and are not read again, e.g. GGUF metadata.
  void drop_pages(size_t offset, size_t len) const { drop(offset, len, false); }
  // The same for every page holding a byte of the range, its first and last included: for a range
  // whose bytes now live elsewhere, when the neighbours sharing its edge pages may read them back.
  void drop_pages_touching(size_t offset, size_t len) const { drop(offset, len, true); }
  // Copies [offset, offset + len) into dst with pread, without touching the mapping: a fault on a
  // mapped page maps the whole page-cache folio around it (up to 2 MB on Linux 6.18 with large
  // folios), so a few small reads there bring tens of MB of neighbouring weights into the
  // resident set. Throws FileError on a short read.
  void read(size_t offset, size_t len, void* dst) const;

 private:
  void drop(size_t offset, size_t len, bool edges) const;
  void release();
  std::string path_;
  int fd_ = -1;  // kept open for read()
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Whole file into a string (small files: configs, tokenizer.json, templates). Throws FileError.
std::string read_file(const std::string& path);

}  // namespace rapid
