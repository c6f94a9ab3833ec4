#!/usr/bin/env bash
# Builds the control-plane binaries from Go modules into $1 (published atomically).
# Usage: build_binaries.sh OUT_DIR PIECE...   (pieces: etcd kube node kwok helm gomain)
# Env: K8S_VERSION, ETCD_VERSION, KWOK_VERSION. Each failing step names itself on stderr.
# The gomain piece builds any Go main package at an exact module version:
#   GOMAIN_MODULE (e.g. sigs.k8s.io/jobset), GOMAIN_VERSION (v0.10.1), GOMAIN_PACKAGE (the
#   import path of the main package, inside the module) and GOMAIN_NAME (the output file).
#   With GOMAIN_TEST=1 the package is a test package instead, compiled with `go test -c` into a
#   test binary (e.g. a module's own e2e suite, run later against a cluster).
#   With GOMAIN_OPTIMIZE=0 it is compiled without optimizations and inlining (-N -l): for programs
#   only tests run, whose speed no figure depends on (about a third less compile CPU).
set -euo pipefail
OUT=${1:?usage: build_binaries.sh OUT_DIR PIECE...}; shift
PIECES=${*:-etcd kube kwok}
K8S=${K8S_VERSION:-v1.36.3}; ETCD=${ETCD_VERSION:-v3.6.16}; KWOK=${KWOK_VERSION:-v0.7.0}
# The helm piece (HELM_VERSION) is no control-plane binary: built only when named.
HELM=${HELM_VERSION:-v3.22.0}
export GOTOOLCHAIN=${GOTOOLCHAIN:-local} GOWORK=off GOFLAGS=-modcacherw CGO_ENABLED=0
mkdir -p "$OUT"
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/envtest-build.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
# Every binary is linked with -s -w (no symbol table, no DWARF), so the DWARF the compiler would
# write into each package is thrown away at link: not writing it saves about 15% of compile CPU.
GCFLAGS="all=-dwarf=false"
step() { echo "==> envtest build: $*" >&2; }
fail() { echo "envtest build FAILED at step: $*" >&2; exit 1; }

# `go install helm.sh/helm/v3/cmd/helm@V` reads the module's version list, which the proxy may
# refuse here, so the exact module is downloaded, copied out of the read-only module cache and
# built in place (-mod=mod may rewrite its go.sum), with the
# ldflags of helm's own Makefile (version, and the default Kubernetes version `helm template`
# reports, taken from the client-go the module requires).
build_helm() {
  step "helm $HELM: download module"
  local dir cgo major minor
  dir=$(go mod download -json "helm.sh/helm/v3@$HELM" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])') \
    || fail "helm $HELM: go mod download"
  mkdir -p "$SCRATCH/helm" && cp -r "$dir" "$SCRATCH/helm/src" && chmod -R u+w "$SCRATCH/helm/src"
  cd "$SCRATCH/helm/src"
  cgo=$(sed -n 's#^[[:space:]]*k8s\.io/client-go v0\.\([0-9]*\)\..*#\1#p' go.mod | head -1)
  [ -n "$cgo" ] || fail "helm $HELM: client-go version not found in go.mod"
  major=1; minor=$cgo
  local ldf="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM"
  ldf+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldf+=" -X $p.k8sVersionMajor=$major -X $p.k8sVersionMinor=$minor"
  done
  step "helm $HELM: compile"
  GOFLAGS="-mod=mod -modcacherw" go build -trimpath -gcflags "$GCFLAGS" -ldflags "$ldf" -o "$SCRATCH/helm/helm" ./cmd/helm \
    || fail "helm $HELM: go build"
  "$SCRATCH/helm/helm" version --short | grep -qF "$HELM" || fail "helm $HELM: helm version"
  mv "$SCRATCH/helm/helm" "$OUT/helm.tmp" && mv "$OUT/helm.tmp" "$OUT/helm"
  echo "$HELM" > "$OUT/helm.version.tmp" && mv "$OUT/helm.version.tmp" "$OUT/helm.version"
}

build_etcd() {
  step "etcd $ETCD: resolve modules"
  mkdir -p "$SCRATCH/etcd" && cd "$SCRATCH/etcd"
  printf 'module local/etcd-bin\n\ngo 1.24.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD" > go.mod
  go get -tool "go.etcd.io/etcd/server/v3@$ETCD" || fail "etcd $ETCD: go get"
  go mod tidy || fail "etcd $ETCD: go mod tidy"
  step "etcd $ETCD: compile"
  go build -trimpath -gcflags "$GCFLAGS" -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=gomod" \
    -o "$SCRATCH/etcd/etcd" go.etcd.io/etcd/server/v3 || fail "etcd $ETCD: go build"
  "$SCRATCH/etcd/etcd" --version >/dev/null || fail "etcd $ETCD: --version"
  mv "$SCRATCH/etcd/etcd" "$OUT/etcd.tmp" && mv "$OUT/etcd.tmp" "$OUT/etcd"
}

# A module requiring k8s.io/kubernetes at $K8S with the staging replaces, in the current
# directory, and the ldflags that stamp the version: shared by the kube and node pieces.
kube_module() {
  local staging="v0.${K8S#v1.}" gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])') \
    || fail "kubernetes $K8S: go mod download"
  { echo "module local/k8s-test-bins"; echo
    grep -E '^go [0-9]' "$gomod"
    grep -E '^godebug ' "$gomod" || true
    echo; echo "require k8s.io/kubernetes $K8S"; } > go.mod
  # The staging modules are derived from the served go.mod: the list changes between minors.
  for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/.*#\1#p' "$gomod"); do
    go mod edit -replace="$m=$m@$staging"
  done
}

