// Radix prefix cache lookup cost and snapshot store throughput.
//   match_prefix: a tree of 100k cached tokens (200 agent-like sessions of 500 tokens sharing a
//   2k-token system prompt in groups), queried with a 4k-token prompt.
//   snapshot write/read: 8 MiB of f16 KV pages (Gaussian values, as real KV is) per entry, raw vs
//   zstd level 1, including fsync; bytes/s counts the raw page bytes.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "cache/radix_cache.h"
#include "cache/snapshot_store.h"

using namespace rapid::cache;

namespace {
uint16_t to_f16(float f) {  // round-toward-zero is fine for benchmark data
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = (x >> 13) & 0x3ff;
  if (exp <= 0) return uint16_t(sign);
  if (exp >= 31) return uint16_t(sign | 0x7c00);
  return uint16_t(sign | (uint32_t(exp) << 10) | mant);
}

std::vector<uint8_t> kv_pages(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.5f);
  std::vector<uint8_t> out(bytes);
  for (size_t i = 0; i + 1 < bytes; i += 2) {
    uint16_t h = to_f16(nd(rng));
    std::memcpy(&out[i], &h, 2);
  }
  return out;
}
}  // namespace

static void BM_RadixMatchPrefix100k(benchmark::State& state) {
  BlockShape sh;
  sh.num_layers = 1; sh.kv_heads = 1; sh.head_dim = 8; sh.block_size = 16; sh.dtype = KvDType::F16;
  BlockPool pool(sh, sh.block_bytes() * 20000);
  RadixCache rc(pool);
  std::mt19937 rng(1);
  std::vector<std::vector<Token>> prompts(4);
  for (auto& p : prompts) for (int i = 0; i < 2000; ++i) p.push_back(Token(rng() % 150000));
  size_t total = 0;
  std::vector<Token> last;
  for (int s = 0; s < 200 && total < 100000; ++s) {
    std::vector<Token> t = prompts[s % 4];
    for (int i = 0; i < 500; ++i) t.push_back(Token(rng() % 150000));
    BlockTable bt(16);
    PrefixMatch m = rc.match_prefix(t);
    bt.adopt_prefix(pool, m.blocks, m.matched);
    while (bt.length() < int64_t(t.size())) bt.append_token(pool);
    total += size_t(rc.insert(t, bt.blocks()));
    bt.release(pool);
    last = t;
  }
  std::vector<Token> q = last;
  for (int i = 0; i < 1500; ++i) q.push_back(Token(rng() % 150000));
  for (auto _ : state) benchmark::DoNotOptimize(rc.match_prefix(q));
  state.counters["cached_tokens"] = double(total);
  state.counters["matched"] = double(rc.match_prefix(q).matched);
  state.counters["nodes"] = double(rc.stats().nodes);
}
BENCHMARK(BM_RadixMatchPrefix100k);

// Arg: 0 raw pages, 1 zstd, 2 encrypted (authentication is always on).
static void BM_SnapshotWrite(benchmark::State& state) {
  bool compress = state.range(0) == 1;
  char tmpl[] = "/tmp/rapid_cache_bench_XXXXXX";
  std::filesystem::path dir = ::mkdtemp(tmpl);
  SnapshotStoreOptions o;
  o.dir = (dir / "m").string();
  o.model_key = "m";
  o.compress = compress;
  o.encrypt = state.range(0) == 2;
  o.key.bytes.fill(7);
  SnapshotStore s(o);
  SnapshotEntry e;
  e.pages = kv_pages(8 << 20, 3);
  int32_t i = 0;
  for (auto _ : state) {
    e.tokens = {i++, 1, 2, 3};
    s.put(e);
    s.flush();
  }
  SnapshotStats st = s.stats();
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(e.pages.size()));
  state.counters["disk_ratio"] = double(st.bytes_written) / double(st.writes * e.pages.size());
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SnapshotWrite)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

static void BM_SnapshotRead(benchmark::State& state) {
  bool compress = state.range(0) == 1;
  char tmpl[] = "/tmp/rapid_cache_bench_XXXXXX";
  std::filesystem::path dir = ::mkdtemp(tmpl);
  SnapshotStoreOptions o;
  o.dir = (dir / "m").string();
  o.model_key = "m";
  o.compress = compress;
  o.encrypt = state.range(0) == 2;
  o.key.bytes.fill(7);
  SnapshotEntry e;
  e.tokens = {1, 2, 3};
  e.pages = kv_pages(8 << 20, 4);
  {
    SnapshotStore w(o);
    w.put(e);
    w.flush();
  }
  SnapshotStore s(o);
  for (auto _ : state) benchmark::DoNotOptimize(s.lookup(e.tokens));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(e.pages.size()));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SnapshotRead)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
