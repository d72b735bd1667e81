# Shared by build.sh, build-node.sh, build-helm.sh and build-kueue.sh (sourced): progress lines on stderr, and the lock that
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

# Add a replace line for every staging module k8s.io/kubernetes replaces with
# ./staging/src/k8s.io/<name>, pointing at the matching v0.<minor>.<patch>.
# Modules that are not published at that version (e.g. sample-*; none of the
# built commands import them) are replaced by an empty local stub module so
# that the module graph still resolves.
gen_staging_replaces() {
  local gomod="$1" stubdir="$2" staging_ver="$3" m ok=0 stub=0
  local mods
  mods="$(sed -n '/^replace (/,/^)/p; /^replace k8s\.io/p' "$gomod" |
          awk '$1 ~ /^k8s\.io\// && $3 ~ /^\.\/staging\/src\/k8s\.io\// {print $1}' | sort -u)"
  [[ -n "$mods" ]] || die "no staging replace directives found in $gomod"
  for m in $mods; do
    if GOFLAGS= go mod download "$m@$staging_ver" >/dev/null 2>&1; then
      echo "replace $m => $m $staging_ver" >>go.mod
      ok=$((ok + 1))
    else
      local d="$stubdir/${m#k8s.io/}"
      mkdir -p "$d"
      printf 'module %s\n\ngo 1.21\n' "$m" >"$d/go.mod"
      echo "replace $m => $d" >>go.mod
      log "  $m $staging_ver not available; using empty stub module"
      stub=$((stub + 1))
    fi
  done
  log "staging replaces: $ok at $staging_ver, $stub stubbed"
}

# k8s_wrapper_module DIR CMD...: in DIR (and cd'ed into it), a Go module requiring k8s.io/kubernetes $K8S_VERSION,
# its staging modules replaced by their releases (gen_staging_replaces), importing k8s.io/kubernetes/cmd/<CMD>
# for each CMD, with the module graph downloaded. Sets K8S_GOVER (the go line of kubernetes' go.mod) and
# K8S_VERSION_LDFLAGS (the -X flags that set `--version`). Uses NICE, log, die.
k8s_wrapper_module() {
  local dir="$1" kv major minor patch staging_ver kmod c p bdate
  shift
  kv="${K8S_VERSION#v}"
  IFS=. read -r major minor patch <<<"${kv%%-*}"
  staging_ver="v0.${minor}.${patch}${kv#"${kv%%-*}"}"
  mkdir -p "$dir" && cd "$dir"

  log "fetching k8s.io/kubernetes@$K8S_VERSION go.mod ..."
  kmod="$(GOFLAGS= go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
          sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "$kmod" ]] || die "could not download k8s.io/kubernetes@$K8S_VERSION"
  K8S_GOVER="$(awk '$1 == "go" {print $2; exit}' "$kmod")"
  log "k8s.io/kubernetes $K8S_VERSION needs go $K8S_GOVER"

  printf 'module tihub.local/k8s-build\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\n' "$K8S_GOVER" "$K8S_VERSION" >go.mod
  gen_staging_replaces "$kmod" "$dir.stubs" "$staging_ver"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } >tools.go
  log "resolving and downloading kubernetes module graph ..."
  nice -n "$NICE" go mod tidy -e >/dev/null 2>"$dir.tidy.err" || { cat "$dir.tidy.err"; die "go mod tidy failed"; }
  nice -n "$NICE" go mod download

  bdate="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  K8S_VERSION_LDFLAGS=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    K8S_VERSION_LDFLAGS+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    K8S_VERSION_LDFLAGS+=" -X $p.gitTreeState=clean -X $p.buildDate=$bdate"
  done
}
