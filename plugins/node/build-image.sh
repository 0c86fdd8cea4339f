#!/usr/bin/env bash
# build-image.sh: build the toolhost node image (toolhost-node) without any registry.
#
# A Debian bookworm rootfs is made with debootstrap (minbase) from the mirror in this
# machine's apt sources, the packages of packages.txt are installed in a chroot, a
# user `tool` (1000:1000) and /workspace are created, and the tree is imported with
# `docker import`.
#
# Idempotent: the image is tagged toolhost-node:<12 hex of sha256(build-image.sh +
# packages.txt)>; when that tag exists the script only re-tags it :latest.
#
# Caches (under /var/cache/toolhost, safe to delete): the minbase rootfs tarball and
# downloaded .deb files, so a rebuild after editing packages.txt is much faster.
#
# Env: IMAGE (default toolhost-node), MIRROR / SECURITY_MIRROR (default: from apt
# sources), FORCE=1 (rebuild even if the hash tag exists).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IMAGE=${IMAGE:-toolhost-node}
SUITE=bookworm
CACHE=/var/cache/toolhost
START=$SECONDS

phase() { printf '[build-image %4ds] %s\n' "$((SECONDS - START))" "$*"; }
die() { printf '[build-image] ERROR: %s\n' "$*" >&2; exit 1; }

"$HERE/ensure-docker.sh"

HASH=$(cat "$HERE/build-image.sh" "$HERE/packages.txt" | sha256sum | cut -c1-12)
TAG="$IMAGE:$HASH"

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
    docker tag "$TAG" "$IMAGE:latest"
    phase "image $TAG is up to date; tagged $IMAGE:latest"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "building $TAG needs root (debootstrap, chroot, mount)"

mkdir -p "$CACHE/debs"
# One build at a time on this machine (concurrent CI jobs share the caches).
exec 9>"$CACHE/build.lock"
flock 9
if [ "${FORCE:-0}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
    docker tag "$TAG" "$IMAGE:latest"
    phase "image $TAG was built by a concurrent run; tagged $IMAGE:latest"
    exit 0
fi

phase "building $TAG"

# ---- mirrors: read them from this machine's apt sources (deb822 or one-line) ----
# Prints "URI SUITE" pairs.
apt_sources() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'BEGIN{IGNORECASE=1}
             /^[[:space:]]*$/ { flush(); next }
             /^URIs:/   { $1=""; uris=$0 }
             /^Suites:/ { $1=""; suites=$0 }
             function flush(  u,s,nu,ns,i,j) {
                 nu=split(uris,u," "); ns=split(suites,s," ")
                 for(i=1;i<=nu;i++) for(j=1;j<=ns;j++) print u[i], s[j]
                 uris=""; suites="" }
             END { flush() }' "$f"
    done
    { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
        awk '$1=="deb" { i=2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i, $(i+1) }'
}
SOURCES=$(apt_sources | sort -u) || true
MIRROR=${MIRROR:-$(awk -v s="$SUITE" '$2==s {print $1; exit}' <<<"$SOURCES")}
SECURITY_MIRROR=${SECURITY_MIRROR:-$(awk -v s="$SUITE-security" '$2==s {print $1; exit}' <<<"$SOURCES")}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}
phase "mirror $MIRROR, security $SECURITY_MIRROR"

# packages.txt: "name" = install, "-name" = install an empty stub instead (see there).
mapfile -t ENTRIES < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$HERE/packages.txt" | grep -v '^$' || true)
PACKAGES=(); STUBS=()
for e in "${ENTRIES[@]}"; do
    case "$e" in -*) STUBS+=("${e#-}") ;; *) PACKAGES+=("$e") ;; esac
done
[ "${#PACKAGES[@]}" -gt 0 ] || die "packages.txt lists no package"

if ! command -v debootstrap >/dev/null 2>&1; then
    phase "installing debootstrap on the build machine"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap </dev/null \
        || { apt-get update </dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap </dev/null; } \
        || die "cannot install debootstrap"
fi

