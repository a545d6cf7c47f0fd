#!/usr/bin/env bash
# Builds the container image (deploy/container/Containerfile) with podman from a Debian 12 base
# made by debootstrap (no image registry needed: the base is the Debian mirror apt uses), then
# runs it: /health answers, one chat completes, its user is not root, the HEALTHCHECK passes.
# Run once by hand (minutes: debootstrap fetches ~100 MB); not part of ctest.
#   scripts/container-check.sh [build/glmserve]
# GLM_CONTAINER_WORK (default /var/tmp/glmserve-container) keeps the base between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/glmserve}
WORK=${GLM_CONTAINER_WORK:-/var/tmp/glmserve-container}
BASE=localhost/glmserve-base:bookworm
IMAGE=localhost/glmserve:check
NAME=glmserve-check-$$
PORT=${GLM_CONTAINER_PORT:-18080}
MIRROR=${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources \
  2>/dev/null || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
step() { printf '== %s\n' "$*"; }
for tool in podman debootstrap curl; do
  command -v "$tool" >/dev/null || { echo "container-check: no $tool (scripts/install-deps.sh)"; exit 77; }
done
[ -x "$BIN" ] || { echo "container-check: no $BIN (scripts/build.sh)"; exit 1; }
mkdir -p "$WORK"

# The base: Debian 12 minbase plus the packages that hold the binary's shared libraries, and
# curl for the HEALTHCHECK.
if ! podman image exists "$BASE"; then
  pkgs=$(ldd "$BIN" | awk '/=> \// {print $1}' | while read -r so; do
    dpkg -S "*/$so" 2>/dev/null | cut -d: -f1 | grep -v -e '-dev$' -e i386 | head -1
  done | sort -u | paste -sd, -)
  step "debootstrap bookworm from $MIRROR with: $pkgs"
  rm -rf "$WORK/rootfs"
  t0=$(date +%s)
  debootstrap --variant=minbase --include="$pkgs,curl,ca-certificates" bookworm \
    "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -5 "$WORK/debootstrap.log"; echo "container-check: debootstrap failed"; exit 1; }
  rm -rf "$WORK/rootfs/var/cache/apt/archives/"*.deb "$WORK/rootfs/var/lib/apt/lists/"*
  step "debootstrap took $(( $(date +%s) - t0 )) s; importing as $BASE"
  tar -C "$WORK/rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
fi

# Podman's defaults (crun; nofile and nproc raised to 1048576) fail in some sandboxes: crun
# refuses a cgroup v1 host ("cgroups in hybrid mode not supported") and raising the limits is
# not permitted. Then runc (Debian's runc package), with limits the host allows.
RUN_OPTS=()
if ! err=$(podman run --rm "$BASE" true 2>&1); then
  echo "podman's default runtime failed here: $(printf '%s' "$err" | tail -1)"
  command -v runc >/dev/null || { echo "container-check: install runc and retry"; exit 1; }
  RUN_OPTS=(--runtime runc --ulimit nofile=16384:16384 --ulimit nproc=16384:16384)
  echo "using: ${RUN_OPTS[*]}"
fi

step "podman build"
rm -rf "$WORK/ctx" && mkdir -p "$WORK/ctx/build"
cp "$BIN" "$WORK/ctx/build/glmserve"
t0=$(date +%s)
podman "${RUN_OPTS[@]:0:2}" build "${RUN_OPTS[@]:2}" --format docker --build-arg BASE="$BASE" -f deploy/container/Containerfile \
  -t "$IMAGE" "$WORK/ctx"
step "image built in $(( $(date +%s) - t0 )) s: $(podman image inspect "$IMAGE" --format '{{.Size}}') bytes"

step "run it"
rm -rf "$WORK/data" && mkdir -p "$WORK/data/models" "$WORK/data/state"
"$BIN" gen-model --arch chatglm3 --preset tiny -o "$WORK/data/models/model.gguf" >/dev/null
chown -R 10001:10001 "$WORK/data"
cleanup() { podman rm -f "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
podman "${RUN_OPTS[@]:0:2}" run "${RUN_OPTS[@]:2}" -d --name "$NAME" -p "127.0.0.1:$PORT:8080" -v "$WORK/data:/data" "$IMAGE" >/dev/null
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$PORT/health"; echo
curl -fsS "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"hello"}],"max_tokens":4}'; echo
uid=$(podman "${RUN_OPTS[@]:0:2}" exec "$NAME" id -u)
[ "$uid" != 0 ] || { echo "container-check: the container runs as root"; exit 1; }
step "its user: $(podman "${RUN_OPTS[@]:0:2}" exec "$NAME" id)"
podman "${RUN_OPTS[@]:0:2}" healthcheck run "$NAME" && step "HEALTHCHECK: healthy"
podman stop -t 30 "$NAME" >/dev/null
step "container-check passed"
