#pragma once
// Structure readers for the CLI: LAMMPS data files (atom_style atomic) and (extended) XYZ.
// Every malformed input is a sezm::Error of the form "<file>:<line>: <what was expected>".
#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace sezm {

struct Structure {
  std::vector<double> positions;          // 3N, Å
  std::vector<std::string> species;       // N element symbols
  bool periodic = false;
  std::array<double, 9> cell{};           // rows = lattice vectors (valid if periodic)
  std::vector<size_t> lines;              // N: the file line of each atom (1-based), for errors
  size_t size() const { return species.size(); }
};

// LAMMPS data file (atom_style atomic: "id type x y z" lines, optional image flags "ix iy iz"
// which are applied: r += ix*a + iy*b + iz*c), orthogonal or triclinic (xlo xhi, ylo yhi,
// zlo zhi, optional "xy xz yz" tilt line; cell rows a=(lx,0,0), b=(xy,ly,0), c=(xz,yz,lz)).
// The box is taken as periodic in all directions. Masses, Velocities and other sections are
// skipped; an Atoms section marked with a style other than "# atomic" is refused. Types
// 1..ntypes map to elements[type-1]; elements must hold exactly ntypes symbols (the error
// says to pass --elements). Atoms are returned sorted by id; positions are as written
// (not shifted by xlo/ylo/zlo, not wrapped).
Structure read_lammps_data(const std::string& path, const std::vector<std::string>& elements);

// Extended XYZ: line 1 = N, line 2 = comment with key=value pairs, e.g.
// Lattice="ax ay az bx by bz cx cy cz" Properties=species:S:1:pos:R:3 pbc="T T T"; without
// Lattice (or with pbc="F F F") the system is open; mixed pbc is refused. The species and pos
// columns are located through Properties, which may declare further columns (forces etc.);
// every atom line must then have exactly the declared column count. Without Properties the
// columns are "species x y z" and extra trailing columns are ignored (plain XYZ). Only the
// first frame is read; after its N atom lines only blank lines or the next frame's count may
// follow (more atom lines than N are an error, not a silently shorter structure).
Structure read_extxyz(const std::string& path);

// By extension: ".xyz"/".extxyz" (any case) -> read_extxyz (the file names its species: non-empty
// elements are an error); anything else -> read_lammps_data.
Structure read_structure(const std::string& path, const std::vector<std::string>& elements);

}  // namespace sezm
