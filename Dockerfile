# Two images, one file: `docker build --target bot .` and `docker build --target runner .`.
# Both install with the README's command (uv sync from the lock) and run as a non-root user.

# ---- shared: the project and its locked dependencies --------------------------------------
FROM python:3.11-slim AS app
ENV PYTHONUNBUFFERED=1 \
    UV_LINK_MODE=copy \
    UV_PROJECT_ENVIRONMENT=/opt/artbot/.venv \
    PATH=/opt/artbot/.venv/bin:$PATH
# bubblewrap: the sandbox users' code runs in (README "Isolation"). As the non-root bot it needs
# user namespaces, which Docker's default seccomp profile refuses: run the bot container with a
# profile that allows them (or --security-opt seccomp=unconfined), or the bot runs no user code.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir uv \
    && useradd --create-home --uid 10001 artbot
WORKDIR /opt/artbot
COPY pyproject.toml uv.lock .python-version README.md ./
RUN uv sync --locked --no-dev --compile-bytecode --no-install-project
COPY flows ./flows
COPY templates ./templates
COPY artbot ./artbot
COPY checks ./checks
COPY config ./config
COPY isolation ./isolation
COPY assistant ./assistant
COPY storage ./storage
COPY bot ./bot
COPY runner ./runner
COPY manifests ./manifests
RUN uv sync --locked --no-dev --compile-bytecode && chown -R artbot:artbot /opt/artbot

# ---- the Slack bot: `artbot serve` (HTTP on $PORT, or Socket Mode; /healthz on $PORT in both) ----
FROM app AS bot
USER artbot
WORKDIR /home/artbot
ENV XDG_DATA_HOME=/home/artbot/data
EXPOSE 3000
HEALTHCHECK CMD python -c "import urllib.request,os; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"PORT\",\"3000\")}/healthz')" || exit 1
ENTRYPOINT ["artbot"]
CMD ["serve"]

# ---- the GPU runner: `artbot runner serve` on a CUDA host (docker run --gpus all ...) -------
FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04 AS runner
ENV PYTHONUNBUFFERED=1 \
    UV_LINK_MODE=copy \
    UV_PROJECT_ENVIRONMENT=/opt/artbot/.venv \
    UV_PYTHON_INSTALL_DIR=/opt/uv-python \
    PATH=/opt/artbot/.venv/bin:/opt/uv/bin:$PATH
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates tini \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/uv && /opt/uv/bin/pip install --no-cache-dir uv \
    && useradd --create-home --uid 10001 artbot
WORKDIR /opt/artbot
COPY --from=app /opt/artbot /opt/artbot
# The runner's own environment; each job's script brings its pinned dependencies (uv run --script).
RUN uv sync --locked --no-dev --compile-bytecode && chown -R artbot:artbot /opt/artbot /opt/uv-python
USER artbot
WORKDIR /home/artbot
ENV XDG_DATA_HOME=/home/artbot/data \
    UV_CACHE_DIR=/home/artbot/.cache/uv \
    ARTBOT_RUNNER_HOST=0.0.0.0 \
    ARTBOT_RUNNER_PORT=8080
EXPOSE 8080
# tini is PID 1: it reaps the orphans a training job leaves, which the runner must not collect.
ENTRYPOINT ["tini", "--", "artbot"]
CMD ["runner", "serve"]
