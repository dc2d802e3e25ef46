#!/usr/bin/env bash
# Installs the Debian 12 packages idem needs to build, test and benchmark, if any is missing.
# Safe to run again: it installs nothing when everything is there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang-19 libclang-19-dev llvm-19-dev libclang-cpp19-dev libclang-rt-19-dev
  libfmt-dev nlohmann-json3-dev libsimdjson-dev catch2 libssl-dev libbenchmark-dev
  libsqlite3-dev sqlite3
  libpq-dev postgresql-15
  libhiredis-dev redis-server
  libcpp-httplib-dev wrk
  libboost1.81-dev
  prometheus libcli11-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
# Package scripts must not start system services (PostgreSQL, Redis): the tests start their own.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ] && [ "$(id -u)" -eq 0 ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && created_policy=1
fi
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
[ "$created_policy" -eq 0 ] || rm -f "$policy"
