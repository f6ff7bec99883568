// The on-disk format of one KV snapshot (docs/cache.md): a plaintext header, the prefix's token
// ids, the KV pages (optionally zstd) and an optional recurrent state, sealed in two AEAD sections
// under a key derived from the install's CacheKey:
//   [header 88 B][tokens][tag 16 B: header + tokens][pages][state][tag 16 B: everything before]
// The first section lets start-up index an entry from its header and tokens alone, already
// authenticated; the second covers the whole file and is checked on the first hit. With
// encryption the tokens and the pages/state are ciphertext (the header stays plain: sizes only).
// AES-256-GCM where the CPU has AES-NI, else XChaCha20-Poly1305 (libsodium); random nonce per file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_key.h"

namespace rapid::cache {

inline constexpr uint32_t kSnapshotFormatVersion = 2;  // 1: xxh64 checksums only (refused)

struct SnapshotEntry {
  std::vector<int32_t> tokens;  // the prefix
  std::vector<uint8_t> pages;   // KV pages of that prefix, in BlockPool block layout
  std::vector<uint8_t> state;   // optional recurrent-state snapshot valid after tokens.size()
  bool operator==(const SnapshotEntry&) const = default;
};

// What a header may claim, checked before anything is allocated from it.
struct SnapshotLimits {
  uint64_t max_tokens = uint64_t(1) << 24;      // the model's context
  uint64_t block_tokens = 0, block_bytes = 0;   // when set: pages == ceil(tokens/block_tokens) blocks
  uint64_t max_state_bytes = uint64_t(1) << 28;
  // When set: the recurrent state must be exactly this size (a hybrid's; 0 for a KV-only model),
  // so an entry is refused before its state reaches the model.
  std::optional<uint64_t> state_bytes;
  uint64_t max_file_bytes = 0;                  // 0: no cap (the store's disk limit otherwise)
};

class SnapshotCodec {
 public:
  static constexpr size_t kHeaderBytes = 88, kTagBytes = 16;

  SnapshotCodec(const CacheKey& key, const std::string& model_key, SnapshotLimits limits = {});
  ~SnapshotCodec();
  SnapshotCodec(const SnapshotCodec&) = delete;
  SnapshotCodec& operator=(const SnapshotCodec&) = delete;

  std::vector<uint8_t> encode(const SnapshotEntry& e, bool compress, int zstd_level, bool encrypt) const;

  enum class HeaderCheck { Ok, Bad, OldFormat };
  // Checks the first kHeaderBytes of a file of `file_size` bytes against the magic, version,
  // model, cipher and limits; *why says what is wrong. Nothing is read beyond the header.
  HeaderCheck check_header(const uint8_t* header, uint64_t file_size, std::string* why) const;
  // Bytes from the file start that index_tokens() needs (header, tokens, first tag).
  static uint64_t index_bytes(const uint8_t* header);
  // The authenticated token ids from a file's first index_bytes() bytes (decrypted in place);
  // nullopt with *why when the header was not checked Ok or the tag does not verify.
  std::optional<std::vector<int32_t>> index_tokens(std::vector<uint8_t>& prefix, std::string* why) const;
  // The whole file verified and decoded (decrypted in place); nullopt with *why otherwise.
  std::optional<SnapshotEntry> decode(std::vector<uint8_t>& file, std::string* why) const;

  // `<keyed hash of the tokens>-<n>.kvs`: the name does not reveal which prompt it holds.
  std::string file_name(const std::vector<int32_t>& tokens) const;

 private:
  struct Layout;
  bool seal(uint8_t* buf, size_t msg_off, size_t end, const uint8_t* nonce, int section, uint32_t cipher,
            bool encrypt, uint8_t* tag) const;
  bool unseal(uint8_t* buf, size_t msg_off, size_t end, const uint8_t* nonce, int section, uint32_t cipher,
            bool encrypt, const uint8_t* tag) const;

  uint8_t aead_key_[32], name_key_[32];
  uint64_t model_hash_;
  SnapshotLimits limits_;
};

}  // namespace rapid::cache
