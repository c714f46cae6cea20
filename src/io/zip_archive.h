#pragma once
// Read-only RAII wrapper over libzip, just what the checkpoint reader needs.
// Every failure is a sezm::Error that names the archive path and libzip's reason.
#include <string>
#include <vector>

struct zip;  // libzip's archive handle (zip_t); kept out of this header

namespace sezm {

class ZipArchive {
 public:
  // Opens `path` read-only with libzip's consistency checks. Distinguishes a missing file,
  // a file that is not a zip at all, and a zip that is truncated or corrupt.
  explicit ZipArchive(const std::string& path);
  ~ZipArchive();
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  const std::string& path() const { return path_; }
  unsigned long long file_size() const { return file_size_; }
  std::vector<std::string> entry_names() const;
  bool has(const std::string& name) const;
  // Size in bytes of entry `name` (uncompressed), without reading it; an implausible declared
  // size (larger than the entry's bytes allow) is an Error.
  size_t entry_size(const std::string& name) const;
  // The whole (uncompressed) entry; CRC errors and short reads are reported.
  std::string read(const std::string& name) const;

 private:
  long long index_of(const std::string& name) const;  // throws if absent

  std::string path_;
  unsigned long long file_size_ = 0;
  ::zip* archive_ = nullptr;
};

}  // namespace sezm
