// Structure readers: LAMMPS data and (extended) XYZ files written to a scratch directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/error.h"
#include "io/structure.h"

namespace sezm {
namespace {

namespace fs = std::filesystem;

class StructureFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sezm_structure_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  // The call must throw a sezm::Error whose message holds every one of `parts`.
  static void expect_error(const std::function<void()>& call, const std::vector<std::string>& parts) {
    try {
      call();
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const std::string& part : parts) {
        EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
      }
      return;
    }
    ADD_FAILURE() << "no sezm::Error thrown";
  }

  fs::path dir_;
};

const std::vector<std::string> kCCu{"C", "Cu"};

// Header on lines 1-7, an empty Masses section, "Atoms" on line 11, atom lines from line 13.
std::string data_file(const std::string& atoms_lines, const std::string& box = "0.0 10.0 xlo xhi\n") {
  return "LAMMPS data file written by a test\n"
         "\n"
         "3 atoms\n"
         "2 atom types\n" +
         box +
         "-1.0 9.0 ylo yhi\n"
         "0.5 12.5 zlo zhi\n"
         "\n"
         "Masses\n"
         "\n"
         "Atoms # atomic\n"
         "\n" +
         atoms_lines;
}

TEST_F(StructureFiles, OrthogonalDataFile) {
  const std::string path = write("ortho.data",
                                 "title\n\n3 atoms\n2 atom types\n0 bonds\n0 bond types\n"
                                 "0.0 10.0 xlo xhi\n-1.0 9.0 ylo yhi\n0.5 12.5 zlo zhi\n\n"
                                 "Masses\n\n1 12.011 # C\n2 63.546\n\n"
                                 "Atoms # atomic\n\n"
                                 "3 2 7.0 8.0 9.0\n"
                                 "1 1 1.0 2.0 3.0  # first\n"
                                 "2 1 4.0 5.0 6.0\n\n"
                                 "Velocities\n\n1 0.1 0.2 0.3\n2 0 0 0\n3 0 0 0\n");
  const Structure s = read_lammps_data(path, kCCu);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_TRUE(s.periodic);
  EXPECT_EQ(s.species, (std::vector<std::string>{"C", "C", "Cu"}));
  EXPECT_EQ(s.positions, (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(s.cell, (std::array<double, 9>{10, 0, 0, 0, 10, 0, 0, 0, 12}));
}

TEST_F(StructureFiles, TriclinicDataFileWithImageFlags) {
  const std::string path = write("tri.lmp",
                                 "title\n2 atoms\n1 atom types\n"
                                 "0 4 xlo xhi\n0 5 ylo yhi\n0 6 zlo zhi\n0.5 -0.25 1.5 xy xz yz\n\n"
                                 "Atoms\n\n"
                                 "1 1 0.1 0.2 0.3 0 0 0\n"
                                 "2 1 1.0 1.0 1.0 1 -1 2\n");
  const Structure s = read_lammps_data(path, {"Cu"});
  const std::array<double, 9> cell{4, 0, 0, 0.5, 5, 0, -0.25, 1.5, 6};
  EXPECT_EQ(s.cell, cell);
  // r = (1,1,1) + 1·a - 1·b + 2·c
  const std::vector<double> want{0.1, 0.2, 0.3, 1 + 4 - 0.5 - 0.5, 1 - 5 + 3, 1 + 12};
  ASSERT_EQ(s.positions.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_DOUBLE_EQ(s.positions[k], want[k]) << k;
  EXPECT_EQ(s.species, (std::vector<std::string>{"Cu", "Cu"}));
}

TEST_F(StructureFiles, DataFileErrorsNameFileAndLine) {
  const std::string good = "1 1 0 0 0\n2 1 1 1 1\n3 2 2 2 2\n";
  const auto read = [](const std::string& p, std::vector<std::string> el = kCCu) {
    return [p, el] { read_lammps_data(p, el); };
  };
  expect_error(read(write("cols.lmp", data_file("1 1 0 0 0\n2 1 1 1\n3 2 2 2 2\n"))),
               {"cols.lmp:14:", "expected 5 or 8 columns in Atoms section", "got 4"});
  expect_error(read(write("count.lmp", data_file("1 1 0 0 0\n2 1 1 1 1\n"))),
               {"count.lmp:11:", "2 lines", "3 atoms"});
  expect_error(read(write("type.lmp", data_file("1 1 0 0 0\n2 3 1 1 1\n3 2 2 2 2\n"))),
               {"type.lmp:14:", "atom type 3", "1..2"});
  expect_error(read(write("dup.lmp", data_file("1 1 0 0 0\n2 1 1 1 1\n1 2 2 2 2\n"))),
               {"dup.lmp:15:", "duplicate atom id 1", "line 13"});
  expect_error(read(write("nan.lmp", data_file("1 1 0 0 0\n2 1 1 abc 1\n3 2 2 2 2\n"))),
               {"nan.lmp:14:", "expected a finite number for y", "'abc'"});
  expect_error(read(write("flag.lmp", data_file("1 1 0 0 0 0 0 0.5\n2 1 1 1 1\n3 2 2 2 2\n"))),
               {"flag.lmp:13:", "integer for an image flag"});
  expect_error(read(write("box.lmp", data_file(good, ""))), {"box.lmp:8:", "'xlo xhi' box line"});
  expect_error(read(write("hdr.lmp", data_file(good, "0 10 xlo xhi\n1 2 3 foo\n"))),
               {"hdr.lmp:6:", "unrecognised header line"});
  expect_error(read(write("full.lmp", "t\n1 atoms\n1 atom types\n0 1 xlo xhi\n0 1 ylo yhi\n"
                                      "0 1 zlo zhi\nAtoms # full\n\n1 1 1 0 0 0 0\n"),
                    {"Cu"}),
               {"full.lmp:7:", "atom_style atomic"});
  const std::string ok = write("ok.lmp", data_file(good));
  expect_error(read(ok, {}), {"ok.lmp:4:", "--elements"});
  expect_error(read(ok, {"C"}), {"ok.lmp:4:", "--elements", "2 atom types"});
  expect_error(read(dir_.string() + "/missing.lmp"), {"missing.lmp", "cannot open"});
  EXPECT_EQ(read_lammps_data(ok, kCCu).size(), 3u);
}

TEST_F(StructureFiles, ExtxyzWithLatticeAndExtraColumns) {
  const std::string path = write(
      "cell.extxyz",
      "2\n"
      "Lattice=\"5.0 0.0 0.0 1.0 6.0 0.0 0.5 0.5 7.0\" "
      "Properties=id:I:1:pos:R:3:species:S:1:forces:R:3 energy=-3.5 pbc=\"T T T\"\n"
      "1 0.1 0.2 0.3 C 0.0 0.0 0.0\n"
      "2 -1.5 2.5 8.0 Cu 1.0 -1.0 2.0\n"
      "1\nsecond frame, ignored\nH 0 0 0\n");
  const Structure s = read_extxyz(path);
  EXPECT_TRUE(s.periodic);
  EXPECT_EQ(s.cell, (std::array<double, 9>{5, 0, 0, 1, 6, 0, 0.5, 0.5, 7}));
  EXPECT_EQ(s.species, (std::vector<std::string>{"C", "Cu"}));
  EXPECT_EQ(s.positions, (std::vector<double>{0.1, 0.2, 0.3, -1.5, 2.5, 8.0}));
}

TEST_F(StructureFiles, PlainAndOpenXyz) {
  // Plain XYZ: a free-text title, extra trailing columns ignored.
  const Structure plain = read_extxyz(write("water.xyz",
                                            "3\n  water molecule, from somewhere  \n"
                                            "O 0.0 0.0 0.0\nH 0.96 0.0 0.0 0.1\nH -0.24 0.93 0.0\n"));
  EXPECT_FALSE(plain.periodic);
  EXPECT_EQ(plain.species, (std::vector<std::string>{"O", "H", "H"}));
  EXPECT_EQ(plain.positions, (std::vector<double>{0, 0, 0, 0.96, 0, 0, -0.24, 0.93, 0}));

  const Structure open = read_extxyz(write("open.extxyz",
                                           "1\nProperties=species:S:1:pos:R:3:forces:R:3 energy=1\n"
                                           "Cu 1 2 3 0 0 0\n"));
  EXPECT_FALSE(open.periodic);
  EXPECT_EQ(open.positions, (std::vector<double>{1, 2, 3}));

  // A Lattice with pbc="F F F" is an open system too.
  const Structure f = read_extxyz(write("fff.xyz", "1\nLattice=\"3 0 0 0 3 0 0 0 3\" pbc=\"F F F\"\nC 0 0 0\n"));
  EXPECT_FALSE(f.periodic);
}

TEST_F(StructureFiles, ExtxyzErrorsNameFileAndLine) {
  const auto read = [](const std::string& p) { return [p] { read_extxyz(p); }; };
  const std::string lattice = "Lattice=\"3 0 0 0 3 0 0 0 3\" ";
  expect_error(read(write("mixed.xyz", "1\n" + lattice + "pbc=\"T T F\"\nC 0 0 0\n")),
               {"mixed.xyz:2:", "mixed periodicity", "T T F"});
  expect_error(read(write("cols.xyz", "2\n" + lattice + "Properties=species:S:1:pos:R:3:forces:R:3\n"
                                                        "C 0 0 0 1 1 1\nC 1 1 1\n")),
               {"cols.xyz:4:", "expected 7 columns", "got 4"});
  expect_error(read(write("num.xyz", "1\n\nC 0 x 0\n")), {"num.xyz:3:", "for y", "'x'"});
  expect_error(read(write("short.xyz", "3\n\nC 0 0 0\nC 1 1 1\n")),
               {"short.xyz:4:", "expected 3 atom lines", "after 2"});
  expect_error(read(write("count.xyz", "two\n\n")), {"count.xyz:1:", "atom count"});
  expect_error(read(write("lat.xyz", "1\nLattice=\"3 0 0 0 3 0 0 0\"\nC 0 0 0\n")),
               {"lat.xyz:2:", "9 numbers in Lattice"});
  expect_error(read(write("props.xyz", "1\nProperties=species:S:1:positions:R:3\nC 0 0 0\n")),
               {"props.xyz:2:", "no pos column"});
  expect_error(read(write("sym.xyz", "1\n\n6 0 0 0\n")), {"sym.xyz:3:", "element symbol"});
  expect_error(read(write("pbc.xyz", "1\npbc=\"T T T\"\nC 0 0 0\n")), {"pbc.xyz:2:", "no Lattice"});
  expect_error(read(dir_.string() + "/nothere.xyz"), {"nothere.xyz", "cannot open"});
}

TEST_F(StructureFiles, ReadStructureDispatchesByExtension) {
  const std::string xyz = "1\n\nC 1 2 3\n";
  EXPECT_FALSE(read_structure(write("a.xyz", xyz), {}).periodic);
  EXPECT_EQ(read_structure(write("b.EXTXYZ", xyz), {}).species, std::vector<std::string>{"C"});
  const Structure d = read_structure(write("c.data", data_file("1 1 0 0 0\n2 1 1 1 1\n3 2 2 2 2\n")), kCCu);
  EXPECT_TRUE(d.periodic);
  EXPECT_EQ(d.size(), 3u);
}

}  // namespace
}  // namespace sezm
