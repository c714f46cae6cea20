// sezm-eval as a careless or hostile user runs it (docs/errors.md): its flags and exit statuses
// (0 success, 1 error, 2 bad usage), its output schemas (--json keys and sizes, the text lines),
// and every careless input of issue 17 refused with a message naming the cause: an XYZ atom count
// smaller than its atom lines, --elements with an XYZ file, --gpu abc, coincident atoms (named by
// index and file line), output to a full disk, and memory exhaustion (one atom in a 0.15 Å cell
// under a 3 GB address-space limit). The numbers themselves are test_cli.cpp's business.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec_util.h"
#include "model_test_util.h"

using namespace sezm_test;

namespace {

const std::string kModel = data_path("../../potentials/C.pt");  // rcut 6 Å, type_map C (potentials/README.md)

// An XYZ file under the test's temp path; `body` is everything after the count and comment lines.
std::string xyz(const std::string& name, int count, const std::string& comment, const std::string& body) {
  const std::string path = temp_path(name + ".xyz");
  write_file(path, std::to_string(count) + "\n" + comment + "\n" + body);
  return path;
}

// A 4-atom open carbon cluster, 1.4-1.6 Å bonds.
const char* kCluster =
    "C 0.0 0.0 0.0\n"
    "C 1.4 0.1 0.0\n"
    "C 0.1 1.5 0.2\n"
    "C 1.2 1.3 1.1\n";

Exec eval(const std::string& args) { return run(quote(SEZM_EVAL_EXE) + " " + args); }

}  // namespace

