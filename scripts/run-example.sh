#!/usr/bin/env bash
# The main job: installs dependencies, builds, and evaluates the shipped diamond potential on a
# rattled 64-atom diamond cell (energy, forces, virial).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup-deps.sh"
build="$(bash "$here/scripts/build.sh" | tail -n 1)"
"$build/src/sezm-eval" "$here/potentials/C.pt" "$here/examples/sezm-eval/diamond64.xyz" "$@"
