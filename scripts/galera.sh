#!/usr/bin/env bash
# A three-node MariaDB Galera cluster on loopback, for payd's scale-out tests
# (e2e/galera_*_test.go, internal/galeratest) and for trying payd by hand.
#   scripts/galera.sh up      # fresh init (wipes $BASE/node{1,2,3}), bootstrap, join, create db payd
#   scripts/galera.sh status
#   scripts/galera.sh down    # stops the nodes by their pid files only
#   scripts/galera.sh start N # starts node N again after it died; it rejoins (IST or SST)
# GALERA_BASE (default scripts/.galera) holds the nodes' data, sockets, pid files and logs.
# Needs Debian's mariadb-server 10.11; installs galera-4 and rsync with apt when missing.
# Node i:  SQL 4306+i-1 | Galera 4567+10(i-1) | IST 4568+10(i-1) | SST(rsync) 4444+10(i-1)
# Never touches the system mariadbd (3306, /var/lib/mysql, /etc/mysql): every server and
# client call uses --defaults-file / --no-defaults so /etc/mysql/my.cnf is never read.
set -euo pipefail

BASE="${GALERA_BASE:-$(cd "$(dirname "$0")" && pwd)/.galera}"
MARIADBD=/usr/sbin/mariadbd
PROVIDER=/usr/lib/galera/libgalera_smm.so   # symlink -> /usr/lib/libgalera_smm.so (Debian galera-4)
RUN_USER=mysql
NODES=(1 2 3)
CLUSTER_ADDR="gcomm://127.0.0.1:4567,127.0.0.1:4577,127.0.0.1:4587"

sql_port()  { echo $((4306 + $1 - 1)); }
gal_port()  { echo $((4567 + 10 * ($1 - 1))); }
ist_port()  { echo $((4568 + 10 * ($1 - 1))); }
sst_port()  { echo $((4444 + 10 * ($1 - 1))); }
ndir()      { echo "$BASE/node$1"; }
cnf()       { echo "$BASE/node$1/my.cnf"; }
log()       { echo "[galera.sh] $*" >&2; }
die()       { log "ERROR: $*"; exit 1; }