TEST(SezmEval, UsageAndExitStatus) {
  const std::string file = xyz("cluster", 4, "Properties=species:S:1:pos:R:3", kCluster);
  const std::string mf = quote(kModel) + " " + quote(file);
  const Exec help = eval("--help");
  EXPECT_EQ(help.status, 0) << help.out;
  EXPECT_NE(help.out.find("usage: sezm-eval MODEL STRUCTURE"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("exit status: 0 success, 1 error (cause on stderr), 2 bad usage"), std::string::npos);

  // Bad usage: 2, with the reason.
  const std::vector<std::pair<std::string, std::string>> usage = {
      {"", "usage: sezm-eval"},
      {quote(kModel), "usage: sezm-eval"},
      {mf + " extra", "usage: sezm-eval"},
      {mf + " --colour", "unknown option '--colour'"},
      {mf + " --device tpu", "bad value 'tpu' for --device"},
      {mf + " --device", "--device needs a value"},
      {mf + " --device cuda --mode turbo", "bad value 'turbo' for --mode"},
      {mf + " --device cuda --gpu abc", "--gpu needs a non-negative device index, got 'abc'"},
      {mf + " --device cuda --gpu -1", "--gpu needs a non-negative device index, got '-1'"},
      {mf + " --device cuda --gpu 1x", "--gpu needs a non-negative device index, got '1x'"},
      {mf + " --gpu 0", "--gpu, --mode and --precision tf32 apply to --device cuda only"},
      {mf + " --mode fast", "--gpu, --mode and --precision tf32 apply to --device cuda only"},
      {mf + " --precision tf32", "--gpu, --mode and --precision tf32 apply to --device cuda only"},
      {mf + " --precision bf16", "bad value 'bf16' for --precision (expected default or tf32)"},
      {mf + " --no-forces --atom-virial", "--atom-virial needs forces"},
      {mf + " --elements", "--elements needs at least one element symbol"},
      {mf + " --head", "--head needs a value"},
      {mf + " --charge-spin 0 x", "--charge-spin needs two numbers"},
  };
  for (const auto& [args, message] : usage) {
    const Exec r = eval(args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << ": " << r.out;
  }
  // Errors: 1, "sezm-eval: <cause>".
  const Exec no_model = eval(quote(temp_path("none.pt")) + " " + quote(file));
  EXPECT_EQ(no_model.status, 1) << no_model.out;
  EXPECT_NE(no_model.out.find("sezm-eval: "), std::string::npos) << no_model.out;
  const Exec no_file = eval(quote(kModel) + " " + quote(temp_path("none.xyz")));
  EXPECT_EQ(no_file.status, 1) << no_file.out;
  EXPECT_NE(no_file.out.find("cannot open structure file"), std::string::npos) << no_file.out;
  const Exec nan = eval(quote(kModel) + " " + quote(xyz("nan", 2, "", "C 0 0 0\nC nan 0 1\n")));
  EXPECT_EQ(nan.status, 1) << nan.out;
  EXPECT_NE(nan.out.find("nan.xyz:4: expected a finite number for x, got 'nan'"), std::string::npos) << nan.out;
  const Exec cuda = eval(mf + " --device cuda --gpu 99");  // no such GPU (or no CUDA engine): never a fallback
  EXPECT_EQ(cuda.status, 1) << cuda.out;
  EXPECT_NE(cuda.out.find("sezm-eval: device cuda"), std::string::npos) << cuda.out;
}

TEST(SezmEval, JsonSchema) {
  const std::string file = xyz("cluster", 4, "Properties=species:S:1:pos:R:3", kCluster);
  const std::string mf = quote(kModel) + " " + quote(file);
  const auto keys = [](const nlohmann::json& j) {
    std::set<std::string> k;
    for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
    return k;
  };
  const Exec full = eval(mf + " --json");
  ASSERT_EQ(full.status, 0) << full.out;
  const nlohmann::json j = nlohmann::json::parse(full.out);
  EXPECT_EQ(keys(j), (std::set<std::string>{"energy", "atom_energy", "forces", "virial"}));
  EXPECT_TRUE(j["energy"].is_number());
  EXPECT_EQ(j["atom_energy"].size(), 4u);
  EXPECT_EQ(j["forces"].size(), 12u);
  EXPECT_EQ(j["virial"].size(), 9u);
  double sum = 0;
  for (double e : j["atom_energy"]) sum += e;
  EXPECT_NEAR(sum, j["energy"].get<double>(), 1e-12 * std::abs(sum));

  const Exec av = eval(mf + " --json --atom-virial");
  ASSERT_EQ(av.status, 0) << av.out;
  const nlohmann::json ja = nlohmann::json::parse(av.out);
  EXPECT_EQ(keys(ja), (std::set<std::string>{"energy", "atom_energy", "forces", "virial", "atom_virial"}));
  EXPECT_EQ(ja["atom_virial"].size(), 36u);
  EXPECT_EQ(ja["energy"], j["energy"]);

  const Exec ef = eval(mf + " --json --no-forces");
  ASSERT_EQ(ef.status, 0) << ef.out;
  const nlohmann::json je = nlohmann::json::parse(ef.out);
  EXPECT_EQ(keys(je), (std::set<std::string>{"energy", "atom_energy"}));
  EXPECT_EQ(je["energy"], j["energy"]);

  const Exec text = eval(mf);
  ASSERT_EQ(text.status, 0) << text.out;
  for (const char* line : {"model     : ", "structure : ", "(4 atoms, open, 12 edges)", "energy    : ", "max |F|   : ",
                           "virial    : ", "time      : load "})
    EXPECT_NE(text.out.find(line), std::string::npos) << line << " not in:\n" << text.out;
  const Exec text_ef = eval(mf + " --no-forces");
  ASSERT_EQ(text_ef.status, 0) << text_ef.out;
  EXPECT_EQ(text_ef.out.find("max |F|"), std::string::npos) << text_ef.out;
}

TEST(SezmEval, CarelessInput) {
  // More atom lines than the count: the first N used to be evaluated silently.
  const Exec extra = eval(quote(kModel) + " " + quote(xyz("extra", 3, "", kCluster)));
  EXPECT_EQ(extra.status, 1) << extra.out;
  EXPECT_NE(extra.out.find("extra.xyz:6: more atom lines than the 3 declared on line 1"), std::string::npos)
      << extra.out;
  // A second frame after the first (its count line) is fine: only the first frame is read.
  const Exec frames = eval(quote(kModel) + " " + quote(xyz("frames", 4, "", std::string(kCluster) + "\n4\n\n" + kCluster)));
  EXPECT_EQ(frames.status, 0) << frames.out;
  EXPECT_NE(frames.out.find("(4 atoms, open, 12 edges)"), std::string::npos) << frames.out;

  // --elements with an XYZ file (which names its species) used to be ignored.
  const std::string file = xyz("cluster", 4, "", kCluster);
  const Exec el = eval(quote(kModel) + " " + quote(file) + " --elements Cu");
  EXPECT_EQ(el.status, 1) << el.out;
  EXPECT_NE(el.out.find("an XYZ file names the species of its atoms; element names for LAMMPS types (--elements) "
                        "apply to LAMMPS data files only"),
            std::string::npos)
      << el.out;

  // A full disk: exit 1 and a message, in both output formats (used to exit 0 with nothing written).
  for (const char* fmt : {"", " --json"}) {
    // stdout to /dev/full, stderr (run() adds 2>&1 after the group) to the test.
    const Exec full = run("{ " + quote(SEZM_EVAL_EXE) + " " + quote(kModel) + " " + quote(file) + fmt + " > /dev/full; }");
    EXPECT_EQ(full.status, 1) << fmt << ": " << full.out;
    EXPECT_NE(full.out.find("sezm-eval: cannot write the output: No space left on device"), std::string::npos)
        << fmt << ": " << full.out;
  }
}

// Two atoms closer than 1e-5 Å: an error naming both by index and file line (the pair used to be
// dropped and the energy to change silently); also through a periodic image. 1.01e-5 Å apart is
// an edge like any other.
TEST(SezmEval, CoincidentAtomsNamedByLine) {
  const Exec open = eval(quote(kModel) + " " + quote(xyz("coincident", 3, "", "C 0 0 0\nC 1.5 0 0\nC 1.5 0 0.000005\n")));
  EXPECT_EQ(open.status, 1) << open.out;
  EXPECT_NE(open.out.find("sezm-eval: atoms 1 (line 4 of "), std::string::npos) << open.out;
  EXPECT_NE(open.out.find("coincident.xyz) and 2 (line 5 of "), std::string::npos) << open.out;
  EXPECT_NE(open.out.find("are coincident: distance 5e-06 Å, below 1e-05 Å"), std::string::npos) << open.out;

  const std::string lattice = "Lattice=\"5 0 0 0 5 0 0 0 5\" pbc=\"T T T\"";
  const Exec image = eval(quote(kModel) + " " + quote(xyz("image", 2, lattice, "C 0 0 0\nC 5 0 0\n")));
  EXPECT_EQ(image.status, 1) << image.out;
  EXPECT_NE(image.out.find("atoms 0 (line 3 of "), std::string::npos) << image.out;
  EXPECT_NE(image.out.find("are coincident through the periodic image"), std::string::npos) << image.out;

  const Exec apart = eval(quote(kModel) + " " + quote(xyz("apart", 2, "", "C 0 0 0\nC 0 0 0.0000101\n")) + " --json");
  EXPECT_EQ(apart.status, 0) << apart.out;
}

// One atom in a 0.15 Å periodic cell: ~2.7e5 images within rcut, all one destination segment, so
// one tile of the value path needs ~8 GB. Under a 3 GB address-space limit the std::bad_alloc of
// that tile (thrown inside an OpenMP region) used to abort the process; now it is an error naming
// the step, the tile and the graph.
TEST(SezmEval, MemoryExhaustionIsAnError) {
  const std::string cell = xyz("tiny", 1, "Lattice=\"0.15 0 0 0 0.15 0 0 0 0.15\" pbc=\"T T T\"", "C 0 0 0\n");
  const Exec r = run("ulimit -v 3000000 && OMP_NUM_THREADS=2 " + quote(SEZM_EVAL_EXE) + " " + quote(kModel) + " " +
                     quote(cell));
  EXPECT_EQ(r.status, 1) << r.out;  // -1: killed by a signal (std::terminate)
  EXPECT_EQ(r.out.find("terminate called"), std::string::npos) << r.out;
  expect_contains(r.out, {"sezm-eval: ", "out of memory in ", "the graph has 1 atoms and ", "edges within rcut 6 Å",
                          "More than 10^4 neighbours of one atom: is the periodic cell much smaller than rcut"});
}

// 64 atoms in the same 0.15 Å cell: ~1.7e7 edges per atom, so the neighbour search itself runs out
// of a 1.5 GB limit; the error names the atom reached and the edges found (it used to be a bare
// "std::bad_alloc").
TEST(SezmEval, NeighbourListMemoryExhaustionIsAnError) {
  std::string atoms;
  for (int i = 0; i < 64; ++i)
    atoms += "C " + std::to_string(0.0375 * (i % 4)) + " " + std::to_string(0.0375 * (i / 4 % 4)) + " " +
             std::to_string(0.0375 * (i / 16)) + "\n";
  const std::string cell = xyz("dense", 64, "Lattice=\"0.15 0 0 0 0.15 0 0 0 0.15\" pbc=\"T T T\"", atoms);
  const Exec r = run("ulimit -v 1500000 && OMP_NUM_THREADS=1 " + quote(SEZM_EVAL_EXE) + " " + quote(kModel) + " " +
                     quote(cell));
  EXPECT_EQ(r.status, 1) << r.out;
  expect_contains(r.out, {"sezm-eval: neighbour list: out of memory at atom ", " of 64 after ",
                          " within rcut 6 Å; is the periodic cell much smaller than rcut?"});
}
