// libFuzzer target for the checkpoint reader (src/io/: zip, pickle, tensor decoding) and the
// model-config check that runs on what it returns (src/model/config.cpp). Every input must end
// in a result or a sezm::Error: any other exception, a sanitizer report (ASan/UBSan), a leak,
// a timeout or running out of the memory limit is a finding. docs/checkpoint-reader.md gives
// the limits the reader enforces; tests/fuzz/README.md how to run this.
//
// Mutations: a plain byte mutation of a checkpoint almost always breaks a zip CRC, so libzip
// refuses it and the pickle and tensor code are never reached (a 2-minute plain run covered
// ~5200 edges and found nothing). The custom mutator below therefore unpacks the archive,
// mutates one entry (data.pkl half of the time) with libFuzzer's own mutator and packs it again
// with correct CRCs; one mutation in eight is still a raw one, for the zip layer itself.
#include <unistd.h>
#include <zip.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "io/checkpoint.h"
#include "model/config.h"

namespace {

// read_checkpoint opens a path (libzip), so each input is written to one file per process.
const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (dir && *dir ? dir : "/tmp");
    return base + "/sezm_fuzz_checkpoint_" + std::to_string(getpid()) + ".pt";
  }();
  return path;
}

using Entries = std::vector<std::pair<std::string, std::string>>;  // name, bytes

// The entries of a zip in memory; false if libzip cannot read it.
bool unpack(const uint8_t* data, size_t size, Entries& out) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(data, size, 0, &err);
  if (!src) return false;
  zip_t* z = zip_open_from_source(src, ZIP_RDONLY, &err);
  if (!z) {
    zip_source_free(src);
    return false;
  }
  bool ok = true;
  const zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; ok && i < n; ++i) {
    zip_stat_t st;
    ok = zip_stat_index(z, static_cast<zip_uint64_t>(i), 0, &st) == 0 && (st.valid & ZIP_STAT_SIZE) &&
         (st.valid & ZIP_STAT_NAME) && st.size <= (1u << 24);
    zip_file_t* f = ok ? zip_fopen_index(z, static_cast<zip_uint64_t>(i), 0) : nullptr;
    if (!f) break;
    std::string bytes(static_cast<size_t>(st.size), '\0');
    ok = zip_fread(f, bytes.data(), bytes.size()) == static_cast<zip_int64_t>(bytes.size());
    zip_fclose(f);
    out.emplace_back(st.name, std::move(bytes));
  }
  zip_discard(z);
  return ok && !out.empty();
}

uint32_t crc32(const std::string& bytes) {
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (const unsigned char b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// A zip of stored entries (torch.save's layout), with correct sizes and CRCs.
std::string pack(const Entries& entries) {
  std::string out, central;
  auto put = [](std::string& s, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  for (const auto& [name, bytes] : entries) {
    const uint32_t crc = crc32(bytes);
    const size_t offset = out.size();
    put(out, 0x04034b50, 4);
    put(out, 20, 2), put(out, 0, 2), put(out, 0, 2), put(out, 0, 2), put(out, 0x21, 2);
    put(out, crc, 4), put(out, bytes.size(), 4), put(out, bytes.size(), 4);
    put(out, name.size(), 2), put(out, 0, 2);
    out += name + bytes;
    put(central, 0x02014b50, 4);
    put(central, 20, 2), put(central, 20, 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 2);
    put(central, 0x21, 2), put(central, crc, 4), put(central, bytes.size(), 4), put(central, bytes.size(), 4);
    put(central, name.size(), 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 2);
    put(central, 0, 2), put(central, 0, 4), put(central, offset, 4);
    central += name;
  }
  const size_t cd_offset = out.size();
  out += central;
  put(out, 0x06054b50, 4), put(out, 0, 2), put(out, 0, 2);
  put(out, entries.size(), 2), put(out, entries.size(), 2);
  put(out, central.size(), 4), put(out, cd_offset, 4), put(out, 0, 2);
  return out;
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::minstd_rand rng(seed);
  Entries entries;
  if (rng() % 8 == 0 || !unpack(data, size, entries)) return LLVMFuzzerMutate(data, size, max_size);
  size_t pick = rng() % entries.size();
  if (rng() % 2)
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].first.size() >= 8 && entries[i].first.compare(entries[i].first.size() - 8, 8, "data.pkl") == 0)
        pick = i;
  std::string& bytes = entries[pick].second;
  const size_t used = bytes.size();
  bytes.resize(used + 64 + used / 4);
  bytes.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(bytes.data()), used, bytes.size()));
  const std::string packed = pack(entries);
  if (packed.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, packed.data(), packed.size());
  return packed.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = scratch_path();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    // Multi-task files: take the first branch, so the branch path is fuzzed too.
    const sezm::Checkpoint c = sezm::read_checkpoint(
        path, [](const nlohmann::json&, const std::vector<std::string>& order) {
          return order.empty() ? std::string() : order.front();
        });
    (void)sezm::parse_model_config(c.model_params, path);
  } catch (const sezm::Error&) {
    // The expected outcome for a damaged file.
  }
  return 0;
}
