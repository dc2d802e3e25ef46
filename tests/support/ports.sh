# tests/support/ports.sh — sourced by the server fixtures: find a free TCP port on 127.0.0.1.

port_in_use() {
  # A successful connect means somebody listens there.
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints a port nobody listens on, or fails naming the caller ($1). The port stays below Linux's
# ephemeral range (32768 and up): servers the tests stop and start again on the same port must
# find it free, and in that range a client's outgoing connection may take it while the server is
# down (a connect to a closed local port there can even connect to itself). It also stays clear of
# redis-cluster.sh's nodes (20000-22699) and their bus ports (30000-32699).
pick_port() {
  local port
  for _ in $(seq 1 50); do
    port=$(( 23000 + RANDOM % 7000 ))
    if ! port_in_use "$port"; then
      echo "$port"
      return
    fi
  done
  echo "$1: no free port found" >&2
  exit 1
}
