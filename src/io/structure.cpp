#include "io/structure.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

#include "common/error.h"

namespace sezm {
namespace {

using Tokens = std::vector<std::string>;

Tokens split(const std::string& s) {
  Tokens out;
  size_t i = 0;
  while (true) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i == s.size()) return out;
    const size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    out.push_back(s.substr(start, i - start));
  }
}

std::string join(const Tokens& t, size_t from = 0) {
  std::string out;
  for (size_t i = from; i < t.size(); ++i) out += (i > from ? " " : "") + t[i];
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A text file split into lines, and error reporting against it as "<path>:<line>: ...".
class TextFile {
 public:
  explicit TextFile(std::string path) : path_(std::move(path)) {
    std::ifstream in(path_);
    if (!in) throw Error("cannot open structure file '" + path_ + "'");
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines_.push_back(std::move(line));
    }
  }
  size_t size() const { return lines_.size(); }
  // 1-based line numbers throughout, as printed.
  const std::string& line(size_t number) const { return lines_[number - 1]; }

  [[noreturn]] void fail(size_t number, const std::string& what) const {
    throw Error(path_ + ":" + std::to_string(number) + ": " + what);
  }

  // Locale-independent parsing (std::from_chars) of a whole token; `what` names the field.
  double real(const std::string& tok, size_t number, const std::string& what) const {
    const char* first = tok.data() + (tok.size() > 1 && tok[0] == '+');
    double v = 0;
    const auto [end, ec] = std::from_chars(first, tok.data() + tok.size(), v);
    if (ec != std::errc() || end != tok.data() + tok.size() || !std::isfinite(v)) {
      fail(number, "expected a finite number for " + what + ", got '" + tok + "'");
    }
    return v;
  }
  long long integer(const std::string& tok, size_t number, const std::string& what) const {
    const char* first = tok.data() + (tok.size() > 1 && tok[0] == '+');
    long long v = 0;
    const auto [end, ec] = std::from_chars(first, tok.data() + tok.size(), v);
    if (ec != std::errc() || end != tok.data() + tok.size()) {
      fail(number, "expected an integer for " + what + ", got '" + tok + "'");
    }
    return v;
  }

 private:
  std::string path_;
  std::vector<std::string> lines_;
};

// ---------------------------------------------------------------- LAMMPS data

// LAMMPS data lines carry comments after '#'; `comment` receives that part, if asked.
Tokens data_tokens(const std::string& line, std::string* comment = nullptr) {
  const size_t hash = line.find('#');
  if (comment) *comment = hash == std::string::npos ? "" : line.substr(hash + 1);
  return split(line.substr(0, hash));
}

// Header and body lines start with a number; section keywords ("Atoms", "Masses") do not.
bool starts_numeric(const Tokens& t) {
  return !t.empty() && (std::isdigit(static_cast<unsigned char>(t[0][0])) ||
                        t[0][0] == '-' || t[0][0] == '+' || t[0][0] == '.');
}

bool ends_with(const Tokens& t, const Tokens& suffix) {
  return t.size() >= suffix.size() && std::equal(suffix.begin(), suffix.end(), t.end() - suffix.size());
}

struct DataHeader {
  std::optional<long long> natoms, ntypes;
  size_t ntypes_line = 0;
  std::array<std::optional<std::pair<double, double>>, 3> bounds;  // lo, hi per axis
  std::array<double, 3> tilt{0, 0, 0};                              // xy xz yz
};

