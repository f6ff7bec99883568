#include "cache/snapshot_format.h"

#include <sodium.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace rapid::cache {

namespace {

constexpr char kMagic[8] = {'R', 'M', 'L', 'X', 'K', 'V', 'S', '2'};
constexpr char kOldMagic[8] = {'R', 'M', 'L', 'X', 'K', 'V', 'S', '1'};
constexpr uint32_t kFlagZstd = 1, kFlagState = 2, kFlagEncrypted = 4;
constexpr uint32_t kCipherAesGcm = 1, kCipherXChaCha = 2;

#pragma pack(push, 1)
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t flags;
  uint32_t cipher;
  uint32_t reserved;
  uint64_t model_hash;
  uint64_t n_tokens;
  uint64_t pages_raw;
  uint64_t pages_stored;
  uint64_t state_bytes;
  uint8_t nonce[24];
};
#pragma pack(pop)
static_assert(sizeof(Header) == SnapshotCodec::kHeaderBytes);

Header read_header(const uint8_t* p) {
  Header h;
  std::memcpy(&h, p, sizeof h);
  return h;
}

}  // namespace

// Offsets of one file's parts, from its (checked) header.
struct SnapshotCodec::Layout {
  uint64_t tag1, pages, state, tag2, size;
  explicit Layout(const Header& h)
      : tag1(kHeaderBytes + h.n_tokens * 4), pages(tag1 + kTagBytes), state(pages + h.pages_stored),
        tag2(state + h.state_bytes), size(tag2 + kTagBytes) {}
};

SnapshotCodec::SnapshotCodec(const CacheKey& key, const std::string& model_key, SnapshotLimits limits)
    : model_hash_(XXH64(model_key.data(), model_key.size(), 0)), limits_(limits) {
  if (sodium_init() < 0) throw Error("libsodium failed to initialise");
  // Separate subkeys: the file-name hash never shares a key with the AEAD.
  crypto_kdf_derive_from_key(aead_key_, sizeof aead_key_, 1, "rmlx-kvs", key.bytes.data());
  crypto_kdf_derive_from_key(name_key_, sizeof name_key_, 2, "rmlx-kvs", key.bytes.data());
}

SnapshotCodec::~SnapshotCodec() {
  sodium_memzero(aead_key_, sizeof aead_key_);
  sodium_memzero(name_key_, sizeof name_key_);
}

// Section `section` of buf[0, end): [msg_off, end) is the message (encrypted in place when
// `encrypt`, else authenticated with the rest as associated data), [0, msg_off) associated data.
bool SnapshotCodec::seal(uint8_t* buf, size_t msg_off, size_t end, const uint8_t* nonce, int section,
                         uint32_t cipher, bool encrypt, uint8_t* tag) const {
  uint8_t n[24];
  std::memcpy(n, nonce, sizeof n);
  n[0] ^= uint8_t(section);  // the two sections never share a nonce
  // Authentication only: an empty message, but libsodium declares its pointer non-null.
  uint8_t none[1] = {0};
  uint8_t* m = encrypt ? buf + msg_off : none;
  const size_t mlen = encrypt ? end - msg_off : 0, adlen = encrypt ? msg_off : end;
  unsigned long long taglen = 0;
  if (cipher == kCipherAesGcm)
    return crypto_aead_aes256gcm_encrypt_detached(m, tag, &taglen, m, mlen, buf, adlen, nullptr, n, aead_key_) == 0;
  return crypto_aead_xchacha20poly1305_ietf_encrypt_detached(m, tag, &taglen, m, mlen, buf, adlen, nullptr, n,
                                                             aead_key_) == 0;
}

bool SnapshotCodec::unseal(uint8_t* buf, size_t msg_off, size_t end, const uint8_t* nonce, int section,
                           uint32_t cipher, bool encrypt, const uint8_t* tag) const {
  uint8_t n[24];
  std::memcpy(n, nonce, sizeof n);
  n[0] ^= uint8_t(section);
  // Authentication only: an empty message, but libsodium declares its pointer non-null.
  uint8_t none[1] = {0};
  uint8_t* m = encrypt ? buf + msg_off : none;
  const size_t mlen = encrypt ? end - msg_off : 0, adlen = encrypt ? msg_off : end;
  if (cipher == kCipherAesGcm)
    return crypto_aead_aes256gcm_decrypt_detached(m, nullptr, m, mlen, tag, buf, adlen, n, aead_key_) == 0;
  return crypto_aead_xchacha20poly1305_ietf_decrypt_detached(m, nullptr, m, mlen, tag, buf, adlen, n, aead_key_) == 0;
}

