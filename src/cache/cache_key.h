// The per-install secret behind KV snapshots: every file carries an AEAD tag under a key derived
// from it (a planted or edited snapshot is never served, whatever checksums it recomputes), and
// with encryption on, the prompts' tokens and KV are ciphertext on disk. It lives outside the
// cache directory (default $XDG_CONFIG_HOME/rapid-mlx/kv-cache.key or ~/.config/...), so a copy
// of the cache alone reveals nothing and cannot be forged.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace rapid::cache {

struct CacheKey {
  std::array<uint8_t, 32> bytes{};
};

std::string default_cache_key_path();

// Reads the key file, creating it (32 random bytes, mode 0600, missing parent directories 0700;
// atomically, so two servers starting at once agree) when it does not exist. Throws FileError
// (path and reason) when it is a symlink or not a regular file, is not owned by this user, is
// readable or writable by group/others, or is not exactly 32 bytes.
CacheKey load_or_create_cache_key(const std::string& path);

}  // namespace rapid::cache
