#!/usr/bin/env bash
# The real node's two images, built without Docker from Debian tools, as OCI image layouts:
#   busybox  Debian's busybox-static binary (/bin/busybox, every applet a symlink to it), /etc/passwd with
#            nobody, /tmp; runs as 65534:65534 by default (so pods pass the restricted Pod Security profile)
#   pause    Kubernetes' own pause.c (build/pause/linux in the k8s.io/kubernetes module of K8S_VERSION),
#            compiled statically with Debian's gcc: the sandbox image containerd is told to use
# packed with umoci, cached by the SHA-256 of what goes in (this script, the busybox binary, pause.c, gcc's and
# umoci's versions) under ${TI_HUB_CACHE:-~/.cache/ti-hub}/node-images/<hash>/, written atomically.
#
# Usage: tests/k8s/node/images.sh    prints the cache dir: <dir>/busybox (tag BUSYBOX_TAG), <dir>/pause (tag
#                                     PAUSE_TAG), <dir>/pause.tar (the pause layout as a tar, for `ctr import`)
#                                     and <dir>/tags.env (BUSYBOX_TAG=..., PAUSE_TAG=...)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../versions.env
source "$HERE/../versions.env"
CACHE="${TI_HUB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ti-hub}/node-images"
log() { printf '[images] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need=()
[[ -x /bin/busybox ]] && dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' ||
  need+=(busybox-static)
command -v umoci >/dev/null || need+=(umoci)
command -v gcc >/dev/null || need+=(gcc)
[[ -f /usr/lib/x86_64-linux-gnu/libc.a || -f /usr/lib/aarch64-linux-gnu/libc.a ]] || need+=(libc6-dev)
if ((${#need[@]})); then
  log "installing ${need[*]} (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq "${need[@]}" >/dev/null || die "apt-get install ${need[*]} failed"
fi

pause_c="$(go env GOMODCACHE 2>/dev/null)/k8s.io/kubernetes@$K8S_VERSION/build/pause/linux/pause.c"
if [[ ! -f "$pause_c" ]]; then
  (cd /tmp && GOFLAGS= go mod download "k8s.io/kubernetes@$K8S_VERSION") >&2 || die "cannot download k8s.io/kubernetes"
fi
[[ -f "$pause_c" ]] || die "no $pause_c"
pause_mk="$(dirname "$(dirname "$pause_c")")/Makefile"
PAUSE_TAG="$(awk '$1 == "TAG" && $2 == "?=" {print $3; exit}' "$pause_mk")"
[[ -n "$PAUSE_TAG" ]] || die "no TAG in $pause_mk"
BUSYBOX_TAG="$(dpkg-query -W -f='${Version}' busybox-static | sed 's/^[0-9]*://; s/[-+~].*//')"  # 1.35.0

key="$( { sha256sum "$0" /bin/busybox "$pause_c"; gcc --version | head -n 1; umoci --version
          echo "$PAUSE_TAG $BUSYBOX_TAG"; } | sha256sum | cut -c1-16)"
DEST="$CACHE/$key"
if [[ -f "$DEST/tags.env" ]]; then echo "$DEST"; exit 0; fi

mkdir -p "$CACHE"
exec 9>"$CACHE/build.lock"
flock 9
if [[ -f "$DEST/tags.env" ]]; then echo "$DEST"; exit 0; fi
t0=$(date +%s)
work="$(mktemp -d "$CACHE/work.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# new_image LAYOUT TAG: an empty image, unpacked in $work/bundle (rootfs under it)
new_image() {
  umoci init --layout "$1"
  umoci new --image "$1:$2"
  rm -rf "$work/bundle"
  umoci unpack --image "$1:$2" "$work/bundle" >/dev/null
}

log "busybox $BUSYBOX_TAG"
new_image "$work/out/busybox" "$BUSYBOX_TAG"
r="$work/bundle/rootfs"
mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/home/nobody"
chmod 1777 "$r/tmp"
install -m 0755 /bin/busybox "$r/bin/busybox"
for a in $(/bin/busybox --list); do [[ "$a" == busybox ]] || ln -sf busybox "$r/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home/nobody:/bin/sh\n' >"$r/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
chown 65534:65534 "$r/home/nobody"
umoci repack --image "$work/out/busybox:$BUSYBOX_TAG" "$work/bundle"
umoci config --image "$work/out/busybox:$BUSYBOX_TAG" --os linux --architecture amd64 \
  --config.user 65534:65534 --config.env PATH=/bin --config.workingdir /home/nobody --config.cmd /bin/sh \
  --author "ti-hub tests (tests/k8s/node/images.sh)"
umoci gc --layout "$work/out/busybox"

log "pause $PAUSE_TAG (gcc -static $pause_c)"
new_image "$work/out/pause" "$PAUSE_TAG"
gcc -Os -static -Wall -DVERSION="v$PAUSE_TAG" -o "$work/bundle/rootfs/pause" "$pause_c"
strip "$work/bundle/rootfs/pause"
"$work/bundle/rootfs/pause" -v >&2
umoci repack --image "$work/out/pause:$PAUSE_TAG" "$work/bundle"
# as registry.k8s.io/pause: runs as 65535 (no root needed to sleep)
umoci config --image "$work/out/pause:$PAUSE_TAG" --os linux --architecture amd64 \
  --config.user 65535:65535 --config.entrypoint /pause --author "ti-hub tests (tests/k8s/node/images.sh)"
umoci gc --layout "$work/out/pause"
tar -C "$work/out/pause" -cf "$work/out/pause.tar" .
printf 'BUSYBOX_TAG=%s\nPAUSE_TAG=%s\n' "$BUSYBOX_TAG" "$PAUSE_TAG" >"$work/out/tags.env"

rm -rf "$DEST"
mv "$work/out" "$DEST"
# older builds (other inputs) are not used again
find "$CACHE" -mindepth 1 -maxdepth 1 -type d -regextype egrep -regex '.*/[0-9a-f]{16}' ! -name "$key" -exec rm -rf {} +
log "built in $(( $(date +%s) - t0 ))s: $DEST ($(du -sh "$DEST" | cut -f1))"
echo "$DEST"
