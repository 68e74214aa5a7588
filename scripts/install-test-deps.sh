#!/usr/bin/env bash
# Installs the Debian packages that tests/test_nbd_clients.py drives as real NBD clients: fio (its
# nbd engine), nbdinfo/nbdcopy/nbdfuse (libnbd-bin), fusermount3 (fuse3), qemu-io and the
# reference server qemu-nbd (qemu-utils), mkfs.ext4/e2fsck (e2fsprogs), mount/losetup and fstrim;
# the openssl command, which makes the TLS tests' certificates; and what building needs beyond
# Rust: OpenSSL's headers (libssl-dev, found through pkg-config) for the openssl crate that
# ssdlab-nbd's TLS uses. `make test`, `make bench` and `make lint` run this before building.
#
# Idempotent: it looks for each command and installs only the packages of missing ones, running
# `apt-get update` first and only then. Without root or apt-get it prints what is missing and
# exits 0: the tests that need a missing tool skip and name it.
set -euo pipefail

# The file-system tools live in sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

# command:package. On Debian 12 mount and losetup come from the package `mount` (split out of
# util-linux), and nbdfuse from libnbd-bin (it has a package of its own from Debian 13 on).
needs=(
    fio:fio
    nbdinfo:libnbd-bin
    nbdcopy:libnbd-bin
    nbdfuse:nbdfuse
    fusermount3:fuse3
    qemu-io:qemu-utils
    qemu-nbd:qemu-utils
    mkfs.ext4:e2fsprogs
    e2fsck:e2fsprogs
    mount:mount
    losetup:mount
    fstrim:util-linux
    openssl:openssl
    pkg-config:pkg-config
)

missing_commands=()
missing_packages=()
for need in "${needs[@]}"; do
    command=${need%%:*}
    package=${need#*:}
    if ! command -v "$command" >/dev/null 2>&1; then
        missing_commands+=("$command")
        if [[ " ${missing_packages[*]} " != *" $package "* ]]; then
            missing_packages+=("$package")
        fi
    fi
done

# A build dependency with no command of its own: OpenSSL's development files.
if ! pkg-config --exists openssl 2>/dev/null; then
    missing_commands+=("openssl.pc")
    if [[ " ${missing_packages[*]} " != *" libssl-dev "* ]]; then
        missing_packages+=("libssl-dev")
    fi
fi

if [ ${#missing_commands[@]} -eq 0 ]; then
    echo "install-test-deps: all NBD test tools and build dependencies are installed"
    exit 0
fi

# Debian 12 has no package nbdfuse: the command comes with libnbd-bin there. (Before the first
# `apt-get update` apt-cache may know no packages at all; the root path below asks again after it.)
resolve_nbdfuse() {
    if [[ " ${missing_packages[*]} " == *" nbdfuse "* ]] && ! apt-cache show nbdfuse >/dev/null 2>&1; then
        local package packages=()
        for package in "${missing_packages[@]}"; do
            packages+=("${package/#nbdfuse/libnbd-bin}")
        done
        missing_packages=("${packages[@]}")
    fi
}

if [ "$EUID" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    command -v apt-cache >/dev/null 2>&1 && resolve_nbdfuse
    echo "install-test-deps: missing ${missing_commands[*]}; not root or no apt-get, so install with:"
    echo "    apt-get install ${missing_packages[*]}"
    echo "install-test-deps: until then the NBD client tests that need them are skipped"
    exit 0
fi

echo "install-test-deps: missing ${missing_commands[*]}; installing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
resolve_nbdfuse
apt-get install -y -qq --no-install-recommends "${missing_packages[@]}"
echo "install-test-deps: installed ${missing_packages[*]}"
