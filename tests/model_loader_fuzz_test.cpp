// Robustness of the weight loaders: real files (tiny models, GGUF goldens, an mlx_lm checkpoint)
// truncated at random offsets or with corrupted header bytes must be refused with FileError
// naming the file — never a crash, never a read out of bounds (CI runs this under ASan + UBSan).
// Whatever is accepted is fully dequantized, so a bounds check that lets a lie through shows up.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "common/mapped_file.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tensor/dequantize.h"
#include <unistd.h>
#include <filesystem>

// Per-process scratch folder: CTest runs the cases of this file as parallel processes, and two
// cases writing the same temp name would truncate a file the other has mapped (SIGBUS).
static std::string scratch_dir() {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "/rapid_" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

using namespace rapid;
using namespace rapid::model;
namespace fs = std::filesystem;

static const std::string kSrc = RAPID_SOURCE_DIR;

static std::string slurp(const std::string& p) { return read_file(p); }

static void spit(const std::string& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

static void touch_all(const WeightStore& ws) {
  std::vector<float> buf;
  for (auto& [name, t] : ws.all()) {
    if (t.cols() <= 0 || t.cols() > (1 << 20)) continue;
    buf.resize(size_t(t.cols()));
    for (int64_t r = 0; r < t.rows(); ++r) dequantize_row(t, r, buf.data());
  }
}

static void touch_all(const std::vector<tensor::Tensor>& ts) {
  WeightStore ws;
  for (auto& t : ts) ws.add(t);
  touch_all(ws);
}

// Runs `load` on a mutated file: FileError naming `path` is fine, success is fine (then every
// tensor is read), anything else fails the test.
template <class F>
static bool expect_refused_or_sound(const std::string& path, const char* what, F&& load) {
  try {
    load();
    return false;
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(fs::path(e.path()).filename().string()), std::string::npos);
    EXPECT_FALSE(e.reason().empty());
    return true;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": not a FileError: " << e.what();
    return true;
  }
}

static size_t gguf_header_end(const std::string& path) { return size_t(read_gguf(path).data_offset); }

static size_t safetensors_header_end(const std::string& bytes) {
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  return size_t(8 + n);
}

struct Case {
  std::string name, file;
  bool gguf;
};

class LoaderFuzz : public ::testing::TestWithParam<Case> {};

TEST_P(LoaderFuzz, TruncatedFilesAreRefused) {
  const Case& c = GetParam();
  std::string orig = slurp(kSrc + "/" + c.file);
  std::string path = scratch_dir() + "/trunc_" + fs::path(c.file).filename().string();
  std::mt19937_64 rng(42);
  size_t hdr = c.gguf ? gguf_header_end(kSrc + "/" + c.file) : safetensors_header_end(orig);
  std::vector<size_t> cuts;
  for (size_t i = 0; i < 48 && i < orig.size(); ++i) cuts.push_back(i);
  for (int i = 0; i < 120; ++i) cuts.push_back(size_t(rng() % orig.size()));
  for (int i = 0; i < 60; ++i) cuts.push_back(size_t(rng() % (hdr + 1)));  // dense inside the header
  int refused = 0;
  for (size_t cut : cuts) {
    spit(path, orig.substr(0, cut));
    bool r = expect_refused_or_sound(path, "truncated", [&] {
      if (c.gguf) {
        GgufFile g = read_gguf(path);
        // Only trailing alignment padding may be cut without losing data.
        for (auto& t : g.tensors)
          EXPECT_LE(static_cast<const uint8_t*>(t.data) + t.nbytes, g.file->data() + g.file->size());
        touch_all(g.tensors);
      } else {
        touch_all(read_safetensors(path).tensors);
      }
    });
    refused += r;
  }
  EXPECT_GE(refused, int(cuts.size()) * 9 / 10);
}

TEST_P(LoaderFuzz, CorruptedHeadersAreRefusedOrSound) {
  const Case& c = GetParam();
  std::string orig = slurp(kSrc + "/" + c.file);
  std::string path = scratch_dir() + "/corrupt_" + fs::path(c.file).filename().string();
  size_t hdr = c.gguf ? gguf_header_end(kSrc + "/" + c.file) : safetensors_header_end(orig);
  std::mt19937_64 rng(7);
  for (int it = 0; it < 250; ++it) {
    std::string bytes = orig;
    int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      size_t pos = size_t(rng() % hdr);
      switch (rng() % 3) {
        case 0: bytes[pos] = char(rng()); break;                     // random byte
        case 1: bytes[pos] = char(bytes[pos] ^ (1 << (rng() % 8))); break;  // bit flip
        default: bytes[pos] = char(0xff); break;                     // large lengths/counts
      }
    }
    spit(path, bytes);
    expect_refused_or_sound(path, "corrupted", [&] {
      if (c.gguf) {
        auto ck = load_checkpoint(path);  // config + names + permutation on top of the reader
        touch_all(ck->weights);
      } else {
        touch_all(read_safetensors(path).tensors);
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, LoaderFuzz,
    ::testing::Values(Case{"tiny_llama_safetensors", "tests/golden/tiny/llama/model.safetensors", false},
                      Case{"mlx_q4_safetensors", "tests/golden/model_loader/tiny-llama-mlx-q4/model.safetensors", false},
                      Case{"tiny_llama_q8_gguf", "tests/golden/tiny/llama-q8_0.gguf", true},
                      Case{"ggml_types_gguf", "tests/golden/model_loader/ggml_types.gguf", true}),
    [](const auto& info) { return info.param.name; });

// A whole MLX checkpoint directory with a corrupted shard or config: load_checkpoint refuses
// with FileError or yields tensors that can all be read.
TEST(LoaderFuzzDir, CorruptedMlxCheckpoint) {
  std::string src = kSrc + "/tests/golden/model_loader/tiny-llama-mlx-q4";
  std::string dir = scratch_dir() + "/fuzz_mlx_ckpt";
  fs::create_directories(dir);
  std::string weights = slurp(src + "/model.safetensors"), config = slurp(src + "/config.json");
  size_t hdr = safetensors_header_end(weights);
  std::mt19937_64 rng(3);
  for (int it = 0; it < 150; ++it) {
    std::string w = weights, cfg = config;
    if (it % 2) {
      size_t pos = 8 + size_t(rng() % (hdr - 8));
      w[pos] = "0123456789,:[]{}\"x"[rng() % 18];
    } else {
      size_t pos = size_t(rng() % cfg.size());
      cfg[pos] = "0123456789,:[]{}\"x"[rng() % 18];
    }
    spit(dir + "/model.safetensors", w);
    spit(dir + "/config.json", cfg);
    expect_refused_or_sound(dir, "mlx dir", [&] {
      auto ck = load_checkpoint(dir);
      touch_all(ck->weights);
    });
  }
  fs::remove_all(dir);
}
