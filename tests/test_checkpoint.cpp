// Checkpoint reader: real deepmd-kit checkpoints, small synthetic ones (tests/data/synthetic,
// made by make_synthetic.py there), the unpickler, and every error path.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "io/checkpoint.h"
#include "io/pickle.h"
#include "test_util.h"

using sezm::Checkpoint;
using sezm::read_checkpoint;
using namespace sezm_test;

namespace {

const std::string kDesc = "atomic_model.descriptor.";
const std::string kFit = "atomic_model.fitting_net.filter_layers.networks.0.";

}  // namespace

// Expected values below were computed once, independently of this code, with Python's
// zipfile + pickle (a custom Unpickler mapping _rebuild_tensor_v2/persistent ids to tuples)
// + struct.unpack_from on the raw storage bytes; no numpy or torch.
TEST(Checkpoint, ReadsC32Float64) {
  const Checkpoint& c = cached_checkpoint("c32_l3_f2_float64.pt");
  EXPECT_EQ(c.tensors.size(), 136u);
  EXPECT_EQ(c.model_params["type"], "dpa4");
  EXPECT_EQ(c.model_params["descriptor"]["channels"], 32);
  EXPECT_DOUBLE_EQ(c.model_params["descriptor"]["eps"].get<double>(), 1e-7);
  EXPECT_EQ(c.model_params["type_map"], nlohmann::json({"C", "Cu"}));
  EXPECT_TRUE(c.model_params["descriptor"]["l_schedule"].is_null());

  const auto& out_bias = c.get("atomic_model.out_bias");
  EXPECT_EQ(out_bias.dtype, "float64");
  EXPECT_EQ(out_bias.shape, (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(out_bias.data, (std::vector<double>{0.7418628991296868, -1.3421594396087437}));

  const auto& bias = c.get(kDesc + "blocks.0.post_so2_norm.bias");
  EXPECT_EQ(bias.shape, (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(bias.data.front(), 0.03762036241656047);
  EXPECT_EQ(bias.data.back(), 0.01354831525068027);

  const auto& w = c.get(kDesc + "blocks.1.so2_conv.so2_linears.2.weight_m.0");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{96, 384}));
  ASSERT_EQ(w.numel(), w.data.size());
  EXPECT_EQ(w.data[0], -0.04980675489796414);
  EXPECT_EQ(w.data[1000], -0.03392470492289559);
  EXPECT_EQ(w.data.back(), 0.06195432217051658);

  const auto& rows = c.get(kDesc + "gie.non_scalar_row_index");
  EXPECT_EQ(rows.dtype, "int64");
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(rows.data[i], double(i + 1));

  const auto& version = c.get(kDesc + "version_tensor");  // 0-d tensor
  EXPECT_TRUE(version.shape.empty());
  EXPECT_EQ(version.numel(), 1u);
  EXPECT_DOUBLE_EQ(version.data[0], 1.1);

  const auto& out = c.get(kFit + "output_layer.matrix");
  EXPECT_EQ(out.data.front(), -0.20131658875127117);
  EXPECT_EQ(out.data.back(), 0.10041558596912686);
  EXPECT_EQ(c.get(kDesc + "mean").numel(), 0u);  // empty (0,) tensors are kept
}

TEST(Checkpoint, ReadsC32Float32) {
  const Checkpoint& c = cached_checkpoint("c32_l3_f2_float32.pt");
  EXPECT_EQ(c.tensors.size(), 136u);
  const auto& bias = c.get(kDesc + "blocks.0.post_so2_norm.bias");
  EXPECT_EQ(bias.dtype, "float32");
  EXPECT_EQ(bias.data.front(), 0.037620361894369125);  // float32 values, widened exactly
  EXPECT_EQ(bias.data.back(), 0.013548314571380615);
  const auto& w = c.get(kDesc + "blocks.1.so2_conv.so2_linears.2.weight_m.0");
  EXPECT_EQ(w.data[1000], -0.015974607318639755);
  EXPECT_EQ(w.data.back(), 0.07603153586387634);
  EXPECT_EQ(c.get("atomic_model.out_bias").dtype, "float64");  // deepmd keeps it in float64
  EXPECT_EQ(c.get(kFit + "output_layer.matrix").data.back(), -0.09063024818897247);
}

TEST(Checkpoint, ReadsDefaultsFloat64) {
  const Checkpoint& c = cached_checkpoint("defaults_float64.pt");
  EXPECT_EQ(c.tensors.size(), 200u);
  EXPECT_EQ(c.get("atomic_model.out_bias").data,
            (std::vector<double>{-0.2155833930596931, -1.1761352374232412}));
  const auto& w = c.get(kDesc + "blocks.1.so2_conv.so2_linears.2.weight_m.0");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{192, 384}));
  EXPECT_EQ(w.data[1000], 0.017485400255575656);
  EXPECT_EQ(w.data.back(), -0.057660763971406834);
  EXPECT_EQ(c.get(kFit + "output_layer.matrix").data.front(), 0.28287252567158366);
}

