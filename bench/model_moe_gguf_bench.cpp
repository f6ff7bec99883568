// Decode bytes read per token of a mixture-of-experts model, measured, against its active
// parameters' bytes (issue 20: "decode bytes read per token ≈ the active parameters' bytes").
//
// Measured with the file's layout (RAPID_REPACK=0): the whole model file is mapped into this
// process first (one read per page; the file must fit in RAM), then before each decode step the accessed bits of this process's page tables
// are cleared (/proc/self/clear_refs), and after it the mapping's Referenced set (/proc/self/smaps)
// is what the CPU touched during the step, in 4 KiB pages (no page faults are involved, so the
// kernel's fault-around, which maps 64 KiB around a fault, cannot inflate it).
// Active: every tensor of the checkpoint once, except the stacked experts (top_k of E experts'
// slices) and the embedding table (one row; all of it when tied to the output).
//
// usage: build/model_moe_gguf_bench MODEL.gguf [THREADS=2] [STEPS=32]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/weights.h"

using namespace rapid;

namespace {

struct Range {
  uintptr_t lo, hi;
};

// The address ranges mapping `path` (from /proc/self/maps).
std::vector<Range> mappings_of(const std::string& path) {
  std::vector<Range> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.size() < path.size() || line.compare(line.size() - path.size(), path.size(), path) != 0) continue;
    Range r{};
    std::sscanf(line.c_str(), "%lx-%lx", &r.lo, &r.hi);
    out.push_back(r);
  }
  return out;
}

// Referenced bytes of the smaps entries mapping `path`.
uint64_t referenced_of(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  uint64_t kb = 0;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < 16) {
      in = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (in && line.rfind("Referenced:", 0) == 0) {
      kb += std::strtoull(line.c_str() + 11, nullptr, 10);
    }
  }
  return kb * 1024;
}

// Puts the file in the page cache in 4 KiB folios: dropped, then read without readahead (which
// allocates only order-0 folios; 1 MiB per read). Referenced is kept per folio, so a large folio (Linux 6.18 caches a sequentially read
// file in folios up to 2 MB) counts whole once any of its pages is read: the same build measured
// 1.256 on a file a `cat` had cached and 1.000 on a copy just written.
void cache_in_small_folios(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  std::vector<char> chunk(1 << 20);
  for (off_t at = 0; ::pread(fd, chunk.data(), chunk.size(), at) > 0; at += static_cast<off_t>(chunk.size())) {
  }
  ::close(fd);
}

double active_bytes(const model::Checkpoint& ck) {
  const auto& c = ck.config;
  double total = 0;
  for (const auto& [name, t] : ck.weights.all()) {
    const double b = static_cast<double>(t.nbytes);
    if (name.find(".switch_mlp.") != std::string::npos && t.shape.size() == 3)
      total += b / static_cast<double>(c.num_experts) * static_cast<double>(c.num_experts_per_tok);
    else if (name == "model.embed_tokens.weight" && !c.tie_word_embeddings)
      total += b / static_cast<double>(t.shape[0]);
    else
      total += b;
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [THREADS=2] [STEPS=32]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2, steps = argc > 3 ? std::atoi(argv[3]) : 32;
  cache_in_small_folios(path);
  auto ck = std::shared_ptr<model::Checkpoint>(model::load_checkpoint(path));
  const double active = active_bytes(*ck);
  model::ModelOptions o;
  o.num_threads = threads;
  // What is counted is the file mapping's pages: keep every tensor there. (The load-time lane
  // repack, model/lane_repack.h, moves dense Q8_0 / Q4_0 / Q4_1 / Q4_K matrices into copies that
  // the same steps read in full; stacked experts are never repacked.)
  setenv("RAPID_REPACK", "0", 1);
  auto m = model::create_model(ck, o);
  const int64_t V = m->config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 32; ++i) prompt.push_back(100 + 37 * i);
  std::vector<float> logits(static_cast<size_t>(V));
  auto st = m->new_state(prompt.size() + steps + 1);
  m->forward(prompt.data(), static_cast<int64_t>(prompt.size()), *st, logits.data());
  const std::vector<Range> ranges = mappings_of(path);
  if (ranges.empty()) {
    std::fprintf(stderr, "%s is not mapped by this process\n", path.c_str());
    return 1;
  }
  volatile uint8_t sink = 0;
  for (const Range& r : ranges)
    for (uintptr_t p = r.lo; p < r.hi; p += 4096) sink = sink + *reinterpret_cast<const volatile uint8_t*>(p);
  std::vector<double> read;
  for (int s = 0; s < steps; ++s) {
    std::ofstream("/proc/self/clear_refs") << "1";
    const int32_t t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    m->forward(&t, 1, *st, logits.data());
    read.push_back(static_cast<double>(referenced_of(path)));
  }
  std::sort(read.begin(), read.end());
  double mean = 0;
  for (double r : read) mean += r;
  mean /= static_cast<double>(read.size());
  std::printf("%s: decode bytes touched per token over %d steps: mean %.1f MB (min %.1f, median %.1f, max %.1f); "
              "active parameters %.1f MB; ratio %.3f\n",
              path.c_str(), steps, mean / 1e6, read.front() / 1e6, read[read.size() / 2] / 1e6, read.back() / 1e6,
              active / 1e6, mean / active);
  return 0;
}
