#!/usr/bin/env bash
# Kernel headers for bcc (ebpf/ track), fetched WITHOUT installing Debian's headers package (that would pull a
# kernel image, udev and a systemd upgrade; see PLATFORM.md): `apt-get download` of linux-headers-<v>-amd64,
# linux-headers-<v>-common and linux-kbuild-<v> for the newest 6.12 version apt offers, `dpkg -x` into a cache
# directory outside the checkout, then the -amd64 tree copied over the -common one (keeping -common's Makefile).
# bcc only needs a tree that compiles; tracepoint layouts come from tracefs at run time, so a 6.12 tree works on
# newer kernels. The finished tree is marked with a stamp file: a second run returns at once.
# Usage: provision-bcc-headers.sh [checkout]   env: KVDS_BCC_HEADERS (default /var/cache/kvds/bcc-headers)
set -euo pipefail

root="${KVDS_BCC_HEADERS:-/var/cache/kvds/bcc-headers}"
tree="$root/tree"
stamp="$tree/.kvds-provisioned"

if [ -f "$stamp" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "provision-bcc-headers: must run as root (apt-get download, $root)" >&2
  exit 2
fi

# Newest 6.12 version for which all three packages exist ("6.12.117+deb12").
pick_version() {
  local v
  for v in $(apt-cache search --names-only '^linux-headers-6\.12\.[0-9]+\+deb[0-9]+-common$' 2>/dev/null \
             | sed -E 's/^linux-headers-(6\.12\.[0-9]+\+deb[0-9]+)-common .*/\1/' | sort -V -r); do
    if apt-cache show "linux-headers-$v-amd64" >/dev/null 2>&1 && apt-cache show "linux-kbuild-$v" >/dev/null 2>&1; then
      echo "$v"
      return 0
    fi
  done
  return 1
}

version="$(pick_version || true)"
if [ -z "$version" ]; then
  apt-get update -qq
  version="$(pick_version || true)"
fi
if [ -z "$version" ]; then
  echo "provision-bcc-headers: apt offers no linux-headers-6.12.*-amd64/-common + linux-kbuild-6.12.* set" >&2
  exit 3
fi

echo "kvds setup: provisioning bcc kernel headers $version into $root"
dl="$root/debs"
ex="$root/extract-$version"
mkdir -p "$dl"
rm -rf "$ex" "$tree.new"
mkdir -p "$ex"
(
  cd "$dl"
  # _apt cannot write into root-only directories; download as root without the sandbox user.
  for p in "linux-headers-$version-amd64" "linux-headers-$version-common" "linux-kbuild-$version"; do
    ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download -q -o APT::Sandbox::User=root "$p" >/dev/null
  done
)
for deb in "$dl"/linux-headers-"$version"-amd64_*.deb "$dl"/linux-headers-"$version"-common_*.deb \
           "$dl"/linux-kbuild-"$version"_*.deb; do
  dpkg -x "$deb" "$ex"
done

common="$ex/usr/src/linux-headers-$version-common"
arch="$ex/usr/src/linux-headers-$version-amd64"
[ -d "$common" ] && [ -d "$arch" ] || { echo "provision-bcc-headers: unexpected package layout in $ex" >&2; exit 3; }

cp -a "$common" "$tree.new"
cp "$common/Makefile" "$tree.new/Makefile.common"
# -amd64 adds the generated headers, .config and Module.symvers; its scripts/tools are symlinks into kbuild.
cp -a --remove-destination "$arch/." "$tree.new/"
mv -f "$tree.new/Makefile.common" "$tree.new/Makefile"
# scripts/ and tools/ are symlinks into /usr/lib/linux-kbuild-<v>: take them from the extraction instead.
for link in scripts tools; do
  if [ -L "$tree.new/$link" ]; then
    rm "$tree.new/$link"
    cp -a "$ex/usr/lib/linux-kbuild-$version/$link" "$tree.new/$link"
  fi
done
echo "$version" > "$tree.new/.kvds-provisioned"
rm -rf "$tree"
mv "$tree.new" "$tree"
rm -rf "$ex"
echo "kvds setup: bcc headers ready at $tree (BCC_KERNEL_SOURCE)"