# local socket client as OS root (root@localhost uses unix_socket auth after install-db)
sock_sql()  { mariadb --no-defaults -S "$(ndir "$1")/mysqld.sock" -uroot -N -B -e "$2"; }
tcp_sql()   { mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$(sql_port "$1")" -uroot -N -B -e "$2"; }
wsrep_var() { sock_sql "$1" "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | awk '{print $2}'; }

# pid of node $1 if it is alive AND really is our mariadbd for that node, else empty
node_pid() {
  local n=$1 f pid
  for f in "$(ndir "$n")/mysqld.pid" "$(ndir "$n")/launch.pid"; do
    [[ -s $f ]] || continue
    pid=$(tr -dc 0-9 < "$f")
    [[ -n $pid && -r /proc/$pid/cmdline ]] || continue
    if tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "--defaults-file=$(cnf "$n")"; then
      echo "$pid"; return 0
    fi
  done
  return 0
}

write_cnf() {
  local n=$1 d; d=$(ndir "$n")
  cat > "$(cnf "$n")" <<EOF
[mysqld]
user=$RUN_USER
datadir=$d/data
socket=$d/mysqld.sock
pid-file=$d/mysqld.pid
log-error=$d/error.log
port=$(sql_port "$n")
bind-address=127.0.0.1
skip-name-resolve
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=128M
innodb_flush_log_at_trx_commit=2
max_connections=300
wsrep_on=ON
wsrep_provider=$PROVIDER
wsrep_cluster_name=payd_galera_test
wsrep_cluster_address=$CLUSTER_ADDR
wsrep_node_name=node$n
wsrep_node_address=127.0.0.1:$(gal_port "$n")
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:$(gal_port "$n");ist.recv_addr=127.0.0.1:$(ist_port "$n");gcache.size=64M"
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$(sst_port "$n")
wsrep_slave_threads=2
EOF
  chmod 644 "$(cnf "$n")"   # mariadbd ignores world-writable option files
}

start_node() {   # $1 = node, $2.. = extra args (e.g. --wsrep-new-cluster)
  local n=$1; shift
  local d; d=$(ndir "$n")
  log "starting node$n $*"
  "$MARIADBD" --defaults-file="$(cnf "$n")" --user="$RUN_USER" "$@" \
      >>"$d/stdout.log" 2>&1 </dev/null &
  echo $! > "$d/launch.pid"
}

wait_synced() {  # $1 = node, $2 = timeout seconds
  local n=$1 t=${2:-180} i state ready
  for ((i = 0; i < t; i++)); do
    [[ -n $(node_pid "$n") ]] || { tail -n 30 "$(ndir "$n")/error.log" >&2 || true; die "node$n died during startup"; }
    state=$(wsrep_var "$n" wsrep_local_state_comment || true)
    ready=$(wsrep_var "$n" wsrep_ready || true)
    if [[ $state == Synced && $ready == ON ]]; then log "node$n Synced"; return 0; fi
    sleep 1
  done
  die "node$n not Synced after ${t}s (state='${state:-}'), see $(ndir "$n")/error.log"
}

# ensure_packages installs the Galera provider and rsync (the SST method) when missing.
ensure_packages() {
  local want=()
  [[ -e $PROVIDER ]] || want+=(galera-4)
  command -v rsync >/dev/null || want+=(rsync)
  ((${#want[@]} == 0)) && return 0
  command -v apt-get >/dev/null || die "missing ${want[*]} and no apt-get to install them"
  log "installing ${want[*]}"
  local sudo=(); ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${want[@]}" >&2
  [[ -e $PROVIDER ]] || die "wsrep provider $PROVIDER not found after installing galera-4"
}

cmd_up() {
  for n in "${NODES[@]}"; do
    [[ -z $(node_pid "$n") ]] || die "node$n already running (pid $(node_pid "$n")); run '$0 down' first"
  done
  command -v "$MARIADBD" >/dev/null || die "$MARIADBD not found (apt-get install mariadb-server)"
  ensure_packages
  for n in "${NODES[@]}"; do
    local d; d=$(ndir "$n")
    rm -rf "$d"; mkdir -p "$d/data"
    write_cnf "$n"
    chown -R "$RUN_USER:$RUN_USER" "$d"          # pid/socket/logs live in $d, written by mysql
    log "mariadb-install-db node$n"
    mariadb-install-db --no-defaults --user="$RUN_USER" --datadir="$d/data" \
        --skip-test-db >"$d/install.log" 2>&1 || { cat "$d/install.log" >&2; die "install-db node$n failed"; }
  done
  start_node 1 --wsrep-new-cluster
  wait_synced 1 120
  # Joiners one at a time: rsync SST replaces their freshly installed data dir with node1's.
  start_node 2; wait_synced 2 180
  start_node 3; wait_synced 3 180

  local size; size=$(wsrep_var 1 wsrep_cluster_size)
  [[ $size == 3 ]] || die "wsrep_cluster_size=$size, expected 3"
  # DDL/DCL is replicated (TOI), so running it on node1 covers all nodes.
  sock_sql 1 "CREATE DATABASE IF NOT EXISTS payd;
              CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
              GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
  for n in "${NODES[@]}"; do
    local ok=0
    for _ in $(seq 1 30); do
      if [[ $(tcp_sql "$n" "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME='payd'" 2>/dev/null) == 1 ]]; then
        ok=1; break
      fi
      sleep 1
    done
    ((ok)) || die "root@127.0.0.1 (empty password) over TCP not usable on node$n"
  done
  cmd_status
  log "cluster up: DSNs root:@tcp(127.0.0.1:4306|4307|4308)/payd"
}

cmd_down() {
  for n in 3 2 1; do       # bootstrap node last => it gets safe_to_bootstrap: 1
    local pid i; pid=$(node_pid "$n")
    if [[ -z $pid ]]; then log "node$n not running"; continue; fi
    log "stopping node$n (pid $pid)"
    kill -TERM "$pid"
    for ((i = 0; i < 90; i++)); do
      [[ -d /proc/$pid ]] || break
      sleep 1
    done
    if [[ -d /proc/$pid ]]; then log "node$n still alive after 90s, SIGKILL $pid"; kill -KILL "$pid" || true; fi
    rm -f "$(ndir "$n")/launch.pid"
  done
}

# cmd_start starts one node of a running cluster again (after it was killed):
# it rejoins through the others with IST, or SST when its state is too old.
cmd_start() {
  local n=${1:-}
  [[ $n == [123] ]] || die "usage: $0 start 1|2|3"
  [[ -z $(node_pid "$n") ]] || die "node$n already running (pid $(node_pid "$n"))"
  [[ -f $(cnf "$n") ]] || die "node$n was never set up; run '$0 up' first"
  rm -f "$(ndir "$n")/mysqld.pid"
  start_node "$n"
  wait_synced "$n" 180
}

cmd_status() {
  printf '%-6s %-8s %-6s %-5s %-9s %-8s %-6s\n' node pid port size state status ready
  for n in "${NODES[@]}"; do
    local pid; pid=$(node_pid "$n")
    if [[ -z $pid ]]; then printf '%-6s %-8s %-6s\n' "node$n" down "$(sql_port "$n")"; continue; fi
    printf '%-6s %-8s %-6s %-5s %-9s %-8s %-6s\n' "node$n" "$pid" "$(sql_port "$n")" \
      "$(wsrep_var "$n" wsrep_cluster_size)" "$(wsrep_var "$n" wsrep_local_state_comment)" \
      "$(wsrep_var "$n" wsrep_cluster_status)" "$(wsrep_var "$n" wsrep_ready)"
  done
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  start) cmd_start "${2:-}" ;;
  *) echo "usage: $0 up|down|status|start N" >&2; exit 2 ;;
esac
