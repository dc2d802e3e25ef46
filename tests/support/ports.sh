# tests/support/ports.sh — sourced by the server fixtures: find a free TCP port on 127.0.0.1.

port_in_use() {
  # A successful connect means somebody listens there.
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints a port nobody listens on, or fails naming the caller ($1).
pick_port() {
  local port
  for _ in $(seq 1 50); do
    port=$(( 20000 + RANDOM % 40000 ))
    if ! port_in_use "$port"; then
      echo "$port"
      return
    fi
  done
  echo "$1: no free port found" >&2
  exit 1
}
