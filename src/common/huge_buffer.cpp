#include "common/huge_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.h"

namespace rapid {

std::shared_ptr<uint8_t[]> huge_buffer(size_t n) {
  if (n == 0) return nullptr;
  constexpr size_t kHuge = 2u << 20;
  const size_t len = (n + kHuge - 1) / kHuge * kHuge;
  // Over-map by one huge page and trim, so the buffer starts on a huge-page boundary.
  void* p = ::mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw Error("cannot map " + std::to_string(n) + " bytes: " + std::strerror(errno));
  auto* base = static_cast<uint8_t*>(p);
  const size_t head = (kHuge - reinterpret_cast<uintptr_t>(base) % kHuge) % kHuge;
  if (head) ::munmap(base, head);
  if (kHuge - head) ::munmap(base + head + len, kHuge - head);
  uint8_t* start = base + head;
  // Advice (without THP the pages stay 4 KiB, that is all), and only for the whole huge pages n
  // fills: a huge page is allocated whole at its first touch, so the tail stays in small pages.
  if (const size_t whole = n / kHuge * kHuge) ::madvise(start, whole, MADV_HUGEPAGE);
  return std::shared_ptr<uint8_t[]>(start, [len](uint8_t* q) { ::munmap(q, len); });
}

uint8_t* BufferSlicer::take(size_t n) {
  if (padded(n) > size_ - used_) throw Error("BufferSlicer: " + std::to_string(n) + " bytes past its " + std::to_string(size_));
  uint8_t* p = buf_.get() + used_;
  used_ += padded(n);
  return p;
}

}  // namespace rapid
