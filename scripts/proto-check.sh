#!/usr/bin/env bash
# buf lint and buf breaking over protos/ (make proto-check; CI runs it).
#
#   scripts/proto-check.sh [BASE]     # BASE: a git revision, default HEAD~1 (main's previous commit)
#
# Breaking changes (a field renumbered, removed or retyped, a message or enum value gone: buf's
# FILE rules) are judged against BASE's protos/, exported with `git archive`. A BASE without
# protos/buf.yaml predates the checked contract (the typed court.games.v1 landing is itself the
# deliberate break from v1): then only lint runs and the script says "no buf baseline at BASE".
# buf comes from tools/buf (the npm package @bufbuild/buf, `npm ci` there); BUF overrides it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
base="${1:-${PROTO_BASE:-HEAD~1}}"
buf="${BUF:-$root/tools/buf/node_modules/.bin/buf}"
if [ ! -x "$buf" ]; then
  echo "installing buf (npm ci in tools/buf)" >&2
  npm ci --prefix "$root/tools/buf" --no-audit --no-fund --loglevel=error >&2
fi
"$buf" lint protos
echo "buf lint: clean"
if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  echo "no buf baseline at $base (no such commit): lint only"
  exit 0
fi
if ! git cat-file -e "$base:protos/buf.yaml" 2>/dev/null; then
  echo "no buf baseline at $base: lint only"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git archive "$base" protos | tar -x -C "$tmp"
"$buf" breaking protos --against "$tmp/protos"
echo "buf breaking: no breaking change against $base"