// Parses header lines from line 2 (line 1 is the title); returns the first section line
// (size() + 1 when the file has no sections).
size_t parse_data_header(const TextFile& f, DataHeader* h) {
  static const std::array<Tokens, 3> kBoxWords{Tokens{"xlo", "xhi"}, Tokens{"ylo", "yhi"}, Tokens{"zlo", "zhi"}};
  size_t n = 2;
  for (; n <= f.size(); ++n) {
    const Tokens t = data_tokens(f.line(n));
    if (t.empty()) continue;
    if (!starts_numeric(t)) break;
    if (t.size() == 2 && t[1] == "atoms") {
      h->natoms = f.integer(t[0], n, "the atom count");
      if (*h->natoms < 0) f.fail(n, "negative atom count");
      continue;
    }
    if (t.size() == 3 && t[1] == "atom" && t[2] == "types") {
      h->ntypes = f.integer(t[0], n, "the atom type count");
      if (*h->ntypes < 1) f.fail(n, "expected at least 1 atom type, got " + t[0]);
      h->ntypes_line = n;
      continue;
    }
    bool box = false;
    for (int k = 0; k < 3; ++k) {
      if (t.size() == 4 && ends_with(t, kBoxWords[k])) {
        const double lo = f.real(t[0], n, kBoxWords[k][0]);
        const double hi = f.real(t[1], n, kBoxWords[k][1]);
        if (!(hi > lo)) f.fail(n, "expected " + join(kBoxWords[k]) + " with hi > lo");
        h->bounds[k] = std::make_pair(lo, hi);
        box = true;
      }
    }
    if (box) continue;
    if (t.size() == 6 && ends_with(t, {"xy", "xz", "yz"})) {
      for (int k = 0; k < 3; ++k) h->tilt[k] = f.real(t[k], n, t[3 + k]);
      continue;
    }
    // "<count> <words>" lines (bonds, angles, extra ... per atom) do not concern atom_style
    // atomic; anything else is not a header line we understand.
    if (t.size() >= 2 && std::none_of(t.begin() + 1, t.end(), [](const std::string& w) {
          return starts_numeric(Tokens{w});
        })) {
      f.integer(t[0], n, "the count of '" + join(t, 1) + "'");
      continue;
    }
    f.fail(n, "unrecognised header line '" + join(t) +
                  "' (expected 'N atoms', 'N atom types', 'lo hi xlo xhi' or 'xy xz yz' lines)");
  }
  if (!h->natoms) f.fail(n, "the header has no 'N atoms' line");
  if (!h->ntypes) f.fail(n, "the header has no 'N atom types' line");
  for (int k = 0; k < 3; ++k) {
    if (!h->bounds[k]) f.fail(n, "the header has no '" + join(kBoxWords[k]) + "' box line");
  }
  return n;
}

}  // namespace

Structure read_lammps_data(const std::string& path, const std::vector<std::string>& elements) {
  const TextFile f(path);
  if (f.size() == 0) f.fail(1, "empty file; expected a LAMMPS data file");
  DataHeader h;
  size_t n = parse_data_header(f, &h);
  if (elements.empty() || static_cast<long long>(elements.size()) != *h.ntypes) {
    f.fail(h.ntypes_line, "the data file has " + std::to_string(*h.ntypes) + " atom types but " +
                              std::to_string(elements.size()) +
                              " element names were given; pass --elements with one symbol per "
                              "atom type, in type order (e.g. --elements C Cu)");
  }

  Structure s;
  s.periodic = true;
  const double lx = h.bounds[0]->second - h.bounds[0]->first;
  const double ly = h.bounds[1]->second - h.bounds[1]->first;
  const double lz = h.bounds[2]->second - h.bounds[2]->first;
  s.cell = {lx, 0, 0, h.tilt[0], ly, 0, h.tilt[1], h.tilt[2], lz};

  struct Atom {
    long long id;
    size_t line;
    int type;
    std::array<double, 3> r;
  };
  std::vector<Atom> atoms;
  bool have_atoms = false;
  while (n <= f.size()) {
    std::string comment;
    const Tokens title = data_tokens(f.line(n), &comment);
    const size_t title_line = n++;
    if (title.empty()) continue;
    // The body runs to the next section keyword; blank lines inside it are harmless.
    std::vector<std::pair<size_t, Tokens>> body;
    for (; n <= f.size(); ++n) {
      Tokens t = data_tokens(f.line(n));
      if (t.empty()) continue;
      if (!starts_numeric(t)) break;
      body.emplace_back(n, std::move(t));
    }
    if (join(title) != "Atoms") continue;  // Masses, Velocities, ...: not needed

    if (have_atoms) f.fail(title_line, "second Atoms section");
    have_atoms = true;
    const Tokens style = split(comment);
    if (!style.empty() && style[0] != "atomic") {
      f.fail(title_line, "only atom_style atomic is supported, the Atoms section is marked '# " +
                             style[0] + "'");
    }
    if (static_cast<long long>(body.size()) != *h.natoms) {
      f.fail(title_line, "the Atoms section has " + std::to_string(body.size()) +
                             " lines but the header declares " + std::to_string(*h.natoms) + " atoms");
    }
    for (const auto& [line, t] : body) {
      if (t.size() != 5 && t.size() != 8) {
        f.fail(line, "expected 5 or 8 columns in Atoms section (id type x y z [ix iy iz]), got " +
                         std::to_string(t.size()));
      }
      Atom a{f.integer(t[0], line, "the atom id"), line, 0, {}};
      const long long type = f.integer(t[1], line, "the atom type");
      if (type < 1 || type > *h.ntypes) {
        f.fail(line, "atom type " + t[1] + " is outside 1.." + std::to_string(*h.ntypes));
      }
      a.type = static_cast<int>(type);
      for (int k = 0; k < 3; ++k) a.r[k] = f.real(t[2 + k], line, std::string(1, "xyz"[k]));
      if (t.size() == 8) {
        for (int m = 0; m < 3; ++m) {
          const auto image = static_cast<double>(f.integer(t[5 + m], line, "an image flag"));
          for (int k = 0; k < 3; ++k) a.r[k] += image * s.cell[3 * m + k];
        }
      }
      atoms.push_back(a);
    }
  }
  if (!have_atoms && *h.natoms > 0) f.fail(f.size(), "the file ends without an Atoms section");

  std::stable_sort(atoms.begin(), atoms.end(), [](const Atom& x, const Atom& y) { return x.id < y.id; });
  for (size_t i = 1; i < atoms.size(); ++i) {
    if (atoms[i].id == atoms[i - 1].id) {
      const auto& [first, second] = std::minmax(atoms[i].line, atoms[i - 1].line);
      f.fail(second, "duplicate atom id " + std::to_string(atoms[i].id) + " (also on line " +
                         std::to_string(first) + ")");
    }
  }
  for (const Atom& a : atoms) {
    s.positions.insert(s.positions.end(), a.r.begin(), a.r.end());
    s.species.push_back(elements[a.type - 1]);
    s.lines.push_back(a.line);
  }
  return s;
}

