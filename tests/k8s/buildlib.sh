# Shared by build-helm.sh and build-kueue.sh (sourced): progress lines on stderr, and the lock that
# serializes concurrent builds of one cache (the second caller waits, then finds everything built).

T0=$(date +%s)
log() { printf '[%s +%4ss] %s\n' "$(date -u +%H:%M:%S)" "$(( $(date +%s) - T0 ))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# take_build_lock CACHE_ROOT WHAT: holds $CACHE_ROOT/build.lock on fd 9 until the script exits
take_build_lock() {
  command -v go >/dev/null || die "go not found in PATH"
  mkdir -p "$1"
  exec 9>"$1/build.lock"
  if ! flock -n 9; then
    log "another build of $2 is running; waiting for it ..."
    flock 9
  fi
}
