#!/bin/sh
# Fetches the LAMMPS headers that Debian's liblammps-dev leaves out (fmt/, exceptions.h,
# neigh_request.h; version.h gives the version string, lammpsplugin.h is checked against
# lammps/sezm_plugin_abi.h) from the Debian source package of the
# *installed* version, into a cache outside the source tree. These are GPL files: they are
# never copied into the clone. Prints the directory holding src/ on success.
#
# usage: fetch_lammps_headers.sh CACHE_DIR
# The apt source list is derived from the machine's own `deb` entries (turned into `deb-src`),
# so no mirror is named here.
set -eu
cache=${1:?usage: $0 CACHE_DIR}
ver=$(dpkg-query -W -f='${source:Version}' liblammps-dev 2>/dev/null) || {
  echo "fetch_lammps_headers: liblammps-dev is not installed" >&2; exit 1; }
dest="$cache/lammps-$ver"
if [ -f "$dest/.complete" ]; then echo "$dest"; exit 0; fi

work="$cache/apt-$ver"
rm -rf "$work" "$dest"
mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/etc" "$dest"

# deb822 files: every stanza that says `Types: deb` also gets deb-src.
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  sed -e 's/^Types:.*/Types: deb-src/' "$f" >> "$work/etc/sources.sources.tmp"
  echo >> "$work/etc/sources.sources.tmp"
done
# one-line files
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  sed -n -e 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" >> "$work/etc/sources.list"
done
mkdir -p "$work/etc/parts"
[ -f "$work/etc/sources.sources.tmp" ] && mv "$work/etc/sources.sources.tmp" "$work/etc/parts/derived.sources"
touch "$work/etc/sources.list"

APT="-o Dir::Etc::SourceList=$work/etc/sources.list -o Dir::Etc::SourceParts=$work/etc/parts \
 -o Dir::State::Lists=$work/lists -o Dir::Cache::Archives=$work/archives \
 -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
# shellcheck disable=SC2086
apt-get -q $APT update >&2
# shellcheck disable=SC2086
(cd "$work" && apt-get -q $APT source --download-only "lammps=$ver" >&2)
orig=$(ls "$work"/lammps_*.orig.tar.* 2>/dev/null | head -n 1)
[ -n "$orig" ] || { echo "fetch_lammps_headers: no lammps source tarball was downloaded" >&2; exit 1; }
# Only the headers of src/ (and its bundled fmt) are needed.
tar -xf "$orig" -C "$dest" --strip-components=1 --wildcards --no-anchored 'src/*.h' 'src/fmt/*'
[ -f "$dest/src/fmt/format.h" ] && [ -f "$dest/src/neigh_request.h" ] || {
  echo "fetch_lammps_headers: the source tarball lacks src/fmt/format.h or src/neigh_request.h" >&2; exit 1; }
rm -rf "$work"
touch "$dest/.complete"
echo "$dest"