TEST(Checkpoint, MissingTensorNamesPathAndKey) {
  const Checkpoint& c = cached_checkpoint("c32_l3_f2_float64.pt");
  EXPECT_FALSE(c.has("atomic_model.nope"));
  expect_contains(error_of([&] { c.get("atomic_model.nope"); }),
                  {"c32_l3_f2_float64.pt", "atomic_model.nope"});
}

TEST(Checkpoint, ReadsWaterPretrainedFromShared) {
  const std::string path = shared_path("reference/models/water_pretrained.pt");
  if (!std::ifstream(path)) GTEST_SKIP() << path << " not available";
  const Checkpoint c = read_checkpoint(path);
  EXPECT_EQ(c.model_params["type_map"], nlohmann::json({"O", "H"}));
  EXPECT_EQ(c.get(kDesc + "blocks.0.post_so2_norm.bias").dtype, "float32");
}

// ---- synthetic checkpoints: layouts the real files do not exercise ----

TEST(Checkpoint, BareStateDictWithStridesOffsetsAndDtypes) {
  const Checkpoint c = read_checkpoint(data_path("synthetic/synthetic_bare.pt"));
  // storage 0 holds k + 0.5; "transposed" is the (2,3) view at offset 1, strides (1,2).
  const auto& t = c.get("transposed");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.data, (std::vector<double>{1.5, 3.5, 5.5, 2.5, 4.5, 6.5}));
  EXPECT_EQ(c.get("shared_tail").data, (std::vector<double>{5.5, 6.5}));
  EXPECT_EQ(c.get("ints").dtype, "int32");
  EXPECT_EQ(c.get("ints").data, (std::vector<double>{-3, 7, 2147483647}));
  EXPECT_EQ(c.get("scalar").dtype, "float32");
  EXPECT_EQ(c.get("scalar").data, (std::vector<double>{-2.0}));
  EXPECT_EQ(c.get("empty").shape, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(c.get("empty").data.empty());
  EXPECT_EQ(c.model_params["nested"], nlohmann::json::parse(R"({"list": [1, 2.5, null, true]})"));
}

TEST(Checkpoint, SkipsOptimizerStateAndItsStorages) {
  // The optimizer is an unknown class whose tensor's storage is absent from the archive.
  const Checkpoint c = read_checkpoint(data_path("synthetic/synthetic_wrapped.pt"));
  EXPECT_EQ(c.tensors.size(), 5u);
  EXPECT_EQ(c.get("shared_tail").data, (std::vector<double>{5.5, 6.5}));
}

TEST(Checkpoint, RefusesMultiTask) {
  expect_contains(error_of([] { read_checkpoint(data_path("synthetic/synthetic_multitask.pt")); }),
                  {"synthetic_multitask.pt", "multi-task", "metal, water"});
}

TEST(Checkpoint, RefusesDamagedStorages) {
  expect_contains(
      error_of([] { read_checkpoint(data_path("synthetic/synthetic_short_storage.pt")); }),
      {"synthetic_short_storage.pt", "data/0", "too short", "20 bytes, 56 needed"});
  expect_contains(
      error_of([] { read_checkpoint(data_path("synthetic/synthetic_missing_storage.pt")); }),
      {"synthetic_missing_storage.pt", "data/0", "missing"});
}

TEST(Checkpoint, RefusesBigEndian) {
  expect_contains(error_of([] { read_checkpoint(data_path("synthetic/synthetic_bigendian.pt")); }),
                  {"synthetic_bigendian.pt", "big", "little-endian"});
}

// ---- file-level error paths ----

