// Scratch vectors handed to kernels that load whole 64-byte lines (aligned vector loads, AMX tiles).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rapid::compute {

// v resized to hold n elements from a 64-byte boundary; returns the first of them.
template <class T>
T* aligned64(std::vector<T>& v, size_t n) {
  v.resize(n + 64 / sizeof(T));
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t{63});
}

}  // namespace rapid::compute
