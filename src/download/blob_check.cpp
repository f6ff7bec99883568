#include "download/blob_check.h"

#include <openssl/evp.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "common/error.h"

namespace rapid::download {
namespace {
bool is_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
}  // namespace

std::string file_digest(const std::string& path, const std::string& kind) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw FileError(path, "cannot open to check");
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), kind == "sha256" ? EVP_sha256() : EVP_sha1(), nullptr);
  if (kind == "git-sha1") {
    std::string head = "blob " + std::to_string(std::filesystem::file_size(path));
    EVP_DigestUpdate(ctx.get(), head.data(), head.size() + 1);  // with its NUL
  }
  std::vector<char> buf(1 << 20);
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0;) EVP_DigestUpdate(ctx.get(), buf.data(), n);
  if (std::ferror(f.get())) throw FileError(path, "read error while checking");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) out += {hex[md[i] >> 4], hex[md[i] & 15]};
  return out;
}

void verify_blob(const std::string& path, const std::string& etag, bool lfs) {
  std::string kind;
  if (lfs && is_hex(etag, 64)) kind = "sha256";
  else if (!lfs && is_hex(etag, 40)) kind = "git-sha1";
  else return;
  std::string got = file_digest(path, kind);
  if (got != etag) throw FileError(path, "corrupt download: " + kind + " is " + got + ", the hub says " + etag);
}

}  // namespace rapid::download
