#include "compute/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace rapid::compute {

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
#endif
    return c;
  }();
  return f;
}

Isa best_isa() {
  const auto& c = cpu_features();
  if (c.avx512f && c.avx512bw && c.avx512vl && c.avx512vnni && c.avx512bf16) return Isa::Avx512;
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
