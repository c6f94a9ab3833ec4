#!/usr/bin/env bash
# Container tools on a Debian machine without a usable container runtime or registry (these
# development machines and CI): podman + buildah on runc, configured for what the kernel allows,
# and a Python base image made locally from Debian's packages. Idempotent: packages are installed
# only when missing, images are made once and cached. `make container-tools` runs it; its stdout
# is shell (`eval "$(make -s container-tools)"`), everything else goes to stderr.
#
# Why each piece (docs: /README.md, "The image"):
#  - runc, not crun: crun refuses cgroup v1 hybrid mounts;
#  - default_ulimits at the hard limits: root lacks CAP_SYS_RESOURCE, so a container cannot get
#    more open files than the host's hard limit, nor more processes than podman's own limit;
#  - the containers.conf is our own file (CONTAINERS_CONF), the system's is left alone;
#  - the base: debootstrap --variant=minbase of the host's suite from the mirror apt uses
#    (read from /etc/apt/sources.list*, never hard-coded), with python3 and pip, the host's CA
#    certificates added (pip reaches the package index through the same TLS setup as the host).
#    It stands in for upstream's python:3.x-slim; its Python is the suite's (bookworm: 3.11).
#
# Environment: CONTAINER_CACHE (default ~/.cache/trainer-py/images), DEBIAN_MIRROR (default:
# apt's, from $APT_ETC/sources.list*, APT_ETC=/etc/apt), DEBIAN_SUITE (default: the host's
# VERSION_CODENAME), PYTHON_IMAGE (build: another base than the stand-in).
set -euo pipefail

CACHE=${CONTAINER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainer-py/images}
APT_ETC=${APT_ETC:-/etc/apt}
# Bumped whenever the recipe below changes what the images contain.
RECIPE=1
PACKAGES=(podman buildah runc debootstrap uidmap slirp4netns fuse-overlayfs
  containernetworking-plugins catatonit conmon iptables)

log() { echo "container-tools: $*" >&2; }
die() { log "$*"; exit 1; }

suite() {
  if [[ -n ${DEBIAN_SUITE:-} ]]; then echo "$DEBIAN_SUITE"; return; fi
  # shellcheck disable=SC1091
  (. /etc/os-release && [[ ${ID:-} == debian && -n ${VERSION_CODENAME:-} ]] && echo "$VERSION_CODENAME") ||
    die "not a Debian release with a codename (/etc/os-release); set DEBIAN_SUITE and DEBIAN_MIRROR"
}