// ---------------------------------------------------------------- extended XYZ

namespace {

// key=value pairs of an extxyz comment line, keys lower-cased; values may be "quoted" or
// {braced}. Words without '=' (a plain XYZ title) are ignored.
std::vector<std::pair<std::string, std::string>> comment_pairs(const TextFile& f, size_t number) {
  const std::string& s = f.line(number);
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  const auto space = [&s](size_t k) { return std::isspace(static_cast<unsigned char>(s[k])); };
  while (i < s.size()) {
    while (i < s.size() && space(i)) ++i;
    const size_t key_start = i;
    while (i < s.size() && !space(i) && s[i] != '=') ++i;
    std::string key = lower(s.substr(key_start, i - key_start));
    if (i == s.size() || s[i] != '=') continue;  // a bare word
    ++i;
    std::string value;
    if (i < s.size() && (s[i] == '"' || s[i] == '{')) {
      const char close = s[i] == '"' ? '"' : '}';
      const size_t end = s.find(close, i + 1);
      if (end == std::string::npos) f.fail(number, "unterminated value of key '" + key + "'");
      value = s.substr(i + 1, end - i - 1);
      i = end + 1;
    } else {
      const size_t start = i;
      while (i < s.size() && !space(i)) ++i;
      value = s.substr(start, i - start);
    }
    if (!key.empty()) out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

// Column layout of the atom lines: where species and pos are, how many columns in all.
struct Columns {
  size_t species = 0, pos = 1, count = 4;
  bool exact = false;  // declared by Properties: the count must match
};

Columns parse_properties(const TextFile& f, const std::string& value) {
  std::string spec = value;
  std::replace(spec.begin(), spec.end(), ':', ' ');
  const Tokens t = split(spec);
  if (t.empty() || t.size() % 3 != 0) {
    f.fail(2, "expected Properties as name:type:count triples, got '" + value + "'");
  }
  Columns c;
  c.count = 0;
  c.exact = true;
  bool species = false, pos = false;
  for (size_t p = 0; p < t.size(); p += 3) {
    const long long width = f.integer(t[p + 2], 2, "the column count of property '" + t[p] + "'");
    if (width < 1) f.fail(2, "property '" + t[p] + "' has no columns");
    const std::string name = lower(t[p]);
    if (name == "species") {
      if (t[p + 1] != "S" || width != 1) f.fail(2, "expected species:S:1 in Properties, got '" + t[p] + ":" + t[p + 1] + ":" + t[p + 2] + "'");
      c.species = c.count;
      species = true;
    } else if (name == "pos") {
      if (t[p + 1] != "R" || width != 3) f.fail(2, "expected pos:R:3 in Properties, got '" + t[p] + ":" + t[p + 1] + ":" + t[p + 2] + "'");
      c.pos = c.count;
      pos = true;
    }
    c.count += static_cast<size_t>(width);
  }
  if (!species) f.fail(2, "Properties has no species column: '" + value + "'");
  if (!pos) f.fail(2, "Properties has no pos column: '" + value + "'");
  return c;
}

// pbc="T T T" -> true, "F F F" -> false; mixed periodicity is refused.
bool parse_pbc(const TextFile& f, const std::string& value) {
  const Tokens t = split(value);
  int periodic = 0;
  for (const std::string& w : t) {
    const std::string v = lower(w);
    if (v == "t" || v == "true") {
      ++periodic;
    } else if (v != "f" && v != "false") {
      f.fail(2, "expected pbc as three T/F flags, got '" + value + "'");
    }
  }
  if (t.size() != 3) f.fail(2, "expected pbc as three T/F flags, got '" + value + "'");
  if (periodic != 0 && periodic != 3) {
    f.fail(2, "pbc=\"" + value + "\": mixed periodicity is not supported; the system must be "
                                 "periodic in all three directions (\"T T T\") or open (\"F F F\")");
  }
  return periodic == 3;
}

}  // namespace

Structure read_extxyz(const std::string& path) {
  const TextFile f(path);
  if (f.size() == 0) f.fail(1, "empty file; expected the atom count of an XYZ file");
  const Tokens first = split(f.line(1));
  if (first.size() != 1) f.fail(1, "expected the atom count alone on the first line, got '" + f.line(1) + "'");
  const long long natoms = f.integer(first[0], 1, "the atom count");
  if (natoms < 0) f.fail(1, "negative atom count");
  if (f.size() < 2) f.fail(1, "the file ends before the comment line");

  Structure s;
  Columns cols;
  std::optional<std::array<double, 9>> lattice;
  std::optional<bool> pbc;
  for (const auto& [key, value] : comment_pairs(f, 2)) {
    if (key == "lattice") {
      const Tokens t = split(value);
      if (t.size() != 9) f.fail(2, "expected 9 numbers in Lattice, got " + std::to_string(t.size()));
      lattice.emplace();
      for (int k = 0; k < 9; ++k) (*lattice)[k] = f.real(t[k], 2, "Lattice");
    } else if (key == "properties") {
      cols = parse_properties(f, value);
    } else if (key == "pbc") {
      pbc = parse_pbc(f, value);
    }
  }
  // As in ASE: a Lattice without pbc means periodic.
  if (pbc.value_or(true) && lattice) {
    s.periodic = true;
    s.cell = *lattice;
  } else if (pbc.value_or(false)) {
    f.fail(2, "pbc is periodic but there is no Lattice=\"ax ay az bx by bz cx cy cz\"");
  }

  for (long long i = 0; i < natoms; ++i) {
    const size_t line = 3 + static_cast<size_t>(i);
    if (line > f.size()) {
      f.fail(f.size(), "expected " + std::to_string(natoms) + " atom lines, the file ends after " +
                           std::to_string(i));
    }
    const Tokens t = split(f.line(line));
    if (cols.exact ? t.size() != cols.count : t.size() < cols.count) {
      f.fail(line, "expected " + std::string(cols.exact ? "" : "at least ") + std::to_string(cols.count) +
                       " columns (species and x y z" + (cols.exact ? " as declared by Properties" : "") +
                       "), got " + std::to_string(t.size()));
    }
    const std::string& sym = t[cols.species];
    if (!std::isalpha(static_cast<unsigned char>(sym[0]))) {
      f.fail(line, "expected an element symbol in column " + std::to_string(cols.species + 1) +
                       ", got '" + sym + "'");
    }
    s.species.push_back(sym);
    s.lines.push_back(line);
    for (int k = 0; k < 3; ++k) {
      s.positions.push_back(f.real(t[cols.pos + k], line, std::string(1, "xyz"[k])));
    }
  }
  // Only the first frame is read, but a count smaller than the atom lines is a truncated frame,
  // not a second one: what follows the N atom lines must be blank or the next frame's count.
  for (size_t line = 3 + static_cast<size_t>(natoms); line <= f.size(); ++line) {
    const Tokens t = split(f.line(line));
    if (t.empty()) continue;
    long long next = 0;
    const auto [end, ec] = std::from_chars(t[0].data(), t[0].data() + t[0].size(), next);
    if (t.size() != 1 || ec != std::errc() || end != t[0].data() + t[0].size() || next < 0) {
      f.fail(line, "more atom lines than the " + std::to_string(natoms) +
                       " declared on line 1 (or a second frame without its atom count); fix the count");
    }
    break;
  }
  return s;
}

Structure read_structure(const std::string& path, const std::vector<std::string>& elements) {
  const std::string ext = lower(std::filesystem::path(path).extension().string());
  if (ext == ".xyz" || ext == ".extxyz") {
    // Element names for an XYZ file would be ignored silently: refuse them (docs/errors.md).
    if (!elements.empty())
      throw Error(path + ": an XYZ file names the species of its atoms; element names for LAMMPS types "
                         "(--elements) apply to LAMMPS data files only: drop them");
    return read_extxyz(path);
  }
  return read_lammps_data(path, elements);
}

}  // namespace sezm
