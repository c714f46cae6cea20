// lmp_sezm: Debian's LAMMPS (no PLUGIN package) with pair_style sezm registered at start-up.
// Otherwise it behaves like `lmp`: the LAMMPS constructor parses -in, -var, -log, -screen, ...
//
// SEZM_PLUGIN=/path/sezm.so makes it register the style through that plugin's
// lammpsplugin_init instead (the same .so a PLUGIN-enabled LAMMPS would `plugin load`).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>

#include "force.h"
#include "input.h"
#include "lammps.h"
#include "lammpsplugin.h"
#include "pair_sezm.h"

using namespace LAMMPS_NS;

static Pair *sezm_creator(LAMMPS *lmp) { return new PairSezm(lmp); }

static void register_plugin(lammpsplugin_t *p, void *lmp) {
  auto *l = static_cast<LAMMPS *>(lmp);
  if (std::string(p->style) == "pair") (*l->force->pair_map)[p->name] = (Force::PairCreator)p->creator.v1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  auto *lmp = new LAMMPS(argc, argv, MPI_COMM_WORLD);
  // Note: the `clear` command rebuilds Force and drops this registration.
  if (const char *so = std::getenv("SEZM_PLUGIN")) {
    void *h = dlopen(so, RTLD_NOW | RTLD_GLOBAL);
    auto init = h ? (lammpsplugin_initfunc)dlsym(h, "lammpsplugin_init") : nullptr;
    if (!init) {
      std::fprintf(stderr, "lmp_sezm: cannot load plugin %s: %s\n", so, dlerror());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    init(lmp, h, (void *)&register_plugin);
  } else {
    (*lmp->force->pair_map)["sezm"] = &sezm_creator;
  }
  lmp->input->file();
  delete lmp;
  MPI_Finalize();
  return 0;
}
