// Standard LAMMPS plugin entry point: `plugin load sezm.so` (or sezmplugin.so found through
// LAMMPS_PLUGIN_PATH) in LAMMPS builds with the PLUGIN package, and the loader of lmp_sezm
// (SEZM_PLUGIN=...) for Debian's build without it.
#include <cstring>
#include <string>

#include "error.h"
#include "lammps.h"
#include "pair_sezm.h"
#include "sezm_plugin_abi.h"

using namespace LAMMPS_NS;

// The LAMMPS version this plugin is for; a test builds one that claims another (tests/lammps).
#ifndef SEZM_PLUGIN_BUILT_FOR
#define SEZM_PLUGIN_BUILT_FOR SEZM_LAMMPS_VERSION_STRING
#endif

static void *sezm_creator(void *lmp) { return new PairSezm(static_cast<LAMMPS *>(lmp)); }

extern "C" void lammpsplugin_init(void *lmp, void *handle, void *regfunc) {
  auto *host = static_cast<LAMMPS *>(lmp);
  // LAMMPS's loader only logs a version mismatch; a class-layout mismatch would corrupt
  // memory, so refuse it here with a clear message.
  if (std::strcmp(host->version, SEZM_PLUGIN_BUILT_FOR) != 0)
    host->error->all(FLERR, std::string("sezm plugin was built for LAMMPS ") + SEZM_PLUGIN_BUILT_FOR +
                                " but is being loaded into LAMMPS " + host->version + "; rebuild it against this LAMMPS");
  sezm_plugin_record plugin;
  plugin.version = SEZM_PLUGIN_BUILT_FOR;
  plugin.style = "pair";
  plugin.name = "sezm";
  plugin.info = "SeZM/DPA4 message-passing potential (native engine)";
  plugin.author = "sezm project";
  plugin.creator.v1 = &sezm_creator;
  plugin.handle = handle;
  (*(sezm_plugin_regfunc)regfunc)(&plugin, lmp);
}
