// Hostile and careless checkpoints (issue 17): each file that crashed the reader, exhausted
// memory or gave a silently wrong answer before it was hardened now ends in a sezm::Error that
// names the file, the tensor and the limit (docs/checkpoint-reader.md), and sezm-eval exits
// non-zero with that message. The files are made at test time by tests/hostile/make_hostile.py
// (Python 3 standard library) from tests/data/recipes/mini_f32.pt, one alteration each.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "api/potential.h"
#include "io/checkpoint.h"
#include "io/pickle.h"
#include "test_util.h"

using namespace sezm_test;

namespace {

class HostileCheckpoint : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::TempDir() + "sezm_hostile_" + std::to_string(getpid());
    const std::string cmd = "python3 '" + data_path("../hostile/make_hostile.py") + "' '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    manifest_ = nlohmann::json::parse(read_file(dir_ + "/manifest.json"));
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  static std::string file(const std::string& name) { return dir_ + "/" + name + ".pt"; }
  // The state-dict key the generator altered in case `name`.
  static std::string tensor(const std::string& name) { return manifest_.at(name).at("tensor"); }
  // The loaders' message for case `name` (reader, config check and weight re-layout).
  static std::string load_error(const std::string& name) {
    return error_of([&] { sezm::load_model_weights(file(name)); });
  }

  static std::string dir_;
  static nlohmann::json manifest_;
};
std::string HostileCheckpoint::dir_;
nlohmann::json HostileCheckpoint::manifest_;

}  // namespace

// Issue 17 item 1: numel x element size wrapped to a few bytes, the tensor then read past the
// storage (SIGSEGV) or, just past its end, took heap bytes as weights (a wrong energy, exit 0).
TEST_F(HostileCheckpoint, StorageSizeOverflow) {
  for (const char* name : {"numel_overflow", "numel_overflow_offset"}) {
    SCOPED_TRACE(name);
    expect_contains(load_error(name), {file(name), "storage entry 'mini_f32/data/" +
                                           manifest_.at(name).at("storage").get<std::string>() + "'",
                                       tensor(name), "elements of 4 bytes, more than 2^63 bytes"});
  }
}

// Item 2: stride x (shape - 1) wrapped and passed the bounds check (SIGSEGV).
TEST_F(HostileCheckpoint, StrideOverflow) {
  expect_contains(load_error("stride_overflow"),
                  {file("stride_overflow"), tensor("stride_overflow"), "reaches past element 2^63",
                   "strides (", "shape (64, 32)"});
}

// Item 4: sizes declared far beyond the file are refused before anything is allocated
// (before: "std::bad_alloc" and 2.1 GB / 7.8 s for a stride-0 broadcast).
TEST_F(HostileCheckpoint, BroadcastLargerThanStorage) {
  expect_contains(load_error("huge_shape"),
                  {file("huge_shape"), tensor("huge_shape"), "declares 4294967296 elements",
                   "shape (1073741824, 4), strides (0, 0)", "holds (2048)", "broadcast"});
  expect_contains(load_error("stride0_broadcast"),
                  {file("stride0_broadcast"), tensor("stride0_broadcast"), "declares 268435456 elements",
                   "strides (0)", "broadcast"});
}

// A zip entry's declared size is what read() allocates: a stored entry claiming ~4 GiB from
// 41 kB is refused before any allocation (before: 4.2 GB and 9 s, then libzip's complaint).
TEST_F(HostileCheckpoint, ZipEntryDeclaresMoreThanItHolds) {
  expect_contains(load_error("zip_size_lie"),
                  {file("zip_size_lie"), "zip entry 'mini_f32/data.pkl' declares 4294967040 bytes from",
                   "stored: the two must be equal"});
}

// A key read once must still be checked against every later storage that names it.
TEST_F(HostileCheckpoint, StorageKeyReusedWithLargerType) {
  const std::string name = "storage_key_reused";
  expect_contains(load_error(name), {file(name), tensor(name), "is too short: 4 bytes,", "needed"});
}

// Item 3: nesting. A 10^6-deep list outside the model is valid pickle and is simply not needed:
// the model loads with the base file's weights (before: stack overflow in the destructor).
TEST_F(HostileCheckpoint, DeepListOutsideTheModelIsHarmless) {
  const sezm::Checkpoint base = sezm::read_checkpoint(data_path("recipes/mini_f32.pt"));
  const sezm::Checkpoint deep = sezm::read_checkpoint(file("deep_list_pickle"));
  ASSERT_EQ(deep.tensors.size(), base.tensors.size());
  for (const auto& [k, t] : base.tensors) EXPECT_EQ(deep.get(k).data, t.data) << k;
  EXPECT_NO_THROW(sezm::load_model_weights(file("deep_list_pickle")));
}

