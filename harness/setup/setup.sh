#!/usr/bin/env bash
# One idempotent set-up for a fresh Debian 12 machine, run as root by `make demo` and `make test`:
# Debian packages (named only in debian-packages.txt), the project venv, then every provision-*.sh step.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
top="$(cd "$here/../.." && pwd)"
cd "$top"

if [ "$(id -u)" != 0 ]; then
  echo "kvds setup: must run as root (it installs Debian packages and changes kernel state)" >&2
  exit 2
fi

mapfile -t pkgs < <(grep -vE '^\s*(#|$)' "$here/debian-packages.txt")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "kvds setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

py="${PYTHON:-}"
if [ -z "$py" ]; then
  for c in python3.11 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then py="$c"; break; fi
  done
fi
[ -n "$py" ] || { echo "kvds setup: Python 3.11 not found (set PYTHON=)" >&2; exit 2; }
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv || { apt-get install -y -qq python3-venv >/dev/null; "$py" -m venv .venv; }
fi
stamp=.venv/.kvds-installed
want="$( (cat pyproject.toml; echo compat-editable) | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "kvds setup: installing kvds and its Python dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  # compat mode: a path entry for the checkout, so packages added later need no reinstall
  .venv/bin/python -m pip install -q -e ".[test]" --config-settings editable_mode=compat
  echo "$want" > "$stamp"
fi

for step in "$here"/provision-*.sh; do
  [ -e "$step" ] || continue
  bash "$step" "$top" || { echo "kvds setup: $(basename "$step") failed" >&2; exit 1; }
done
# A probe that raises is a kvds error (doctor exit 1, traceback on stderr): set-up is not done.
.venv/bin/python -m harness.cli doctor --json >/dev/null || { echo "kvds setup: kvds doctor reports a kvds error" >&2; exit 1; }
echo "kvds setup: ready"
