# syntax=docker/dockerfile:1
# The controller-manager image (`make docker-build IMG=...`).
#  - build: makes the wheels once, the project's and every dependency's (pip wheel . -w /wheels);
#  - runtime: a slim Python installing those wheels only (no index, no compiler, no sources),
#    running as a numeric non-root user, writing nothing outside /tmp (the Deployment mounts an
#    emptyDir there and keeps the root filesystem read-only).
ARG PYTHON_IMAGE=python:3.12-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY manager ./manager
COPY trainer ./trainer
COPY webhooks ./webhooks
RUN pip wheel . -w /wheels

FROM ${PYTHON_IMAGE} AS runtime
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    HOME=/tmp TMPDIR=/tmp
# Bytecode is compiled at install time, so the read-only root filesystem never needs writing.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels trainer-controller-manager \
    && trainer-controller-manager --help > /dev/null
USER 65532:65532
WORKDIR /tmp
# Webhook server, metrics, health probes (the Configuration's defaults).
EXPOSE 9443 8443 8081
ENTRYPOINT ["trainer-controller-manager"]
