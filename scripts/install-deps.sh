#!/usr/bin/env bash
# Installs every Debian 12 package glmserve needs to build, test and serve. Idempotent.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build ccache pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcpp-httplib-dev libboost-dev libsqlite3-dev sqlite3
  libsentencepiece-dev libminizip-dev zlib1g-dev libedit-dev
  libcurl4-openssl-dev libssl-dev nginx
  libvulkan-dev libvulkan1 glslc spirv-tools mesa-vulkan-drivers vulkan-tools vulkan-validationlayers
  clang clang-format clang-tidy libclang-rt-14-dev
  netcat-openbsd curl supervisor fonts-wqy-microhei tmux systemd
  nodejs chromium
  libpq-dev postgresql haproxy python3-yaml podman runc debootstrap
)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then

  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Debian ships npm separately; some Node.js builds bundle it.
if ! command -v npm >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive ${SUDO:-} apt-get install -y -qq --no-install-recommends npm
fi
