// The directory of one model's snapshots, opened only once it can be trusted and held locked by
// one store. Every file operation is relative to the checked directory's descriptor (openat), so
// renaming or replacing a path component later cannot redirect it; no file is ever opened
// through a symlink, and temp files are created exclusively (a planted symlink at the temp path
// once made the server overwrite a root-owned file with 46 MB).
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace rapid::cache {

class SnapshotDir {
 public:
  static constexpr const char* kLockName = ".lock";

  // Creates `path` (0700, with missing parents) if absent, then refuses it (FileError naming the
  // path and the reason) when it is a symlink or not a directory, is not owned by `owner`, is
  // writable by group or others, or is locked by another store (the `.lock` file, flock).
  SnapshotDir(const std::string& path, uid_t owner);
  ~SnapshotDir();
  SnapshotDir(const SnapshotDir&) = delete;
  SnapshotDir& operator=(const SnapshotDir&) = delete;

  const std::string& path() const { return path_; }
  std::vector<std::string> list() const;  // entry names, without "." ".." and the lock file
  // A regular file owned by the owner and not writable by group/others, opened read-only
  // without following symlinks; -1 with *why set otherwise. *sb gets its status.
  int open_read(const std::string& name, struct stat* sb, std::string* why) const;
  // A new file (O_EXCL | O_NOFOLLOW, 0600) for writing; throws FileError.
  int create(const std::string& name) const;
  bool rename(const std::string& from, const std::string& to) const;
  void remove(const std::string& name) const;
  void touch(const std::string& name) const;  // mtime = now (recency for the next start-up)
  void sync() const;                          // makes renames durable

 private:
  std::string path_;
  uid_t owner_;
  int fd_ = -1, lock_fd_ = -1;
};

}  // namespace rapid::cache