kube_ldflags() {
  local minor ldf="-s -w"
  minor=$(echo "$K8S" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=$K8S -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$ldf"
}

build_kube() {
  step "kubernetes $K8S: resolve modules"
  mkdir -p "$SCRATCH/kube" && cd "$SCRATCH/kube"
  kube_module
  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$K8S" \
               "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S" \
               "k8s.io/kubernetes/cmd/kube-scheduler@$K8S" \
               "k8s.io/kubernetes/cmd/kubectl@$K8S" || fail "kubernetes $K8S: go get"
  go mod tidy || fail "kubernetes $K8S: go mod tidy"
  step "kubernetes $K8S: compile kube-apiserver kube-controller-manager kube-scheduler kubectl"
  mkdir -p "$SCRATCH/kube/bin"
  go build -trimpath -gcflags "$GCFLAGS" -ldflags "$(kube_ldflags)" -o "$SCRATCH/kube/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl || fail "kubernetes $K8S: go build"
  "$SCRATCH/kube/bin/kube-apiserver" --version || fail "kubernetes $K8S: kube-apiserver --version"
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    mv "$SCRATCH/kube/bin/$b" "$OUT/$b.tmp" && mv "$OUT/$b.tmp" "$OUT/$b"
  done
}

# The node piece: kubelet and kube-proxy for a real node (Environment(real_node=True)), from
# the same module setup (and so mostly the same Go build cache) as the kube piece.
build_node() {
  step "kubernetes $K8S: resolve modules (node)"
  mkdir -p "$SCRATCH/node" && cd "$SCRATCH/node"
  kube_module
  go get -tool "k8s.io/kubernetes/cmd/kubelet@$K8S" "k8s.io/kubernetes/cmd/kube-proxy@$K8S" \
    || fail "kubernetes $K8S: go get (node)"
  go mod tidy || fail "kubernetes $K8S: go mod tidy (node)"
  step "kubernetes $K8S: compile kubelet kube-proxy"
  mkdir -p "$SCRATCH/node/bin"
  go build -trimpath -gcflags "$GCFLAGS" -ldflags "$(kube_ldflags)" -o "$SCRATCH/node/bin/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy || fail "kubernetes $K8S: go build (node)"
  "$SCRATCH/node/bin/kubelet" --version || fail "kubernetes $K8S: kubelet --version"
  for b in kubelet kube-proxy; do
    mv "$SCRATCH/node/bin/$b" "$OUT/$b.tmp" && mv "$OUT/$b.tmp" "$OUT/$b"
  done
}

build_kwok() {
  step "kwok $KWOK: compile"
  mkdir -p "$SCRATCH/kwok"
  GOBIN="$SCRATCH/kwok" go install -trimpath -gcflags "$GCFLAGS" \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK" "sigs.k8s.io/kwok/cmd/kwok@$KWOK" \
    || fail "kwok $KWOK: go install"
  mv "$SCRATCH/kwok/kwok" "$OUT/kwok.tmp" && mv "$OUT/kwok.tmp" "$OUT/kwok"
}

build_gomain() {
  local mod=${GOMAIN_MODULE:?} ver=${GOMAIN_VERSION:?} pkg=${GOMAIN_PACKAGE:?} name=${GOMAIN_NAME:?}
  local dir gcflags=$GCFLAGS
  if [ "${GOMAIN_OPTIMIZE:-1}" = 0 ]; then gcflags="all=-N -l -dwarf=false"; fi
  # `go install pkg@version` reads the module's version list (for deprecation notices), which
  # the proxy may refuse; downloading the exact version and building inside it does not.
  step "$mod@$ver: go mod download"
  dir=$(go mod download -json "$mod@$ver" | python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])') \
    || fail "$mod@$ver: go mod download"
  # A writable copy: the module cache is read-only and -mod=mod may rewrite go.mod/go.sum.
  mkdir -p "$SCRATCH/gomain" && cp -r "$dir" "$SCRATCH/gomain/src" && chmod -R u+w "$SCRATCH/gomain/src"
  cd "$SCRATCH/gomain/src"
  if [ "${GOMAIN_TEST:-0}" = 1 ]; then
    step "$mod@$ver: compile the tests of $pkg"
    GOFLAGS="-mod=mod -modcacherw" go test -c -trimpath -gcflags "$gcflags" -ldflags "-s -w" -o "$SCRATCH/gomain/$name" "$pkg" \
      || fail "$mod@$ver: go test -c $pkg"
    [ -f "$SCRATCH/gomain/$name" ] || fail "$mod@$ver: go test -c $pkg wrote no binary (no test files?)"
  else
    step "$mod@$ver: compile $pkg"
    GOFLAGS="-mod=mod -modcacherw" go build -trimpath -gcflags "$gcflags" -ldflags "-s -w" -o "$SCRATCH/gomain/$name" "$pkg" \
      || fail "$mod@$ver: go build $pkg"
  fi
  mv "$SCRATCH/gomain/$name" "$OUT/$name.tmp" && mv "$OUT/$name.tmp" "$OUT/$name"
  rm -rf "$SCRATCH/gomain"
}

for piece in $PIECES; do
  case "$piece" in
    helm) build_helm ;;
    etcd) build_etcd ;;
    kube) build_kube ;;
    node) build_node ;;
    kwok) build_kwok ;;
    gomain) build_gomain ;;
    *) fail "unknown piece '$piece' (want etcd, kube, node, kwok, helm or gomain)" ;;
  esac
done
step "done: $(ls "$OUT" | tr '\n' ' ')"
