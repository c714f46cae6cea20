#pragma once
// Running the command-line front ends as a user does (test_cli.cpp, test_sezm_eval.cpp): a shell
// command, its exit status and its stdout and stderr together.
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace sezm_test {

struct Exec {
  int status = -1;  // the exit status; -1 when the process died of a signal (a crash)
  std::string out;  // stdout and stderr together
};

inline Exec run(const std::string& cmd) {
  Exec r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline std::string quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace sezm_test
