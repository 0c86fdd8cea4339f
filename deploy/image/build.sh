#!/usr/bin/env bash
# build.sh: the toolhost server image, without any registry.
#
#   deploy/image/build.sh BINARY PLUGINS TAG
#
# The Debian bookworm minbase rootfs the node image is made from (cached by
# plugins/node/build-image.sh under /var/cache/toolhost; made with debootstrap when
# missing), plus: BINARY at /usr/local/bin/toolhost, this machine's CA bundle (the
# same Debian release's ca-certificates), a user `toolhost` (10001:10001) the server
# runs as, the components and manifests of PLUGINS at /srv/toolhost/plugins,
# precompiled by BINARY itself (`toolhost precompile`) with a compile-cache key made
# for the image (/usr/local/share/toolhost/compile-cache.key, readable by the server's
# user only), and a default configuration (/etc/toolhost/toolhost.toml: that key,
# serving on 0.0.0.0:8001). Imported with `docker import` as TAG.
#
# The binary must run on Debian 12's glibc (build it on Debian 12, as here).
set -euo pipefail

BINARY=$1 PLUGINS=$2 TAG=$3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=/var/cache/toolhost
SUITE=bookworm
START=$SECONDS
phase() { printf '[server-image %4ds] %s\n' "$((SECONDS - START))" "$*"; }
die() { printf '[server-image] ERROR: %s\n' "$*" >&2; exit 1; }

[ -x "$BINARY" ] || die "no toolhost binary at $BINARY"
[ -d "$PLUGINS" ] || die "no plugins directory at $PLUGINS"
[ "$(id -u)" -eq 0 ] || die "building the image needs root (the rootfs's owners)"
"$HERE/../../plugins/node/ensure-docker.sh" >/dev/null

ROOT=$(mktemp -d /var/tmp/toolhost-server-rootfs.XXXXXX)
trap 'rm -rf --one-file-system "$ROOT"' EXIT

BASE_TAR=$(ls "$CACHE"/rootfs-$SUITE-minbase-*.tar 2>/dev/null | head -n 1 || true)
if [ -n "$BASE_TAR" ]; then
    phase "unpacking the minbase rootfs $BASE_TAR"
    tar -C "$ROOT" --numeric-owner -xpf "$BASE_TAR"
else
    command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
    MIRROR=${MIRROR:-$(awk '$1=="deb" && $3=="'$SUITE'" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)}
    MIRROR=${MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)}
    phase "debootstrap --variant=minbase $SUITE from ${MIRROR:-deb.debian.org}"
    debootstrap --variant=minbase "$SUITE" "$ROOT" "${MIRROR:-http://deb.debian.org/debian}" >/dev/null
fi
chmod 755 "$ROOT"

phase "the server, its user, the CA bundle"
install -m 0755 "$BINARY" "$ROOT/usr/local/bin/toolhost"
install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
echo "toolhost:x:10001:" >>"$ROOT/etc/group"
echo "toolhost:x:10001:10001:toolhost:/var/lib/toolhost:/usr/sbin/nologin" >>"$ROOT/etc/passwd"
echo "toolhost:!:19000::::::" >>"$ROOT/etc/shadow"
install -d -m 0750 -o 10001 -g 10001 "$ROOT/var/lib/toolhost"
install -d -m 0755 "$ROOT/etc/toolhost" "$ROOT/usr/local/share/toolhost" "$ROOT/srv/toolhost"

phase "plugins from $PLUGINS, precompiled"
cp -a "$PLUGINS" "$ROOT/srv/toolhost/plugins"
rm -rf "$ROOT/srv/toolhost/plugins/.compile-cache"
KEY="$ROOT/usr/local/share/toolhost/compile-cache.key"
cat >"$ROOT/etc/toolhost/toolhost.toml" <<TOML
# The image's defaults (mount another file here to change them).
[server]
bind = "0.0.0.0:8001"

[plugins]
# The key the image's precompiled components were made with.
cache_key = "/usr/local/share/toolhost/compile-cache.key"
TOML
"$BINARY" precompile --plugins "$ROOT/srv/toolhost/plugins" --cache-key "$KEY" \
    --config "$ROOT/etc/toolhost/toolhost.toml" >/dev/null
chown 10001:10001 "$KEY"
chmod 0400 "$KEY"
chown -R root:root "$ROOT/srv/toolhost/plugins"
chmod -R a+rX,go-w "$ROOT/srv/toolhost/plugins"

phase "importing as $TAG"
tar -C "$ROOT" --numeric-owner -cf - . |
    docker import \
        --change 'USER 10001:10001' \
        --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENV TOOLHOST_LOG=info,wasmtime=warn,cranelift=warn' \
        --change 'WORKDIR /var/lib/toolhost' \
        --change 'EXPOSE 8001' \
        --change 'ENTRYPOINT ["/usr/local/bin/toolhost"]' \
        --change 'CMD ["serve", "--config=/etc/toolhost/toolhost.toml", "--plugins=/srv/toolhost/plugins", "--data=/var/lib/toolhost"]' \
        --change 'LABEL org.toolhost.server=1' \
        --message "toolhost server image" \
        - "$TAG" >/dev/null
phase "done: $TAG, $(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')"
