// Reads tests/corpus/tokenizer_corpus.bin.zst (see scripts/make_tokenizer_corpus.py).
#pragma once
#include <zstd.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/mapped_file.h"

namespace rapid::test {

struct CorpusDoc {
  std::string kind, text;
};

inline std::vector<CorpusDoc> load_tokenizer_corpus() {
  std::string comp = read_file(std::string(RAPID_SOURCE_DIR) + "/tests/corpus/tokenizer_corpus.bin.zst");
  unsigned long long n = ZSTD_getFrameContentSize(comp.data(), comp.size());
  std::string raw;
  if (n == ZSTD_CONTENTSIZE_ERROR) throw std::runtime_error("corpus: not zstd");
  if (n != ZSTD_CONTENTSIZE_UNKNOWN) {
    raw.resize(n);
    size_t r = ZSTD_decompress(raw.data(), raw.size(), comp.data(), comp.size());
    if (ZSTD_isError(r)) throw std::runtime_error("corpus: zstd error");
  } else {
    ZSTD_DStream* ds = ZSTD_createDStream();
    ZSTD_inBuffer in{comp.data(), comp.size(), 0};
    std::string buf(1 << 20, '\0');
    while (in.pos < in.size) {
      ZSTD_outBuffer out{buf.data(), buf.size(), 0};
      size_t r = ZSTD_decompressStream(ds, &out, &in);
      if (ZSTD_isError(r)) { ZSTD_freeDStream(ds); throw std::runtime_error("corpus: zstd error"); }
      raw.append(buf.data(), out.pos);
    }
    ZSTD_freeDStream(ds);
  }
  std::vector<CorpusDoc> docs;
  auto u32 = [&](size_t p) {
    return static_cast<uint32_t>(static_cast<uint8_t>(raw[p])) | static_cast<uint32_t>(static_cast<uint8_t>(raw[p + 1])) << 8 |
           static_cast<uint32_t>(static_cast<uint8_t>(raw[p + 2])) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(raw[p + 3])) << 24;
  };
  for (size_t p = 0; p + 4 <= raw.size();) {
    uint32_t kl = u32(p); p += 4;
    std::string kind = raw.substr(p, kl); p += kl;
    uint32_t dl = u32(p); p += 4;
    docs.push_back({kind, raw.substr(p, dl)});
    p += dl;
  }
  return docs;
}

}  // namespace rapid::test