// ... inside model_params (2x10^5 deep, or containing itself) it overflowed the stack in the
// JSON conversion; a list of 60 doubly-shared levels would expand to 2^60 values.
TEST_F(HostileCheckpoint, NestingInModelParams) {
  for (const char* name : {"deep_list_params", "self_list_params"}) {
    SCOPED_TRACE(name);
    expect_contains(load_error(name), {file(name), "_extra_state/model_params/hostile[0][0]",
                                       "nests deeper than 64 levels"});
  }
  expect_contains(load_error("doubling_list_params"),
                  {file("doubling_list_params"), "more than 100000 values"});
}

// Delivery 3 (load half): a NaN or an infinity in a weight is refused with the full name
// (before: "energy: -nan", exit 0).
TEST_F(HostileCheckpoint, NonFiniteWeight) {
  expect_contains(load_error("nan_weight"),
                  {file("nan_weight"), "tensor '" + tensor("nan_weight") + "' (64, 32)",
                   "holds 2 non-finite values, the first nan at index (0, 5)", "must be finite"});
}

// Item 7: a real deepmd-kit model of another descriptor (tests/data/foreign/make_se_e2_a.py)
// is named as such (before: "missing option type (no safe default)").
TEST(ForeignCheckpoint, SeE2ASaysWhatItIs) {
  const std::string path = data_path("foreign/se_e2_a_tiny.pt");
  expect_contains(error_of([&] { sezm::load_model_weights(path); }),
                  {path, "unsupported model: a deepmd-kit model with descriptor \"se_e2_a\"",
                   "only DPA4/SeZM models", "pair_style deepmd"});
}

// A fuzzer finding (tests/fuzz/crashes): model_params' "type" holds invalid UTF-8. Making the
// refusal message once threw nlohmann's type_error 316, naming neither file nor key.
TEST(ForeignCheckpoint, InvalidUtf8InTheModelTypeIsNamedNotThrown) {
  const std::string path = data_path("../fuzz/crashes/invalid_utf8_descriptor_type.pt");
  expect_contains(error_of([&] { sezm::load_model_weights(path); }),
                  {path, "unsupported model: a deepmd-kit model of type \"", "only DPA4/SeZM models"});
}

// Every case through the CLI: a non-zero exit and the loader's message, never a signal.
TEST_F(HostileCheckpoint, SezmEvalExitsNonZeroWithTheMessage) {
  const std::string xyz = dir_ + "/three.xyz";
  write_file(xyz, "3\nProperties=species:S:1:pos:R:3\nC 0 0 0\nC 1.4 0.1 0\nC 0.2 1.3 0.3\n");
  const std::string out = dir_ + "/eval.out";
  auto run = [&](const std::string& model) {
    const std::string cmd = std::string("'") + SEZM_EVAL_EXE + "' '" + model + "' '" + xyz + "' --no-forces > '" +
                            out + "' 2>&1";
    return std::system(cmd.c_str());
  };
  ASSERT_EQ(run(data_path("recipes/mini_f32.pt")), 0) << read_file(out);  // the unaltered base
  for (const auto& item : manifest_.items()) {
    const std::string& name = item.key();
    SCOPED_TRACE(name);
    const int status = run(file(name));
    if (name == "deep_list_pickle") {
      EXPECT_EQ(status, 0) << read_file(out);
      continue;
    }
    ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal: " << read_file(out);
    EXPECT_EQ(WEXITSTATUS(status), 1) << read_file(out);
    const std::string message = read_file(out);
    expect_contains(message, {"sezm-eval: " + file(name) + ": "});
    EXPECT_EQ(message.find("std::"), std::string::npos) << message;
  }
}

// The unpickler's own containers: a dict repeating a key keeps its first position and the last
// value (Python semantics), through the key index that keeps large dicts linear.
TEST(Pickle, RepeatedDictKeyReplacesInPlace) {
  // {'a': 1, 'b': 2} then SETITEM 'a' = 3: EMPTY_DICT MARK 'a' 1 'b' 2 SETITEMS 'a' 3 SETITEM STOP
  const std::string bytes("\x80\x02}(X\x01\x00\x00\x00" "aK\x01X\x01\x00\x00\x00" "bK\x02uX\x01\x00\x00\x00"
                          "aK\x03s.",
                          31);
  const auto v = sezm::unpickle(bytes, "test");
  ASSERT_EQ(v->entries.size(), 2u);
  EXPECT_EQ(v->entries[0].first->text, "a");
  EXPECT_EQ(v->entries[0].second->integer, 3);
  EXPECT_EQ(v->entries[1].second->integer, 2);
}
