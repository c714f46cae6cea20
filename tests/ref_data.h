#pragma once
// Reader for deepmd-kit reference files (format: tests/data/recipes/README.md, "Schema").
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sezm::test {

struct RefConfig {
  std::string name;
  int natoms = 0;
  bool periodic = false;
  std::vector<double> cell, coords, forces, virial, atom_energy;
  // Optional: deepmd-kit's per-atom virials [9N] (tests/data/recipes/ref3_*.json); empty when absent.
  std::vector<double> atom_virial;
  // Optional (tests/data/recipes/README.md): the frame's [charge, spin] passed to deepmd-kit
  // (has_charge_spin false: none passed, the model's default applied) and 3.2.0's ZBL share of
  // the atomic energies (empty when absent).
  bool has_charge_spin = false;
  double charge = 0, spin = 0;
  std::vector<double> zbl_atom_energy;
  std::vector<int> types;
  double energy = 0;
  // Optional: the multi-task head deepmd-kit evaluated (tests/data/recipes/ref_multitask_*.json).
  std::string head;
};

struct RefFile {
  std::string model, precision;
  std::vector<std::string> type_map;
  std::vector<RefConfig> configs;
};

inline RefFile read_ref(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  RefFile r;
  r.model = j.at("model");
  r.precision = j.at("precision");
  r.type_map = j.at("type_map").get<std::vector<std::string>>();
  for (const auto& c : j.at("configs")) {
    RefConfig rc;
    rc.name = c.at("name");
    rc.natoms = c.at("natoms");
    rc.periodic = c.at("periodic");
    if (!c.at("cell").is_null()) rc.cell = c.at("cell").get<std::vector<double>>();
    rc.coords = c.at("coords").get<std::vector<double>>();
    rc.types = c.at("types").get<std::vector<int>>();
    rc.energy = c.at("energy");
    rc.forces = c.at("forces").get<std::vector<double>>();
    rc.virial = c.at("virial").get<std::vector<double>>();
    rc.atom_energy = c.at("atom_energy").get<std::vector<double>>();
    if (c.contains("atom_virial")) rc.atom_virial = c.at("atom_virial").get<std::vector<double>>();
    if (c.contains("head") && c.at("head").is_string()) rc.head = c.at("head");
    if (c.contains("charge_spin") && !c.at("charge_spin").is_null()) {
      rc.has_charge_spin = true;
      rc.charge = c.at("charge_spin").at(0);
      rc.spin = c.at("charge_spin").at(1);
    }
    if (c.contains("zbl_atom_energy")) rc.zbl_atom_energy = c.at("zbl_atom_energy").get<std::vector<double>>();
    r.configs.push_back(std::move(rc));
  }
  return r;
}

inline bool file_exists(const std::string& p) { return std::ifstream(p).good(); }

}  // namespace sezm::test
