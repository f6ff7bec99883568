#include "cache/snapshot_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace rapid::cache {

namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

void make_dirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      std::string d = dir.substr(0, i);
      if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST)
        throw FileError(d, errno_text("cannot create cache directory"));
    }
  }
}

}  // namespace

SnapshotDir::SnapshotDir(const std::string& path, uid_t owner) : path_(path), owner_(owner) {
  if (path.empty()) throw Error("snapshot store: empty directory");
  make_dirs(path);
  fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0) throw FileError(path, errno == ELOOP || errno == ENOTDIR ? "not a directory (or a symlink)"
                                                                         : errno_text("cannot open cache directory"));
  struct stat sb{};
  std::string why;
  if (::fstat(fd_, &sb) != 0) why = errno_text("cannot stat cache directory");
  else if (sb.st_uid != owner_)
    why = "owned by uid " + std::to_string(sb.st_uid) + ", not by this user (uid " + std::to_string(owner_) + ")";
  else if (sb.st_mode & 022) why = "writable by group or others (chmod 700 it)";
  if (why.empty()) {
    lock_fd_ = ::openat(fd_, kLockName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock_fd_ < 0) why = errno_text("cannot open lock file .lock");
    else if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
      why = errno == EWOULDBLOCK ? "in use by another rapid-mlx server (.lock is held)" : errno_text("cannot lock .lock");
  }
  if (!why.empty()) {
    if (lock_fd_ >= 0) ::close(lock_fd_);
    ::close(fd_);
    throw FileError(path, why);
  }
}

SnapshotDir::~SnapshotDir() {
  ::close(lock_fd_);  // releases the flock
  ::close(fd_);
}

std::vector<std::string> SnapshotDir::list() const {
  std::vector<std::string> names;
  int dup = ::dup(fd_);
  DIR* d = dup >= 0 ? ::fdopendir(dup) : nullptr;
  if (!d) {
    if (dup >= 0) ::close(dup);
    throw FileError(path_, errno_text("cannot list cache directory"));
  }
  ::rewinddir(d);
  while (dirent* ent = ::readdir(d)) {
    std::string n = ent->d_name;
    if (n != "." && n != ".." && n != kLockName) names.push_back(std::move(n));
  }
  ::closedir(d);
  return names;
}

int SnapshotDir::open_read(const std::string& name, struct stat* sb, std::string* why) const {
  // O_NONBLOCK: a planted FIFO must not hang the open.
  int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why = errno == ELOOP ? "a symlink" : errno_text("cannot open");
    return -1;
  }
  if (::fstat(fd, sb) != 0) *why = errno_text("cannot stat");
  else if (!S_ISREG(sb->st_mode)) *why = "not a regular file";
  else if (sb->st_uid != owner_) *why = "owned by uid " + std::to_string(sb->st_uid) + ", not by this user";
  else if (sb->st_mode & 022) *why = "writable by group or others";
  else return fd;
  ::close(fd);
  return -1;
}

int SnapshotDir::create(const std::string& name) const {
  int fd = ::openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw FileError(path_ + "/" + name, errno_text("cannot create"));
  return fd;
}

bool SnapshotDir::rename(const std::string& from, const std::string& to) const {
  return ::renameat(fd_, from.c_str(), fd_, to.c_str()) == 0;
}

void SnapshotDir::remove(const std::string& name) const { ::unlinkat(fd_, name.c_str(), 0); }

void SnapshotDir::touch(const std::string& name) const {
  ::utimensat(fd_, name.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
}

void SnapshotDir::sync() const { ::fsync(fd_); }

}  // namespace rapid::cache