std::vector<uint8_t> SnapshotCodec::encode(const SnapshotEntry& e, bool compress, int zstd_level,
                                           bool encrypt) const {
  std::vector<uint8_t> zpages;
  const std::vector<uint8_t>* stored = &e.pages;
  uint32_t flags = (e.state.empty() ? 0 : kFlagState) | (encrypt ? kFlagEncrypted : 0);
  if (compress && !e.pages.empty()) {
    zpages.resize(ZSTD_compressBound(e.pages.size()));
    size_t n = ZSTD_compress(zpages.data(), zpages.size(), e.pages.data(), e.pages.size(), zstd_level);
    if (!ZSTD_isError(n) && n < e.pages.size()) {  // keep raw pages when zstd does not shrink them
      zpages.resize(n);
      stored = &zpages;
      flags |= kFlagZstd;
    }
  }
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kSnapshotFormatVersion;
  h.flags = flags;
  h.cipher = crypto_aead_aes256gcm_is_available() ? kCipherAesGcm : kCipherXChaCha;
  h.model_hash = model_hash_;
  h.n_tokens = e.tokens.size();
  h.pages_raw = e.pages.size();
  h.pages_stored = stored->size();
  h.state_bytes = e.state.size();
  randombytes_buf(h.nonce, sizeof h.nonce);
  const Layout L(h);
  std::vector<uint8_t> out(L.size);
  std::memcpy(out.data(), &h, sizeof h);
  if (!e.tokens.empty()) std::memcpy(out.data() + kHeaderBytes, e.tokens.data(), e.tokens.size() * 4);
  if (!stored->empty()) std::memcpy(out.data() + L.pages, stored->data(), stored->size());
  if (!e.state.empty()) std::memcpy(out.data() + L.state, e.state.data(), e.state.size());
  // Section 1 first: section 2's associated data includes its (encrypted) tokens and tag.
  if (!seal(out.data(), kHeaderBytes, L.tag1, h.nonce, 1, h.cipher, encrypt, out.data() + L.tag1) ||
      !seal(out.data(), L.pages, L.tag2, h.nonce, 2, h.cipher, encrypt, out.data() + L.tag2))
    throw Error("kv snapshot: sealing failed");
  return out;
}

SnapshotCodec::HeaderCheck SnapshotCodec::check_header(const uint8_t* p, uint64_t file_size, std::string* why) const {
  auto bad = [&](std::string w) {
    if (why) *why = std::move(w);
    return HeaderCheck::Bad;
  };
  if (file_size < kHeaderBytes) return bad("shorter than the header");
  const Header h = read_header(p);
  if (std::memcmp(h.magic, kOldMagic, 8) == 0) {
    if (why) *why = "old unauthenticated format (version 1)";
    return HeaderCheck::OldFormat;
  }
  if (std::memcmp(h.magic, kMagic, 8) != 0) return bad("bad magic");
  if (h.version != kSnapshotFormatVersion) return bad("unsupported version " + std::to_string(h.version));
  if (h.model_hash != model_hash_) return bad("written for a different model key");
  if ((h.flags & ~(kFlagZstd | kFlagState | kFlagEncrypted)) != 0 || h.reserved != 0) return bad("unknown flags");
  if (h.cipher != kCipherXChaCha && !(h.cipher == kCipherAesGcm && crypto_aead_aes256gcm_is_available()))
    return bad("unknown or unavailable cipher " + std::to_string(h.cipher));
  // Every size is bounded by the model before any sum is formed or anything allocated from it.
  if (h.n_tokens == 0 || h.n_tokens > limits_.max_tokens)
    return bad(std::to_string(h.n_tokens) + " tokens (the limit is " + std::to_string(limits_.max_tokens) + ")");
  if (limits_.block_tokens && limits_.block_bytes) {
    uint64_t want = (h.n_tokens + limits_.block_tokens - 1) / limits_.block_tokens * limits_.block_bytes;
    if (h.pages_raw != want)
      return bad(std::to_string(h.pages_raw) + " page bytes for " + std::to_string(h.n_tokens) +
                 " tokens; this model's KV takes " + std::to_string(want));
  } else if (h.pages_raw > (uint64_t(1) << 40)) {
    return bad("implausible page size");
  }
  const bool zstd = h.flags & kFlagZstd;
  if (zstd ? (h.pages_stored == 0 || h.pages_stored >= h.pages_raw) : h.pages_stored != h.pages_raw)
    return bad("inconsistent page sizes");
  if (h.state_bytes > limits_.max_state_bytes || (h.state_bytes != 0) != bool(h.flags & kFlagState))
    return bad("implausible state size " + std::to_string(h.state_bytes));
  if (limits_.state_bytes && h.state_bytes != *limits_.state_bytes)
    return bad("recurrent state of " + std::to_string(h.state_bytes) + " bytes; this model's is " +
               std::to_string(*limits_.state_bytes));
  if (Layout(h).size != file_size) return bad("truncated or oversized (size does not match header)");
  if (limits_.max_file_bytes && file_size > limits_.max_file_bytes) return bad("larger than the disk limit");
  return HeaderCheck::Ok;
}

