// lmp_sezm: a LAMMPS executable (liblammps) with pair_style sezm registered at start-up, for
// LAMMPS builds without the PLUGIN package (Debian's). Otherwise it behaves like `lmp`: the
// LAMMPS constructor parses -in, -var, -log, -screen, ...
//
// SEZM_PLUGIN=/path/sezm.so makes it register the style through that plugin's
// lammpsplugin_init instead (the same .so a PLUGIN-enabled LAMMPS would `plugin load`).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <exception>
#include <string>

#include "exceptions.h"
#include "force.h"
#include "input.h"
#include "lammps.h"
#include "pair_sezm.h"
#include "sezm_plugin_abi.h"

using namespace LAMMPS_NS;

static Pair *sezm_creator(LAMMPS *lmp) { return new PairSezm(lmp); }

static void register_plugin(sezm_plugin_record *p, void *lmp) {
  auto *l = static_cast<LAMMPS *>(lmp);
  if (std::string(p->style) == "pair") (*l->force->pair_map)[p->name] = (Force::PairCreator)p->creator.v1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  // LAMMPS >= 2023 always reports errors by throwing (error->all: LAMMPSException,
  // error->one: LAMMPSAbortException); Debian's 29Sep2021 build (no LAMMPS_EXCEPTIONS) exits
  // inside error->all instead and never gets here. Handled as LAMMPS's own main() does: the
  // message is already printed, so finish cleanly (all ranks) or abort (one rank).
  try {
    auto *lmp = new LAMMPS(argc, argv, MPI_COMM_WORLD);
    // Note: the `clear` command rebuilds Force and drops this registration.
    if (const char *so = std::getenv("SEZM_PLUGIN")) {
      void *h = dlopen(so, RTLD_NOW | RTLD_GLOBAL);
      auto init = h ? (sezm_plugin_initfunc)dlsym(h, "lammpsplugin_init") : nullptr;
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
  } catch (LAMMPSAbortException &) {
    // one rank failed: the others may be anywhere (lmp_sezm's universe is MPI_COMM_WORLD)
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  } catch (LAMMPSException &) {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 1;
  } catch (std::exception &e) {
    std::fprintf(stderr, "\nlmp_sezm: exception: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  MPI_Finalize();
  return 0;
}
