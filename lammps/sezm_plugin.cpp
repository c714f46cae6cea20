// Standard LAMMPS plugin entry point: `plugin load sezm.so` in LAMMPS builds with the PLUGIN
// package, and the loader of lmp_sezm (SEZM_PLUGIN=...) for Debian's build without it.
#include <cstring>
#include <string>

#include "error.h"
#include "lammps.h"
#include "lammpsplugin.h"
#include "pair_sezm.h"
#include "version.h"

using namespace LAMMPS_NS;

static Pair *sezm_creator(LAMMPS *lmp) { return new PairSezm(lmp); }

extern "C" void lammpsplugin_init(void *lmp, void *handle, void *regfunc) {
  auto *host = static_cast<LAMMPS *>(lmp);
  // LAMMPS's loader only logs a version mismatch; a class-layout mismatch would corrupt
  // memory, so refuse it here with a clear message.
  if (std::strcmp(host->version, LAMMPS_VERSION) != 0)
    host->error->all(FLERR, std::string("sezm plugin was built for LAMMPS ") + LAMMPS_VERSION +
                                " but is being loaded into LAMMPS " + host->version + "; rebuild it against this LAMMPS");
  lammpsplugin_t plugin;
  plugin.version = LAMMPS_VERSION;
  plugin.style = "pair";
  plugin.name = "sezm";
  plugin.info = "SeZM/DPA4 message-passing potential (native engine)";
  plugin.author = "sezm project";
  plugin.creator.v1 = (lammpsplugin_factory1 *)&sezm_creator;
  plugin.handle = handle;
  (*(lammpsplugin_regfunc)regfunc)(&plugin, lmp);
}
