#include "cache/cache_key.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace rapid::cache {

namespace {

std::string sys_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

void make_parents(const std::string& path) {
  for (size_t i = 1; i < path.size(); ++i) {
    if (path[i] != '/') continue;
    std::string d = path.substr(0, i);
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) throw FileError(d, sys_error("cannot create directory"));
  }
}

// Writes a fresh key next to `path` and links it into place; false when another process won.
bool create_key(const std::string& path) {
  CacheKey k;
  if (sodium_init() < 0) throw Error("libsodium failed to initialise");
  randombytes_buf(k.bytes.data(), k.bytes.size());
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw FileError(tmp, sys_error("cannot create key file"));
  bool ok = ::write(fd, k.bytes.data(), k.bytes.size()) == ssize_t(k.bytes.size()) && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  sodium_memzero(k.bytes.data(), k.bytes.size());
  // link() never replaces an existing file: the first writer's key is the key.
  bool linked = ok && ::link(tmp.c_str(), path.c_str()) == 0;
  int link_errno = errno;
  ::unlink(tmp.c_str());
  if (!ok) throw FileError(tmp, "cannot write key file");
  if (!linked && link_errno != EEXIST) throw FileError(path, std::string("cannot create key file: ") + std::strerror(link_errno));
  return linked;
}

}  // namespace

std::string default_cache_key_path() {
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/rapid-mlx/kv-cache.key";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.config/rapid-mlx/kv-cache.key";
}

CacheKey load_or_create_cache_key(const std::string& path) {
  if (path.empty()) throw Error("empty cache key path");
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    make_parents(path);
    create_key(path);
    fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  }
  if (fd < 0) throw FileError(path, errno == ELOOP ? "key file is a symlink" : sys_error("cannot open key file"));
  struct stat sb{};
  std::string why;
  CacheKey k;
  if (::fstat(fd, &sb) != 0) why = sys_error("cannot stat key file");
  else if (!S_ISREG(sb.st_mode)) why = "key file is not a regular file";
  else if (sb.st_uid != ::geteuid()) why = "key file is owned by uid " + std::to_string(sb.st_uid) + ", not by this user";
  else if (sb.st_mode & 077) why = "key file is accessible to group/others (chmod 600 it)";
  else if (sb.st_size != ssize_t(k.bytes.size())) why = "key file is not " + std::to_string(k.bytes.size()) + " bytes";
  else if (::pread(fd, k.bytes.data(), k.bytes.size(), 0) != ssize_t(k.bytes.size())) why = "cannot read key file";
  ::close(fd);
  if (!why.empty()) throw FileError(path, why);
  return k;
}

}  // namespace rapid::cache
