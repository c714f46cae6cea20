#pragma once
#include <stdexcept>
#include <string>

namespace sezm {

// Every user-facing failure (bad file, unsupported option, bad input) is a sezm::Error whose
// message names the cause; front ends (CLI, pair style) print it verbatim.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A run-time error about one atom or a pair of atoms (docs/errors.md, "Run time"), by index in the
// caller's order (the standalone neighbour search: the positions' order; the LAMMPS edge layer:
// local indices). what() reads "<where>: atom i <reason>" or "<where>: atoms i and j <reason>";
// a front end with better names for atoms (LAMMPS atom IDs, file lines) rebuilds the message from
// reason() and the indices.
class AtomError : public Error {
 public:
  AtomError(const std::string& where, const std::string& reason, int atom, int other = -1)
      : Error(where + ": " +
              (other < 0 ? "atom " + std::to_string(atom)
                         : "atoms " + std::to_string(atom) + " and " + std::to_string(other)) +
              " " + reason),
        reason_(reason),
        atom_(atom),
        other_(other) {}
  const std::string& reason() const { return reason_; }
  int atom() const { return atom_; }
  int other() const { return other_; }  // -1 for a single atom

 private:
  std::string reason_;
  int atom_, other_;
};

}  // namespace sezm