uint64_t SnapshotCodec::index_bytes(const uint8_t* header) { return Layout(read_header(header)).pages; }

std::optional<std::vector<int32_t>> SnapshotCodec::index_tokens(std::vector<uint8_t>& prefix, std::string* why) const {
  auto fail = [&](const char* w) -> std::optional<std::vector<int32_t>> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (prefix.size() < kHeaderBytes) return fail("shorter than the header");
  const Header h = read_header(prefix.data());
  const Layout L(h);
  if (prefix.size() != L.pages) return fail("index read of the wrong size");
  if (!unseal(prefix.data(), kHeaderBytes, L.tag1, h.nonce, 1, h.cipher, h.flags & kFlagEncrypted,
            prefix.data() + L.tag1))
    return fail("authentication failed (forged, damaged, or written under another key)");
  std::vector<int32_t> tokens(h.n_tokens);
  std::memcpy(tokens.data(), prefix.data() + kHeaderBytes, h.n_tokens * 4);
  return tokens;
}

std::optional<SnapshotEntry> SnapshotCodec::decode(std::vector<uint8_t>& file, std::string* why) const {
  auto fail = [&](std::string w) -> std::optional<SnapshotEntry> {
    if (why) *why = std::move(w);
    return std::nullopt;
  };
  std::string w;
  if (check_header(file.data(), file.size(), &w) != HeaderCheck::Ok) return fail(w);
  const Header h = read_header(file.data());
  const Layout L(h);
  const bool enc = h.flags & kFlagEncrypted;
  uint8_t* d = file.data();
  // Whole file first (its associated data holds the still-encrypted tokens), then the tokens.
  if (!unseal(d, L.pages, L.tag2, h.nonce, 2, h.cipher, enc, d + L.tag2) ||
      !unseal(d, kHeaderBytes, L.tag1, h.nonce, 1, h.cipher, enc, d + L.tag1))
    return fail("authentication failed (forged, damaged, or written under another key)");
  SnapshotEntry e;
  e.tokens.resize(h.n_tokens);
  std::memcpy(e.tokens.data(), d + kHeaderBytes, h.n_tokens * 4);
  if (h.flags & kFlagZstd) {
    unsigned long long content = ZSTD_getFrameContentSize(d + L.pages, h.pages_stored);
    if (content != h.pages_raw) return fail("compressed pages do not match the header size");
    e.pages.resize(h.pages_raw);
    size_t n = ZSTD_decompress(e.pages.data(), e.pages.size(), d + L.pages, h.pages_stored);
    if (ZSTD_isError(n) || n != h.pages_raw) return fail("zstd pages do not decompress");
  } else {
    e.pages.assign(d + L.pages, d + L.state);
  }
  e.state.assign(d + L.state, d + L.tag2);
  return e;
}

std::string SnapshotCodec::file_name(const std::vector<int32_t>& tokens) const {
  uint8_t h[8];
  crypto_generichash(h, sizeof h, reinterpret_cast<const uint8_t*>(tokens.data()), tokens.size() * 4, name_key_,
                     sizeof name_key_);
  char hex[17];
  sodium_bin2hex(hex, sizeof hex, h, sizeof h);
  return std::string(hex) + "-" + std::to_string(tokens.size()) + ".kvs";
}

}  // namespace rapid::cache
