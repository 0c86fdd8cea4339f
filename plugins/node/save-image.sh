#!/usr/bin/env bash
# save-image.sh: write the node image as a `docker save` archive, for engines
# that cannot pull ([docker] image_archive: toolhost loads it into an engine
# that lacks the image).
#
#   plugins/node/save-image.sh [DIR]     # default target/node-image
#
# Writes DIR/toolhost-node.tar and, beside it, DIR/toolhost-node.id (the
# image ID the archive holds). Skipped when that ID is the image's: the
# archive is rewritten only when the image changed (`docker save` of the
# ~820 MB image takes seconds). Written to a temporary file and renamed, so
# a server never loads half an archive.
#
# Env: IMAGE (default toolhost-node).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IMAGE=${IMAGE:-toolhost-node}
DIR=${1:-$(cd "$HERE/../.." && pwd)/target/node-image}
ARCHIVE=$DIR/$IMAGE.tar
RECORD=$DIR/$IMAGE.id

id=$(docker image inspect -f '{{.Id}}' "$IMAGE:latest") ||
    { echo "save-image: no $IMAGE:latest (make node-image builds it)" >&2; exit 1; }
if [ -s "$ARCHIVE" ] && [ "$(cat "$RECORD" 2>/dev/null)" = "$id" ]; then
    echo "save-image: $ARCHIVE holds $IMAGE:latest ($id)"
    exit 0
fi
mkdir -p "$DIR"
start=$(date +%s.%N)
rm -f "$RECORD"
docker save -o "$ARCHIVE.tmp" "$IMAGE:latest"
mv "$ARCHIVE.tmp" "$ARCHIVE"
echo "$id" >"$RECORD"
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "save-image: wrote $ARCHIVE ($(du -m "$ARCHIVE" | cut -f1) MB, $id) in $secs s"