# ---- temp rootfs + cleanup that never deletes through a live mount ----
ROOT=$(mktemp -d /var/tmp/toolhost-rootfs.XXXXXX)
MOUNTS=()
cleanup() {
    local i rc=0
    for ((i=${#MOUNTS[@]}-1; i>=0; i--)); do
        umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" 2>/dev/null || rc=1
    done
    MOUNTS=()
    # Anything else still mounted below the rootfs (e.g. left by a failed debootstrap).
    local m
    while read -r m; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || rc=1
    done < <(awk -v r="$ROOT/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r)
    if [ "$rc" -eq 0 ] && ! grep -q " $ROOT/" /proc/mounts; then
        rm -rf --one-file-system "$ROOT"
    else
        echo "[build-image] WARNING: mounts remain under $ROOT; not deleting it" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mount_in() { # mount_in <target under ROOT> <mount args...>
    mkdir -p "$ROOT$1"
    mount "${@:2}" "$ROOT$1"
    MOUNTS+=("$ROOT$1")
}
unmount_all() {
    local i
    for ((i=${#MOUNTS[@]}-1; i>=0; i--)); do umount "${MOUNTS[i]}"; done
    MOUNTS=()
}

# ---- phase 1: minbase rootfs (cached as a tarball per mirror) ----
BASE_KEY=$(printf '%s %s minbase v1' "$MIRROR" "$SUITE" | sha256sum | cut -c1-12)
BASE_TAR="$CACHE/rootfs-$SUITE-minbase-$BASE_KEY.tar"
if [ -s "$BASE_TAR" ]; then
    phase "unpacking cached minbase rootfs $BASE_TAR"
    tar -C "$ROOT" --numeric-owner -xpf "$BASE_TAR"
else
    phase "debootstrap --variant=minbase $SUITE (takes a minute or two)"
    debootstrap --variant=minbase --cache-dir="$CACHE/debs" "$SUITE" "$ROOT" "$MIRROR" \
        >"$ROOT.debootstrap.log" 2>&1 \
        || { tail -n 30 "$ROOT.debootstrap.log" >&2; rm -f "$ROOT.debootstrap.log"; die "debootstrap failed"; }
    rm -f "$ROOT.debootstrap.log"
    phase "caching minbase rootfs as $BASE_TAR"
    tar -C "$ROOT" --numeric-owner -cpf "$BASE_TAR.tmp" . && mv "$BASE_TAR.tmp" "$BASE_TAR"
fi

chmod 755 "$ROOT"   # becomes the image's "/" (mktemp made it 0700)

# ---- phase 2: configure apt in the chroot ----
phase "configuring apt"
cat >"$ROOT/etc/apt/sources.list" <<SRC
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
SRC
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
# Never start services from package scripts.
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"
# Do not even unpack docs, man pages and translations (as Debian's slim images do).
cat >"$ROOT/etc/dpkg/dpkg.cfg.d/toolhost-excludes" <<'EXCL'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/lintian/*
EXCL
cat >"$ROOT/etc/apt/apt.conf.d/90toolhost" <<'APT'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Retries "3";
APT

mount_in /proc -t proc proc
mount_in /dev/pts -t devpts devpts -o newinstance,ptmxmode=0666
mount_in /var/cache/apt/archives --bind "$CACHE/debs"

in_root() { chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@" </dev/null; }

# ---- phase 3: packages ----
phase "apt-get update"
in_root apt-get update -q >/dev/null || die "apt-get update in the chroot failed"
if [ "${#STUBS[@]}" -gt 0 ]; then
    phase "installing ${#STUBS[@]} stub packages: ${STUBS[*]}"
    mkdir -p "$ROOT/tmp/stubs"
    for name in "${STUBS[@]}"; do
        d="$ROOT/tmp/stubs/$name"
        mkdir -p "$d/DEBIAN"
        cat >"$d/DEBIAN/control" <<CTRL
Package: $name
Version: 999:0+toolhost.stub
Architecture: all
Maintainer: toolhost <toolhost@localhost>
Priority: optional
Section: misc
Description: empty stand-in for $name (toolhost node image)
 Satisfies the dependency without installing the real package; see packages.txt.
CTRL
        dpkg-deb --root-owner-group --build "$d" "$ROOT/tmp/stubs/$name.deb" >/dev/null \
            || die "cannot build stub package $name"
    done
    in_root sh -c 'dpkg -i /tmp/stubs/*.deb >/dev/null && apt-mark hold "$@" >/dev/null' sh "${STUBS[@]}" \
        || die "cannot install the stub packages"
    rm -rf "$ROOT/tmp/stubs"
fi
phase "installing ${#PACKAGES[@]} packages: ${PACKAGES[*]}"
in_root apt-get install -y -q "${PACKAGES[@]}" >"$ROOT.apt.log" 2>&1 \
    || { tail -n 40 "$ROOT.apt.log" >&2; rm -f "$ROOT.apt.log"; die "apt-get install failed"; }
phase "installed $(grep -c '^Setting up' "$ROOT.apt.log") packages"
rm -f "$ROOT.apt.log"

# ---- phase 4: users, directories, caches ----
phase "creating user tool (1000:1000), /workspace, /opt/toolhost"
in_root groupadd -g 1000 tool
in_root useradd -m -u 1000 -g 1000 -s /bin/bash tool
install -d -m 0777 "$ROOT/workspace"
install -d -m 0755 "$ROOT/opt/toolhost"
# Matplotlib font cache built once, readable by every uid (MPLCONFIGDIR below);
# sticky + world-writable so any user may add its own files.
install -d -m 1777 "$ROOT/var/cache/matplotlib"
in_root env MPLCONFIGDIR=/var/cache/matplotlib MPLBACKEND=agg \
    python3 -c 'import matplotlib.pyplot as p; p.figure()' || die "matplotlib does not import"
chmod -R a+rX "$ROOT/var/cache/matplotlib"
# Check the key binaries exist before spending time on the import.
for bin in /bin/bash /usr/bin/python3 /usr/bin/chromium /usr/bin/sleep; do
    [ -x "$ROOT$bin" ] || die "$bin is missing from the rootfs"
done
in_root python3 -c 'import jupyter_client, ipykernel, matplotlib_inline, numpy' \
    || die "python packages do not import"

# ---- phase 4b: uv (from PyPI, pinned by hash) for the builders' uv projects ----
UV_VERSION=0.13.9
UV_WHEEL="uv-$UV_VERSION-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
UV_SHA256=d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19
mkdir -p "$CACHE/uv"
if [ ! -s "$CACHE/uv/$UV_WHEEL" ]; then
    phase "downloading uv $UV_VERSION from PyPI"
    PIP=(python3 -m pip)
    if ! python3 -m pip --version >/dev/null 2>&1; then
        python3 -m venv "$CACHE/uv/pip-venv" || die "no pip: apt-get install python3-pip (or python3-venv)"
        PIP=("$CACHE/uv/pip-venv/bin/pip")
    fi
    "${PIP[@]}" download --quiet --only-binary=:all: --no-deps \
        --platform manylinux_2_17_x86_64 --python-version 3.11 "uv==$UV_VERSION" -d "$CACHE/uv" \
        || die "cannot download uv $UV_VERSION from PyPI (python3 -m pip download)"
fi
echo "$UV_SHA256  $CACHE/uv/$UV_WHEEL" | sha256sum -c --quiet - || die "uv wheel hash mismatch"
python3 - "$CACHE/uv/$UV_WHEEL" "$ROOT/usr/local/bin" <<'PY' || die "cannot unpack uv"
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for tool in ("uv", "uvx"):
        path = os.path.join(dest, tool)
        with z.open(f"uv-{os.path.basename(wheel).split('-')[1]}.data/scripts/{tool}") as src, open(path, "wb") as out:
            out.write(src.read())
        os.chmod(path, 0o755)
PY
in_root /usr/local/bin/uv --version >/dev/null || die "uv does not run in the rootfs"
phase "uv $UV_VERSION in /usr/local/bin"

# ---- phase 5: clean ----
phase "cleaning"
unmount_all
rm -f "$ROOT/usr/sbin/policy-rc.d"
: >"$ROOT/etc/resolv.conf"
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/cache/apt/archives/* \
       "$ROOT"/var/cache/debconf/*-old "$ROOT"/var/lib/dpkg/*-old \
       "$ROOT"/var/log/* "$ROOT"/tmp/* "$ROOT"/var/tmp/* "$ROOT"/root/.cache
# Docs, man pages and translations of the packages debootstrap installed before the
# dpkg excludes existed (copyright files and locale.alias are kept).
find "$ROOT/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$ROOT/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/*
find "$ROOT/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
mkdir -p "$ROOT/var/cache/apt/archives/partial"
# Chromium UI translations: keep English only (it refuses to start without en-US.pak).
if [ -d "$ROOT/usr/lib/chromium/locales" ]; then
    find "$ROOT/usr/lib/chromium/locales" -type f ! -name 'en-US*' -delete
fi

# ---- phase 6: import ----
PREVIOUS_ID=$(docker image inspect -f '{{.Id}}' "$TAG" 2>/dev/null || true)  # FORCE=1 rebuild
SIZE_MB=$(du -sm --one-file-system "$ROOT" | cut -f1)
phase "importing ${SIZE_MB} MB rootfs as $TAG"
tar -C "$ROOT" --numeric-owner --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' -cf - . |
    docker import \
        --change 'CMD ["sleep", "infinity"]' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENV PYTHONUNBUFFERED=1' \
        --change 'ENV PYDEVD_DISABLE_FILE_VALIDATION=1' \
        --change 'ENV MPLBACKEND=agg' \
        --change 'ENV MPLCONFIGDIR=/var/cache/matplotlib' \
        --change 'WORKDIR /workspace' \
        --change "LABEL org.toolhost.node=1 org.toolhost.node.hash=$HASH" \
        --message "toolhost node image $HASH" \
        - "$TAG" >/dev/null
docker tag "$TAG" "$IMAGE:latest"
phase "done: $TAG (also $IMAGE:latest), $(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')"

if [ -n "$PREVIOUS_ID" ] && [ "$PREVIOUS_ID" != "$(docker image inspect -f '{{.Id}}' "$TAG")" ]; then
    docker rmi "$PREVIOUS_ID" >/dev/null 2>&1 || true
fi
# Older builds (other 12-hex tags): untag them; `docker rmi` keeps images in use.
docker image ls "$IMAGE" --format '{{.Tag}}' | while read -r old; do
    if [[ "$old" =~ ^[0-9a-f]{12}$ && "$old" != "$HASH" ]]; then
        if docker rmi "$IMAGE:$old" >/dev/null 2>&1; then phase "removed the older image $IMAGE:$old"; fi
    fi
done
