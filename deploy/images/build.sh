#!/usr/bin/env bash
# `make image`: build deploy/Dockerfile with Podman or Docker, whichever answers.
#
#   deploy/images/build.sh [TAG]          default court:dev (also tagged localhost/court:dev)
#   BASE=python:3.11.14-slim-bookworm     use this base (the Dockerfile's default); when unset, the
#                                         official base if it is present or can be pulled, else
#                                         localhost/court-base:bookworm, built by build-base.sh
#                                         from Debian packages when missing (no registry needed)
#   ENGINE=podman|docker                  force an engine
#
# The host's CA bundle goes in as the build secret `ca` (for TLS-inspecting proxies); the build
# uses the host network so RUN steps reach PyPI and the Debian mirror exactly as the host does.
set -euo pipefail
cd "$(dirname "$0")/../.."
TAG="${1:-court:dev}"
OFFICIAL=python:3.11.14-slim-bookworm
LOCAL_BASE=localhost/court-base:bookworm
if [ -z "${ENGINE:-}" ]; then
  for candidate in podman docker; do
    if command -v "$candidate" >/dev/null && "$candidate" info >/dev/null 2>&1; then ENGINE=$candidate; break; fi
  done
fi
[ -n "${ENGINE:-}" ] || { echo "no working container engine: install podman (deploy/images/setup-podman.sh) or start docker" >&2; exit 1; }
PYTHON=python3.11
if [ -z "${BASE:-}" ]; then
  if "$ENGINE" image inspect "$OFFICIAL" >/dev/null 2>&1 || "$ENGINE" pull -q "$OFFICIAL" >/dev/null 2>&1; then
    BASE=$OFFICIAL
  else
    echo "no registry answers for $OFFICIAL: using $LOCAL_BASE (deploy/images/build-base.sh)" >&2
    "$ENGINE" image inspect "$LOCAL_BASE" >/dev/null 2>&1 || ENGINE="$ENGINE" deploy/images/build-base.sh "$LOCAL_BASE" >/dev/null
    BASE=$LOCAL_BASE
  fi
fi
CA=""
for bundle in "${CA_BUNDLE:-}" /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
  if [ -n "$bundle" ] && [ -s "$bundle" ]; then CA=$bundle; break; fi
done
args=(build -f deploy/Dockerfile --network host --build-arg "BASE=$BASE" --build-arg "PYTHON=$PYTHON" -t "$TAG")
[ -n "$CA" ] && args+=(--secret "id=ca,src=$CA")
[ "$ENGINE" = docker ] && export DOCKER_BUILDKIT=1
echo "+ $ENGINE ${args[*]} ." >&2
"$ENGINE" "${args[@]}" .
case "$TAG" in */*) ;; *) "$ENGINE" tag "$TAG" "localhost/$TAG" 2>/dev/null || true ;; esac
echo "built $TAG on $BASE with $ENGINE" >&2
