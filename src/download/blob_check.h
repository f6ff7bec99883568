// Content checks of a downloaded blob against the hub's ETag.
#pragma once
#include <string>

namespace rapid::download {

// Lower-case hex digest of a file: "sha256", or "git-sha1" (sha1 of "blob <size>\0" + content,
// the id git and the hub give a file that is not in LFS).
std::string file_digest(const std::string& path, const std::string& kind);

// Throws FileError when the file does not match: an LFS etag is its sha256, a 40-hex one its git
// blob sha1; any other etag (a store that is not the hub) checks nothing beyond the size.
void verify_blob(const std::string& path, const std::string& etag, bool lfs);

}  // namespace rapid::download
