// Software prefetch hints the compiler cannot drop. GCC 12 takes __builtin_prefetch for a call
// without side effects, so a function whose body only prefetches is found `const` and every call
// to it is deleted unless it happened to be inlined first: the KV-chunk and weight-row prefetches
// (attention.cpp, RowPrefetch) were absent from the release binary. An asm volatile statement is
// kept wherever it is written.
#pragma once

namespace rapid::compute {

// Into every cache level (T0): for lines read within a few hundred cycles.
inline void prefetch_l1(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

// Into L2 and L3 only (T1): for streams of more lines than L1's few miss buffers hold.
inline void prefetch_l2(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

}  // namespace rapid::compute
