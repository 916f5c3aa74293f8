#!/usr/bin/env bash
# Install Podman (and what the image build and `make image-test` use) from Debian packages and
# configure it the way these builders need (see deploy/README.md, "Build the image"). Root only;
# idempotent. Without the ulimits below runc fails to start any container on hosts that forbid
# raising them ("error setting rlimit type 7: operation not permitted").
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null || ! command -v runc >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq podman buildah runc debootstrap >/dev/null
fi
CONF=/etc/containers/containers.conf
if ! grep -qs 'default_ulimits' "$CONF"; then
  mkdir -p /etc/containers
  cat >> "$CONF" <<'TOML'
# written by court deploy/images/setup-podman.sh
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
TOML
fi
podman --version
