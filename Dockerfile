# artbot: the wizard, script checks and dry runs. Installs with the same uv commands as the README.
# (Slack bot and GPU runner targets are added with their issues.)
FROM python:3.11-slim AS base

ENV PYTHONUNBUFFERED=1 \
    UV_LINK_MODE=copy \
    UV_PROJECT_ENVIRONMENT=/opt/artbot/.venv \
    PATH=/opt/artbot/.venv/bin:$PATH

RUN pip install --no-cache-dir uv \
    && useradd --create-home --uid 10001 artbot

WORKDIR /opt/artbot
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --locked --no-dev --no-install-project
COPY flows ./flows
COPY templates ./templates
COPY artbot ./artbot
COPY bot ./bot
COPY runner ./runner
RUN uv sync --locked --no-dev && chown -R artbot:artbot /opt/artbot

USER artbot
WORKDIR /home/artbot
ENTRYPOINT ["artbot"]
CMD ["chat"]
