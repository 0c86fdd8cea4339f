#!/usr/bin/env bash
# The image plugin against its anchor, ImageMagick's `convert`, on the same
# images in one run (#23): image_resize (to 1024 px wide, Lanczos, JPEG
# quality 90) and image_compress (JPEG quality 75) through a running release
# server over loopback, and `convert` doing the same to the same files,
# once with its default threads and once with one (the sandbox has one).
# Prints each median and the ratio ours / convert.
#
#   make build plugins && tests/bench/image_anchor.sh
#
# Needs ImageMagick (/usr/bin/convert) and the photos of Debian's
# mate-backgrounds (GPL-2+, used in place, never copied into the repository):
#   apt-get install imagemagick mate-backgrounds
# Skips, saying why, when either is missing. Settings: RUNS (default 5),
# TOOLHOST_BIN (default target/release/toolhost), IMAGE_WASM (the component,
# default target/plugins/image.wasm: another build for a before/after).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${RUNS:-5}
bin=${TOOLHOST_BIN:-$root/target/release/toolhost}
photos=/usr/share/backgrounds/mate

skip() {
	echo "SKIPPED image anchor: $*"
	exit 0
}
# /usr/local/bin/convert may be a stand-in that only converts PNG to PPM.
convert=/usr/bin/convert
[ -x "$convert" ] && "$convert" -version 2>/dev/null | grep -q ImageMagick ||
	skip "ImageMagick's convert is missing (apt-get install imagemagick)"
[ -d "$photos" ] || skip "no photos in $photos (apt-get install mate-backgrounds)"
[ -x "$bin" ] || skip "$bin is missing (make build)"
wasm=${IMAGE_WASM:-$root/target/plugins/image.wasm}
[ -f "$wasm" ] || skip "$wasm is missing (make plugins)"
command -v curl >/dev/null || skip "curl is missing"

work=$(mktemp -d)
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# The images: a 12-megapixel photo (made from the 5640×3172 one, JPEG q92),
# the two largest photos as shipped, and a PNG.
mkdir -p "$work/plugins" "$work/in" "$work/out"
"$convert" "$photos/abstract/Elephants_5640x3172.jpg" -resize 4618x2598! -quality 92 "$work/in/photo-12mp.jpg"
cp "$photos/abstract/Elephants_3840x2160.jpg" "$work/in/elephants-8mp.jpg"
cp "$photos/nature/LadyBird.jpg" "$work/in/ladybird-4mp.jpg"
cp "$photos/abstract/Gulp.png" "$work/in/gulp-2mp.png"
images=(photo-12mp.jpg elephants-8mp.jpg ladybird-4mp.jpg gulp-2mp.png)

cp "$wasm" "$work/plugins/image.wasm"
cp "$root/plugins/image/image.toml" "$work/plugins/"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port
TOOLHOST_LOG=warn "$bin" serve --bind "127.0.0.1:$port" --plugins "$work/plugins" \
	--data "$work/data" 2>"$work/server.log" &
server=$!
for _ in $(seq 600); do
	curl -sf "$base/health/ready" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -sf "$base/health/ready" >/dev/null || {
	cat "$work/server.log"
	echo "the server did not get ready" >&2
	exit 1
}
# Measured on the optimised build: a fresh server serves the component on
# Winch's quick build first and compiles Cranelift's behind it.
for _ in $(seq 6000); do
	curl -s "$base/plugins" | grep -q '"source":"winch"' || break
	sleep 0.1
done

# A session and its workspace: XAgent's cookie, then the uploads.
cookie=$(curl -si -X POST "$base/get_cookie" | tr -d '\r' | sed -n 's/^set-cookie: \(node_id=[^;]*\).*/\1/Ip')
session=${cookie#node_id=}
for f in "${images[@]}"; do
	curl -sf -H "cookie: $cookie" -F "file=@$work/in/$f" -F "filename=$f" "$base/upload_file" >/dev/null
done

now_ms() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m/1e6}'; }

# ours TOOL PARAMS: the call's wall time in ns, once; fails on an error answer.
ours() {
	local t0 t1 code
	t0=$(now_ms)
	code=$(curl -s -o "$work/answer.json" -w '%{http_code}' "$base/tools/$1/invoke" \
		-H "x-toolhost-session: $session" -H 'content-type: application/json' -d "{\"params\":$2}")
	t1=$(now_ms)
	if [ "$code" != 200 ]; then
		echo "$1 $2 answered $code: $(head -c 400 "$work/answer.json")" >&2
		exit 1
	fi
	echo $((t1 - t0))
}
theirs() {
	local t0 t1
	t0=$(now_ms)
	"$@"
	t1=$(now_ms)
	echo $((t1 - t0))
}

printf '%-20s %-9s %10s %12s %14s %8s %8s\n' image op "ours ms" "convert ms" "convert-1t ms" ratio ratio-1t
for f in "${images[@]}"; do
	stem=${f%.*}
	for op in resize compress; do
		if [ $op = resize ]; then
			params="{\"path\":\"$f\",\"width\":1024,\"filter\":\"lanczos3\",\"output\":\"out/$stem.1024.jpg\",\"quality\":90}"
			args=(-filter Lanczos -resize 1024x -quality 90 "$work/out/$stem.1024.jpg")
		else
			params="{\"path\":\"$f\",\"quality\":75,\"output\":\"out/$stem.q75.jpg\"}"
			args=(-quality 75 "$work/out/$stem.q75.jpg")
		fi
		# One warm-up each, then RUNS timed, alternating.
		ours "image_$op" "$params" >/dev/null
		"$convert" "$work/in/$f" "${args[@]}"
		: >"$work/a" && : >"$work/b" && : >"$work/c"
		for _ in $(seq "$runs"); do
			ours "image_$op" "$params" >>"$work/a"
			theirs "$convert" "$work/in/$f" "${args[@]}" >>"$work/b"
			theirs env MAGICK_THREAD_LIMIT=1 "$convert" "$work/in/$f" "${args[@]}" >>"$work/c"
		done
		a=$(median <"$work/a")
		b=$(median <"$work/b")
		c=$(median <"$work/c")
		printf '%-20s %-9s %10s %12s %14s %8s %8s\n' "$stem" "$op" "$a" "$b" "$c" \
			"$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2f", a/b}')" \
			"$(awk -v a="$a" -v c="$c" 'BEGIN{printf "%.2f", a/c}')"
	done
done
echo "(medians of $runs runs; ours: POST /tools/image_<op>/invoke on $base, the answer" \
	"(image inline, base64) read whole; convert: a process per run; ratio = ours / convert)"
# What the calls used in the sandbox (fuel, peak linear memory), per tool.
curl -s "$base/system" | python3 -c '
import json, sys
for u in json.load(sys.stdin).get("tools", []):
    if str(u.get("tool_id", "")).startswith("image_"):
        print(json.dumps(u))
' || true
