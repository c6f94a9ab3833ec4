# syntax=docker/dockerfile:1
# The controller-manager image (`make docker-build IMG=...`).
#  - build: makes the wheels once: every dependency's (and the build backend's) from
#    pyproject.toml alone, a layer reused until pyproject.toml changes; then the project's,
#    offline from those;
#  - runtime: a slim Python installing those wheels only (no index, no compiler, no sources),
#    the dependencies in a layer of their own (a code change rebuilds only the project's small
#    layer), running as a numeric non-root user, writing nothing outside /tmp (the Deployment
#    mounts an emptyDir there and keeps the root filesystem read-only).
# PYTHON_IMAGE is the base of both stages: upstream's python:3.12-slim. Where no registry is
# reachable, `make docker-build` passes a stand-in made from Debian's packages
# (hack/container-tools.sh).
ARG PYTHON_IMAGE=python:3.12-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb')); open('/requirements.txt', 'w').write('\n'.join(p['project']['dependencies'])); open('/build-requirements.txt', 'w').write('\n'.join(p['build-system']['requires']))" \
    && pip wheel -r /requirements.txt -r /build-requirements.txt -w /wheels \
    && cp /requirements.txt /wheels/ \
    && sha256sum /wheels/* > /dependencies.sha256
COPY README.md ./
COPY manager ./manager
COPY trainer ./trainer
COPY webhooks ./webhooks
# Offline: a dependency missing from the wheels above fails the build here.
RUN pip wheel --no-index --find-links=/wheels . -w /wheels \
    && sha256sum /wheels/trainer_controller_manager-*.whl > /project.sha256

FROM ${PYTHON_IMAGE} AS runtime
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    HOME=/tmp TMPDIR=/tmp
# podman and buildah reuse a cached `RUN --mount=type=bind,from=<stage>` layer although that
# stage changed (containers/buildah#6609): each install comes after the checksums of the wheels
# it installs, so new wheels make a new layer.
COPY --from=build /dependencies.sha256 /usr/local/share/trainer-controller-manager/
# Bytecode is compiled at install time, so the read-only root filesystem never needs writing.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels -r /wheels/requirements.txt
COPY --from=build /project.sha256 /usr/local/share/trainer-controller-manager/
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels trainer-controller-manager \
    && trainer-controller-manager --help > /dev/null
USER 65532:65532
WORKDIR /tmp
# Webhook server, metrics, health probes (the Configuration's defaults).
EXPOSE 9443 8443 8081
ENTRYPOINT ["trainer-controller-manager"]