TEST(Checkpoint, MissingFile) {
  const std::string path = temp_path("_absent.pt");
  expect_contains(error_of([&] { read_checkpoint(path); }), {path, "no such file"});
}

TEST(Checkpoint, TruncatedFile) {
  const std::string whole = read_file(data_path("c32_l3_f2_float32.pt"));
  const std::string path = temp_path(".pt");
  write_file(path, whole.substr(0, whole.size() / 2));
  expect_contains(error_of([&] { read_checkpoint(path); }), {path, "truncated or corrupt"});
  std::remove(path.c_str());
}

TEST(Checkpoint, NotAZip) {
  const std::string path = temp_path(".pt");
  write_file(path, "this is a text file, not a checkpoint\n");
  expect_contains(error_of([&] { read_checkpoint(path); }), {path, "not a zip archive"});
  std::remove(path.c_str());
}

TEST(Checkpoint, ZipWithoutDataPkl) {
  const std::string path = temp_path(".pt");
  write_zip(path, {{"archive/readme.txt", "hello"}});
  expect_contains(error_of([&] { read_checkpoint(path); }), {path, "no data.pkl"});
  std::remove(path.c_str());
}

TEST(Checkpoint, NotADeepmdModel) {
  const std::string path = temp_path(".pt");
  write_zip(path, {{"archive/data.pkl", std::string("\x80\x02}q\x00.", 6)}});  // {}
  expect_contains(error_of([&] { read_checkpoint(path); }),
                  {path, "not a deepmd-kit model", "_extra_state/model_params"});
  std::remove(path.c_str());
}

TEST(Checkpoint, CorruptPickle) {
  const std::string path = temp_path(".pt");
  write_zip(path, {{"archive/data.pkl", std::string("\x80\x02}q\x00", 5)}});  // no STOP
  expect_contains(error_of([&] { read_checkpoint(path); }),
                  {path, "archive/data.pkl", "bad pickle", "truncated"});
  std::remove(path.c_str());
}

// ---- unpickler ----

TEST(Pickle, ScalarsContainersAndMemo) {
  using K = sezm::PyValue::Kind;
  // Hand-assembled protocol-2 pickle; pickle.loads gives
  // {'a': [1, -2, 3.5, None, True], 'b': (-70000, 2**40), 'c': <the same list as 'a'>}
  // (BININT1, BININT, BINFLOAT, NONE, NEWTRUE, APPENDS, LONG1, TUPLE2, BINPUT/BINGET, SETITEMS).
  const std::string bytes(  // literals split where a hex escape would swallow the next char
      "\x80\x02}q\x00(X\x01\x00\x00\x00" "a]q\x01(K\x01J\xfe\xff\xff\xff"
      "G@\x0c\x00\x00\x00\x00\x00\x00N\x88" "eX\x01\x00\x00\x00" "bJ\x90\xee\xfe\xff"
      "\x8a\x06\x00\x00\x00\x00\x00\x01\x86X\x01\x00\x00\x00" "ch\x01u.",
      65);
  const auto v = sezm::unpickle(bytes, "test");
  ASSERT_TRUE(v->is(K::Dict));
  const auto* a = v->find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 5u);
  EXPECT_EQ(a->items[1]->integer, -2);
  EXPECT_EQ(a->items[2]->real, 3.5);
  EXPECT_TRUE(a->items[3]->is(K::None));
  EXPECT_TRUE(a->items[4]->boolean);
  const auto* b = v->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->items[0]->integer, -70000);
  EXPECT_EQ(b->items[1]->integer, int64_t{1} << 40);
  EXPECT_EQ(v->find("c"), a);  // memo shares the object
}

TEST(Pickle, ErrorsNameOpcodeAndOffset) {
  expect_contains(error_of([] { sezm::unpickle(std::string("\x80\x02\xff", 3), "src"); }),
                  {"src", "opcode 0xff", "offset 2"});
  expect_contains(error_of([] { sezm::unpickle(std::string("\x80\x02X\x10\x00\x00\x00" "ab", 9), "src"); }),
                  {"src", "truncated"});
  expect_contains(error_of([] { sezm::unpickle("s.", "src"); }), {"stack underflow"});
  expect_contains(error_of([] { sezm::unpickle("h\x05.", "src"); }), {"memo index 5"});
}
