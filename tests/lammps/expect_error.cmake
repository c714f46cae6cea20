# Runs CMD (a ;-list) and passes when it exits non-zero, prints a line matching REGEX and shows
# no sign of a crash (a run expected to succeed: expect_run.cmake).
# error->all() exits the process in Debian's LAMMPS (no LAMMPS_EXCEPTIONS) and throws in
# newer LAMMPS (lmp_sezm catches it as LAMMPS's main() does), so error paths are tested out
# of process; "terminate called" means an exception escaped.
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 500)
set(all "${out}${err}")
if(all MATCHES "Segmentation|signal [0-9]|core dumped|terminate called|Abort")
  message(FATAL_ERROR "crashed (exit ${rc}):\n${all}")
endif()
if(rc EQUAL 0)
  # OK_REGEX: a host where this is no error (device cuda on a host with a usable GPU) passes when
  # the run printed a line matching it (the engine it ran on), so the full ctest passes there too.
  if(DEFINED OK_REGEX AND all MATCHES "${OK_REGEX}")
    string(REGEX MATCH "${OK_REGEX}[^\n]*" line "${all}")
    message(STATUS "exit 0 on a host where this succeeds: ${line}")
    return()
  endif()
  message(FATAL_ERROR "expected a failure, got exit status 0:\n${all}")
endif()
if(NOT all MATCHES "${REGEX}")
  message(FATAL_ERROR "exit ${rc} but no message matching '${REGEX}':\n${all}")
endif()
string(REGEX MATCH "ERROR[^\n]*" line "${all}")
message(STATUS "exit ${rc}: ${line}")
