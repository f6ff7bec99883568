# Writes OUT: a header defining RAPID_NUMERICS_ID, a hash of the sources that compute KV and
# recurrent state (SOURCES_FILE lists them, one per line) and of the compiler and its flags (SALT).
# The disk KV cache keys snapshots by it: a build whose arithmetic differs (a kernel, a fused
# multiply-add, another compiler) must recompute a prefix rather than continue from another
# build's KV, or its greedy output would depend on which build wrote the cache.
file(STRINGS "${SOURCES_FILE}" sources)
list(SORT sources)
set(all "${SALT}")
foreach(f IN LISTS sources)
  file(SHA256 "${f}" h)
  string(APPEND all "${h}")
endforeach()
string(SHA256 id "${all}")
string(SUBSTRING "${id}" 0 16 id)
file(WRITE "${OUT}.tmp" "#pragma once\n#define RAPID_NUMERICS_ID \"${id}\"\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
