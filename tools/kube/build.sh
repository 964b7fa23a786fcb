#!/usr/bin/env bash
# Builds the pinned control plane (versions.env) from the wrapper modules beside this script into a
# cache outside the repository, once per machine:
#   ${TAGPIN_KUBE_CACHE:-~/.cache/tagpin/kube}/<kubernetes version>/bin/
#     kube-apiserver kube-controller-manager kube-scheduler etcd kwok
#     kwok.x-k8s.io_stages.yaml argoproj.io_rollouts.yaml (the CRDs of kwok's Stages and Argo Rollouts)
# Each binary carries a stamp (a hash of its wrapper module's go.mod and go.sum, versions.env and
# the build flags); a binary whose stamp matches is not rebuilt. Prints progress and the time each build took. Without a Go
# toolchain it warns and exits 0, except under CI=true where it fails (the tests need the binaries).
# A lock serializes concurrent runs (several worktrees share the cache on one machine).
set -euo pipefail
trap 'echo "error: building the Kubernetes control plane failed (see above; tools/kube/build.sh)" >&2' ERR
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${TAGPIN_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tagpin/kube}
bin=$cache/$KUBERNETES_VERSION/bin

if ! command -v go >/dev/null; then
  if [ "${CI:-}" = true ]; then echo "error: go is not installed; it builds the Kubernetes control plane the tests run against" >&2; exit 1; fi
  echo "warning: go is not installed: the Kubernetes control plane (tools/kube) is not built; tests that need it skip" >&2
  exit 0
fi

mkdir -p "$bin"
exec 9>"$cache/.lock"
flock 9

# The machine is shared and has 2 cores: two compiles at a time, at low priority.
export GOMAXPROCS=${GOMAXPROCS:-2} GOFLAGS="-mod=readonly -buildvcs=false -p=${GOMAXPROCS:-2}" GOTOOLCHAIN=local CGO_ENABLED=0
# A build cache of our own, removed once everything is built: the binaries are what is kept.
export GOCACHE=$cache/go-build

stamp() {  # stamp <wrapper dir> <tags> <ldflags>
  { cat "$here/versions.env" "$here/$1/go.mod" "$here/$1/go.sum"; echo "$2 $3"; } | sha256sum | cut -c1-16
}

build() {  # build <wrapper dir> <output name> <package> <tags> <ldflags>
  local dir=$1 name=$2 pkg=$3 tags=$4 ldflags=$5 want start total done
  want=$(stamp "$dir" "$tags" "$ldflags")
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.$name.stamp" 2>/dev/null)" = "$want" ]; then
    echo "  $name: built ($bin/$name)"
    return
  fi
  start=$(date +%s)
  echo "  $name: downloading modules"
  (cd "$here/$dir" && go mod download)
  total=$(cd "$here/$dir" && go list -deps -tags "$tags" "$pkg" | wc -l)
  echo "  $name: compiling $pkg ($total packages)"
  # go build -v names each package as it compiles; print a count every 200, pass errors through.
  (cd "$here/$dir" && nice -n 10 go build -v -trimpath -tags "$tags" -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg" 2>&1) |
    awk -v name="$name" -v total="$total" '
      /[ :]/ { print; next }
      { n++; if (n % 200 == 0) { printf "  %s: %d/%d packages compiled\n", name, n, total; fflush() } }'
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$want" >"$bin/.$name.stamp"
  done=$(date +%s)
  echo "  $name: built in $((done - start)) s ($(du -h "$bin/$name" | cut -f1))"
}

overall=$(date +%s)
echo "Kubernetes control plane $KUBERNETES_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION -> $bin"
# The version stamps k/k's hack/lib/version.sh sets; the date is the release's own (reproducible).
kube_date=$(cd "$here/kubernetes" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
minor=${KUBERNETES_VERSION#v*.}; minor=${minor%%.*}
kube_ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$kube_date"
done
# Upstream's tags for non-debug builds (hack/lib/golang.sh); all three are static (CGO_ENABLED=0).
kube_tags=selinux,notest,grpcnotrace
for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
  build kubernetes "$cmd" "k8s.io/kubernetes/cmd/$cmd" "$kube_tags" "$kube_ldflags"
done
build etcd etcd go.etcd.io/etcd/server/v3 "" "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
build kwok kwok sigs.k8s.io/kwok/cmd/kwok "" "-s -w"
# kwok's Stage CRD, from the same module (tools/tagpin_local/kube/kubelet.py installs it)
kwok_dir=$(cd "$here/kwok" && go mod download -json sigs.k8s.io/kwok | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
crd=$kwok_dir/kustomize/crd/bases/kwok.x-k8s.io_stages.yaml
cp "$crd" "$bin/kwok.x-k8s.io_stages.yaml.tmp" && mv "$bin/kwok.x-k8s.io_stages.yaml.tmp" "$bin/kwok.x-k8s.io_stages.yaml"
# Argo Rollouts' published Rollout CRD (tools/tagpin_local/kube/argo.py installs it; nothing compiled)
# (its version is pinned in argo-rollouts/go.mod only: a line in versions.env would change every
# binary's stamp)
argo_dir=$(cd "$here/argo-rollouts" && go mod download -json github.com/argoproj/argo-rollouts | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
cp "$argo_dir/manifests/crds/rollout-crd.yaml" "$bin/argoproj.io_rollouts.yaml.tmp" && mv "$bin/argoproj.io_rollouts.yaml.tmp" "$bin/argoproj.io_rollouts.yaml"
if [ -d "$GOCACHE" ]; then go clean -cache && rm -rf "$GOCACHE"; fi
echo "Kubernetes control plane ready in $(($(date +%s) - overall)) s: $bin"
