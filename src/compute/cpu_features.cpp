#include "compute/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace rapid::compute {

namespace {

// Linux hands out the (8 KB) AMX tile state only to processes that ask, once, before any thread
// touches a tile; the grant covers every thread of the process.
bool amx_int8_usable() {
#if defined(__x86_64__)
  if (const char* e = std::getenv("RAPID_AMX"); e && !std::strcmp(e, "0")) return false;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = d & (1u << 24), int8 = d & (1u << 25);
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return tile && int8 && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2");
    c.fma = __builtin_cpu_supports("fma");
    c.f16c = c.avx2;  // every AVX2 CPU we target has F16C; the avx2 TU is built with -mf16c
    c.avx512f = __builtin_cpu_supports("avx512f");
    c.avx512bw = __builtin_cpu_supports("avx512bw");
    c.avx512vl = __builtin_cpu_supports("avx512vl");
    c.avx512vnni = __builtin_cpu_supports("avx512vnni");
    c.avx512bf16 = __builtin_cpu_supports("avx512bf16");
    c.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
    c.amx_int8 = c.avx512bw && c.avx512vl && amx_int8_usable();
#endif
    return c;
  }();
  return f;
}

Isa best_isa() {
  const auto& c = cpu_features();
  // VBMI: the MLX 2/3/5/6-bit unpacking (vpermb, vpmultishiftqb); every CPU with the others and
  // AVX-512 BF16 but Cooper Lake has it (Sapphire Rapids on, Zen 4 on).
  if (c.avx512f && c.avx512bw && c.avx512vl && c.avx512vnni && c.avx512bf16 && c.avx512vbmi) return Isa::Avx512;
  if (c.avx2 && c.fma) return Isa::Avx2;
  return Isa::Scalar;
}

static std::atomic<int>& active_slot() {
  static std::atomic<int> v = [] {
    int best = static_cast<int>(best_isa());
    // RAPID_ISA=scalar|avx2|avx512 lowers the level (debugging, benchmarks).
    if (const char* e = std::getenv("RAPID_ISA")) {
      int want = !std::strcmp(e, "scalar") ? 0 : !std::strcmp(e, "avx2") ? 1 : 2;
      if (want < best) best = want;
    }
    return best;
  }();
  return v;
}

Isa active_isa() { return static_cast<Isa>(active_slot().load(std::memory_order_relaxed)); }

void set_active_isa(Isa isa) {
  int v = static_cast<int>(isa), best = static_cast<int>(best_isa());
  active_slot().store(v < best ? v : best);
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

}  // namespace rapid::compute
