#!/usr/bin/env bash
# Build, from Debian packages alone, the base image deploy/Dockerfile needs: Debian 12 (bookworm)
# with Python 3.11, its venv module, tini and the CA certificates. It stands in for the official
# python:3.11-slim-bookworm on builders that reach no image registry (only a Debian mirror):
#
#   deploy/images/build-base.sh                    -> localhost/court-base:bookworm
#   make image BASE=localhost/court-base:bookworm  (make image runs this script itself when the
#                                                   base is missing and no registry answers)
#
# Uses debootstrap (minbase variant) into a temporary root, then `podman import` (or `docker
# import`). Needs root. The mirror is the first URI of /etc/apt/sources.list(.d), or $DEBIAN_MIRROR.
set -euo pipefail
IMAGE="${1:-localhost/court-base:bookworm}"
SUITE="${DEBIAN_SUITE:-bookworm}"
ENGINE="${ENGINE:-$(command -v podman || command -v docker || true)}"
[ -n "$ENGINE" ] || { echo "neither podman nor docker found" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "debootstrap not found: apt-get install debootstrap" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "debootstrap needs root" >&2; exit 1; }
if [ -z "${DEBIAN_MIRROR:-}" ]; then
  DEBIAN_MIRROR=$( (grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
                    grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}') \
                   | grep -v security | head -n1 || true)
fi
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
ROOT=$(mktemp -d /tmp/court-base.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,tini,ca-certificates \
  "$SUITE" "$ROOT" "$DEBIAN_MIRROR" >&2
# The same trimming the official slim images do: no apt lists, no docs or man pages, no locales.
chroot "$ROOT" apt-get clean
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* \
       "$ROOT"/usr/share/locale/* "$ROOT"/var/cache/debconf/*-old "$ROOT"/var/log/*.log
echo "deb $DEBIAN_MIRROR $SUITE main" > "$ROOT/etc/apt/sources.list"
tar -C "$ROOT" -c . | "$ENGINE" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  - "$IMAGE" >&2
echo "$IMAGE"
