#include "io/zip_archive.h"

#include <zip.h>

#include <filesystem>
#include <fstream>
#include <system_error>

#include "common/error.h"

namespace sezm {
namespace {

std::string libzip_reason(int code) {
  zip_error_t err;
  zip_error_init_with_code(&err, code);
  std::string reason = zip_error_strerror(&err);
  zip_error_fini(&err);
  return reason;
}

// First bytes of the file, to tell "not a zip" from "a damaged zip" when libzip cannot
// find the central directory (it reports both as ZIP_ER_NOZIP).
std::string file_head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string head(n, '\0');
  in.read(head.data(), static_cast<std::streamsize>(n));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

}  // namespace

ZipArchive::ZipArchive(const std::string& path) : path_(path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(path + ": no such file");
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a file");

  file_size_ = std::filesystem::file_size(path, ec);
  if (ec) throw Error(path + ": cannot read the file size (" + ec.message() + ")");
  int code = 0;
  archive_ = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (archive_) return;

  const std::string reason = libzip_reason(code);
  if (code == ZIP_ER_NOZIP || code == ZIP_ER_INCONS) {
    const std::string head = file_head(path, 4);
    if (head == std::string("PK\x03\x04", 4))
      throw Error(path + ": truncated or corrupt zip archive (libzip: " + reason + ")");
    if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80)
      throw Error(path + ": not a zip archive; this looks like the legacy (pre-1.6) torch.save "
                         "format, which is not supported: re-save it with a recent PyTorch");
    throw Error(path + ": not a zip archive (libzip: " + reason + ")");
  }
  throw Error(path + ": cannot open zip archive (libzip: " + reason + ")");
}

ZipArchive::~ZipArchive() {
  if (archive_) zip_discard(archive_);  // read-only: nothing to write back
}

std::vector<std::string> ZipArchive::entry_names() const {
  const zip_int64_t n = zip_get_num_entries(archive_, 0);
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(n > 0 ? n : 0));
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(archive_, static_cast<zip_uint64_t>(i), 0);
    if (name) names.emplace_back(name);
  }
  return names;
}

bool ZipArchive::has(const std::string& name) const {
  return zip_name_locate(archive_, name.c_str(), 0) >= 0;
}

long long ZipArchive::index_of(const std::string& name) const {
  const zip_int64_t index = zip_name_locate(archive_, name.c_str(), 0);
  if (index < 0) throw Error(path_ + ": zip archive has no entry '" + name + "'");
  return index;
}

size_t ZipArchive::entry_size(const std::string& name) const {
  const auto index = static_cast<zip_uint64_t>(index_of(name));
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(archive_, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
      !(st.valid & ZIP_STAT_COMP_SIZE) || !(st.valid & ZIP_STAT_COMP_METHOD))
    throw Error(path_ + ": cannot stat zip entry '" + name + "' (libzip: " +
                zip_strerror(archive_) + ")");
  // The declared (uncompressed) size is what read() allocates, so it must be plausible before
  // anything is allocated (docs/checkpoint-reader.md): a stored entry (torch.save's only kind)
  // is exactly its bytes in the file; a compressed one expands at most 1032-fold (deflate's
  // limit), so a larger claim is a lie or a zip bomb.
  constexpr uint64_t kMaxRatio = 1032;
  const bool stored = st.comp_method == ZIP_CM_STORE;
  if (st.comp_size > file_size_ || (stored && st.size != st.comp_size) ||
      (!stored && st.size / kMaxRatio > st.comp_size))
    throw Error(path_ + ": zip entry '" + name + "' declares " + std::to_string(st.size) +
                " bytes from " + std::to_string(st.comp_size) + " bytes in a " + std::to_string(file_size_) +
                "-byte file (" + (stored ? "stored: the two must be equal" : "compressed: at most 1032x") +
                "); the archive is corrupt");
  return static_cast<size_t>(st.size);
}

std::string ZipArchive::read(const std::string& name) const {
  const size_t size = entry_size(name);
  zip_file_t* file = zip_fopen_index(archive_, static_cast<zip_uint64_t>(index_of(name)), 0);
  if (!file)
    throw Error(path_ + ": cannot open zip entry '" + name + "' (libzip: " +
                zip_strerror(archive_) + ")");
  std::string bytes(size, '\0');
  size_t done = 0;
  std::string failure;
  while (done < size) {
    const zip_int64_t got = zip_fread(file, bytes.data() + done, size - done);
    if (got < 0) {
      failure = zip_file_strerror(file);
      break;
    }
    if (got == 0) {
      failure = "entry ends after " + std::to_string(done) + " of " + std::to_string(size) +
                " bytes";
      break;
    }
    done += static_cast<size_t>(got);
  }
  if (failure.empty()) {
    // One more read must report end of entry; this is also where libzip verifies the CRC.
    char extra = 0;
    const zip_int64_t got = zip_fread(file, &extra, 1);
    if (got < 0) failure = zip_file_strerror(file);
    else if (got > 0) failure = "entry is longer than its recorded size";
  }
  zip_fclose(file);
  if (!failure.empty())
    throw Error(path_ + ": cannot read zip entry '" + name + "' (" + failure + ")");
  return bytes;
}

}  // namespace sezm
