#!/usr/bin/env bash
# Checks the unit files in this folder with `systemd-analyze verify` and the example config with
# a TOML parser; exits non-zero on any error or warning.
#
# Needs no running systemd (CI runs in a container): the units are verified under a scratch root
# that holds a copy of the system's own units (for sysinit.target and friends), these units, and
# stub executables for every Exec*= command, so the check does not depend on what is installed.
# Requires the `systemd` package for systemd-analyze and its units.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

if ! command -v systemd-analyze >/dev/null 2>&1 || [ ! -d /usr/lib/systemd/system ]; then
    echo "error: systemd-analyze or /usr/lib/systemd/system is missing" >&2
    echo "hint: apt-get install -y --no-install-recommends systemd" >&2
    exit 2
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/etc/systemd/system" "$root/usr/lib/systemd"
cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"

units=()
for unit in "$here"/*.service "$here"/*.slice; do
    cp "$unit" "$root/etc/systemd/system/"
    units+=("$root/etc/systemd/system/$(basename "$unit")")
done

# Stubs for the executables the units name (Exec*=, prefix characters such as `-` stripped).
sed -n 's/^Exec[A-Za-z]*=[-@:+!]*//p' "$here"/*.service | awk '{ print $1 }' | sort -u |
    while read -r exe; do
        mkdir -p "$root$(dirname "$exe")"
        printf '#!/bin/sh\nexit 0\n' >"$root$exe"
        chmod 0755 "$root$exe"
    done

out=$(systemd-analyze verify --man=no --root="$root" "${units[@]}" 2>&1) || status=$?
status=${status:-0}
if [ -n "$out" ] || [ "$status" -ne 0 ]; then
    printf '%s\n' "$out" | sed "s|$root||g" >&2
    echo "error: systemd-analyze verify reported problems (exit status $status)" >&2
    exit 1
fi
echo "systemd units ok: $(cd "$here" && ls ./*.service ./*.slice | xargs -n1 basename | tr '\n' ' ')"

if command -v python3 >/dev/null 2>&1; then
    python3 - "$here/config.example.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    config = tomllib.load(f)
for table in ("ring", "cpus", "synthesis"):
    if table not in config:
        sys.exit(f"error: config.example.toml has no [{table}] table")
for array in ("gpu", "circuit"):
    if not config.get(array):
        sys.exit(f"error: config.example.toml has no [[{array}]] table")
print("config.example.toml ok")
PY
else
    echo "note: python3 not found, config.example.toml not checked" >&2
fi
