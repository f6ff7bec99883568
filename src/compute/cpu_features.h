// Which SIMD level the kernels run at. Detected once; tests may force a lower level to check that
// every path agrees with the scalar reference.
#pragma once

namespace rapid::compute {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false, avx512vbmi = false;
  // AMX-INT8 tiles, usable: the CPU has them, the kernel granted this process their state
  // (arch_prctl), and RAPID_AMX is not "0".
  bool amx_int8 = false;
};

const CpuFeatures& cpu_features();
Isa best_isa();               // highest level this CPU supports
Isa active_isa();             // level the kernels currently use
void set_active_isa(Isa isa); // clamps to best_isa()
const char* isa_name(Isa isa);

}  // namespace rapid::compute
