#!/usr/bin/env bash
# package_test.sh BUILD_DIR contents|install: the Debian package CPack builds (cmake/install.cmake).
#   contents  the .deb's control fields and files; its binary, unpacked, runs (--version), its
#             units name where it is installed (/usr/bin), its man page renders
#   install   as root: dpkg -i, glmserve on PATH, the glmserve user and /var/lib/glmserve made,
#             dpkg -r takes the files away; what the test created (user, directory) it removes.
#             Not root: exit 77, which ctest reports as skipped (SKIP_RETURN_CODE), not passed.
set -euo pipefail
build="$1"
mode="$2"
if [[ "$mode" == install && "$(id -u)" -ne 0 ]]; then
  echo "package_test: dpkg -i needs root; skipped"
  exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "package_test: $*" >&2; exit 1; }
(cd "$build" && cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log" >&2; fail "cpack failed"; }
deb="$(ls "$work"/pkg/glmserve_*.deb)"
version="$("$build/glmserve" --version)"   # "glmserve X.Y.Z"
if [[ "$mode" == contents ]]; then
  [[ "$(dpkg-deb -f "$deb" Package)" == glmserve ]] || fail "Package is not glmserve"
  [[ "glmserve $(dpkg-deb -f "$deb" Version)" == "$version" ]] || fail "Version != $version"
  dpkg-deb -f "$deb" Depends | grep -q 'libc6' || fail "Depends lacks the shared libraries"
  dpkg-deb -c "$deb" >"$work/files"
  for f in ./usr/bin/glmserve ./usr/share/man/man1/glmserve.1 \
      ./usr/lib/systemd/system/glmserve-engine.service \
      ./usr/lib/systemd/system/glmserve-web.service ./usr/lib/tmpfiles.d/glmserve.conf \
      ./usr/share/doc/glmserve/README.md ./usr/share/doc/glmserve/operations.md \
      ./usr/share/doc/glmserve/examples/supervisord.conf; do
    grep -q " $f\$" "$work/files" || fail "$f missing from the package"
  done
  dpkg-deb -e "$deb" "$work/control"
  for s in postinst prerm postrm; do
    [[ -x "$work/control/$s" ]] || fail "$s missing or not executable"
    sh -n "$work/control/$s" || fail "$s is not valid sh"
  done
  dpkg-deb -x "$deb" "$work/root"
  [[ "$("$work/root/usr/bin/glmserve" --version)" == "$version" ]] || fail "unpacked --version"
  for u in "$work"/root/usr/lib/systemd/system/*.service; do
    grep -q '^ExecStart=/usr/bin/glmserve ' "$u" || fail "$u does not start /usr/bin/glmserve"
    grep -q 'file:///usr/share/doc/glmserve/' "$u" || fail "$u Documentation= is not installed"
    ! grep -q /usr/local "$u" || fail "$u still names /usr/local"
  done
  # Every command's help text is in the man page, and it renders.
  for c in serve chat run engine web pull; do
    grep -q "^\.SS $c\$" "$work/root/usr/share/man/man1/glmserve.1" || fail "man page lacks $c"
  done
  MANWIDTH=100 man -l "$work/root/usr/share/man/man1/glmserve.1" 2>/dev/null >"$work/man.txt"
  grep -q "glmserve serve --model" "$work/man.txt" || fail "man page does not render serve's usage"
  echo "package_test: $(basename "$deb") contents ok"
  exit 0
fi
[[ "$mode" == install ]] || fail "unknown mode $mode"
if dpkg-query -W -f='${Status}' glmserve 2>/dev/null | grep -q "install ok installed"; then
  fail "a glmserve package is already installed here; the test will not replace it"
fi
had_user=0; getent passwd glmserve >/dev/null && had_user=1
had_dir=0; [[ -e /var/lib/glmserve ]] && had_dir=1
cleanup() {
  dpkg -r glmserve >/dev/null 2>&1 || true
  [[ $had_dir -eq 1 ]] || rm -rf /var/lib/glmserve
  [[ $had_user -eq 1 ]] || userdel glmserve 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -i failed"; }
grep -q "no model yet" "$work/dpkg.log" || fail "postinst did not say how to add a model"
[[ "$(/usr/bin/glmserve --version)" == "$version" ]] || fail "installed --version"
getent passwd glmserve >/dev/null || fail "postinst made no glmserve user"
[[ "$(stat -c '%U %a' /var/lib/glmserve)" == "glmserve 750" ]] || fail "/var/lib/glmserve owner/mode"
# The installed units are valid for systemd (their binary, user and directives exist).
systemd-analyze verify /usr/lib/systemd/system/glmserve-engine.service \
  /usr/lib/systemd/system/glmserve-web.service >"$work/verify.log" 2>&1 ||
  { cat "$work/verify.log" >&2; fail "systemd-analyze verify refused the units"; }
dpkg -r glmserve >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -r failed"; }
[[ ! -e /usr/bin/glmserve ]] || fail "dpkg -r left /usr/bin/glmserve"
[[ ! -e /usr/lib/systemd/system/glmserve-engine.service ]] || fail "dpkg -r left the units"
echo "package_test: $(basename "$deb") installed and removed"