# The first mirror apt uses for "$1" (component main): one-line sources.list entries and
# deb822 .sources files alike.
mirror() {
  local want=$1
  if [[ -n ${DEBIAN_MIRROR:-} ]]; then echo "$DEBIAN_MIRROR"; return; fi
  local found
  found=$(
    for f in "$APT_ETC"/sources.list "$APT_ETC"/sources.list.d/*.list; do
      [[ -f $f ]] || continue
      # deb [options] URI suite components...
      sed -E 's/#.*//; s/\[[^]]*\]//' "$f" | awk -v s="$want" '$1 == "deb" && $3 == s { print $2 }'
    done
    for f in "$APT_ETC"/sources.list.d/*.sources; do
      [[ -f $f ]] || continue
      # stanzas separated by blank lines; Types, URIs, Suites, Enabled fields
      awk -v s="$want" '
        function flush() {
          if (types ~ /(^| )deb( |$)/ && enabled != "no" && (" " suites " ") ~ (" " s " ")) {
            split(uris, u, " "); print u[1]
          }
          types = uris = suites = ""; enabled = "yes"
        }
        BEGIN { enabled = "yes" }
        /^[ \t]*#/ { next }
        /^[ \t]*$/ { flush(); next }
        {
          key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
          if (key == "types") types = $0
          else if (key == "uris") uris = $0
          else if (key == "suites") suites = $0
          else if (key == "enabled") enabled = tolower($0)
        }
        END { flush() }' "$f"
    done | head -n 1
  )
  [[ -n $found ]] || die "no apt source for suite $want in /etc/apt/sources.list*; set DEBIAN_MIRROR"
  echo "$found"
}

installed() { dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q '^install ok installed$'; }

packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
  ((${#missing[@]})) || return 0
  [[ $(id -u) == 0 ]] || die "missing packages (${missing[*]}): run as root, or install them"
  log "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
}

conf() {
  local file=$CACHE/containers.conf tmp
  tmp=$(mktemp "$CACHE/.containers.conf.XXXXXX")
  chmod 644 "$tmp"
  cat > "$tmp" <<CONF
# Written by hack/container-tools.sh: podman and buildah on these machines (CONTAINERS_CONF).
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
  if cmp -s "$tmp" "$file"; then rm -f "$tmp"; else mv "$tmp" "$file"; log "wrote $file"; fi
  export CONTAINERS_CONF=$file
}

label() { podman image inspect --format "{{ index .Labels \"$2\" }}" "$1" 2>/dev/null || true; }

base_image() {  # localhost/trainer-py/debian-python:<suite>, from a cached rootfs tarball
  local suite=$1 image=$2 tarball=$CACHE/debian-python-$suite.r$RECIPE.tar
  [[ $(label "$image" trainer-py.recipe) == "$RECIPE" ]] && return 0
  if [[ ! -s $tarball ]]; then
    local url root started=$SECONDS
    url=$(mirror "$suite")
    root=$(mktemp -d "$CACHE/.rootfs.XXXXXX")
    log "debootstrap $suite from $url (minbase + python3, pip)"
    if ! debootstrap --variant=minbase --include=python3,python3-pip,ca-certificates \
        "$suite" "$root" "$url" > "$CACHE/debootstrap.log" 2>&1; then
      tail -n 20 "$CACHE/debootstrap.log" >&2
      rm -rf "$root"
      die "debootstrap failed (log: $CACHE/debootstrap.log)"
    fi
    # slim: no package lists, caches, docs or man pages (python:3.x-slim keeps none either)
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
      "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
      "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/*
    tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
    rm -rf "$root"
    mv "$tarball.tmp" "$tarball"
    log "rootfs cached as $tarball ($((SECONDS - started)) s)"
  fi
  podman import --change "LABEL trainer-py.recipe=$RECIPE" --change 'CMD ["python3"]' \
    "$tarball" "$image" > /dev/null
  log "imported $image"
}

python_image() {  # the stand-in for python:3.x-slim, FROM the base
  local base=$1 image=$2 ctx
  [[ $(label "$image" trainer-py.recipe) == "$RECIPE" ]] && return 0
  ctx=$(mktemp -d "$CACHE/.context.XXXXXX")
  mkdir "$ctx/ca"
  # The host's own CA certificates (a proxy's, a company's): what its pip trusts.
  if compgen -G '/usr/local/share/ca-certificates/*.crt' > /dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$ctx/ca/"
  fi
  cat > "$ctx/Containerfile" <<CONTAINERFILE
FROM $base
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates > /dev/null 2>&1 \\
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED \\
 && ln -sf /usr/bin/python3 /usr/local/bin/python \\
 && ln -sf /usr/bin/pip3 /usr/local/bin/pip \\
 && find /usr/lib/python3* -name __pycache__ -prune -exec rm -rf {} +
ENV LANG=C.UTF-8 PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_ROOT_USER_ACTION=ignore
LABEL trainer-py.recipe=$RECIPE trainer-py.stand-in-for=python:3-slim
CMD ["python3"]
CONTAINERFILE
  log "building $image"
  podman build --pull=never --network=host --layers=false -q -t "$image" "$ctx" > /dev/null
  rm -rf "$ctx"
}

setup() {
  local suite
  suite=$(suite)
  packages
  mkdir -p "$CACHE"
  exec 9> "$CACHE/.lock"
  flock 9  # one setup at a time (parallel test runs share the cache and podman's storage)
  conf
  BASE_IMAGE=localhost/trainer-py/debian-python:$suite
  STAND_IN=localhost/trainer-py/python-slim:$suite
  base_image "$suite" "$BASE_IMAGE"
  python_image "$BASE_IMAGE" "$STAND_IN"
  exec 9>&-
}

# `podman build` of the Dockerfile in the current directory as <image>, on the stand-in
# (PYTHON_IMAGE overrides it), as `make docker-build` runs it here; more arguments go to the
# build. The build stage is tagged too (localhost/trainer-py/build-stage), so that the clean-up
# after the build keeps what the next build reuses. RUN gets no network namespace of its own
# (--network=host: nothing to set up on the host).
build() {
  local image=$1 since base
  shift
  setup
  base=${PYTHON_IMAGE:-$STAND_IN}
  since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local common=(--pull=never --network=host --build-arg "PYTHON_IMAGE=$base")
  podman build "${common[@]}" --target build -t localhost/trainer-py/build-stage:latest . >&2
  (set -x; podman build "${common[@]}" "$@" -t "$image" .)
  gc "$since"
}

# Images built on the base (they carry its label) that nothing names or builds on any more,
# created before $1: what earlier builds left behind (a rebuilt tag's old image, a stage's old
# layers). `podman rmi` also removes their untagged parents; an image a container uses stays.
gc() {
  local until=$1 ids
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$CACHE/containers.conf}
  for _ in 1 2 3; do
    ids=$(podman images -aq --no-trunc --filter dangling=true --filter label=trainer-py.recipe \
      --filter "until=$until")
    [[ -n $ids ]] || return 0
    # shellcheck disable=SC2086
    podman rmi $ids > /dev/null 2>&1 || true
  done
}

case ${1:-setup} in
  setup)
    setup
    echo "export CONTAINERS_CONF=$CONTAINERS_CONF"
    echo "# base image: $STAND_IN (make docker-build passes it as PYTHON_IMAGE)"
    ;;
  build) [[ -n ${2:-} ]] || die "usage: $0 build <image> [podman build args]"; shift; build "$@" ;;
  mirror) mirror "$(suite)" ;;
  gc) [[ -n ${2:-} ]] || die "usage: $0 gc <timestamp>"; gc "$2" ;;
  *) die "usage: $0 [setup | build <image> [podman build args] | mirror | gc <timestamp>]" ;;
esac
