# yokebot: `yokebot run` (Slack/Discord, scheduler, HTTP on YOKEBOT_HTTP_PORT). Layers from least to most
# often changed: system packages, pinned dependencies (requirements.lock), then the code and the agents, so
# a code change rebuilds in seconds.
FROM python:3.11-slim

# bubblewrap: the sandbox runs the shell tool's commands under bwrap where the kernel allows user namespaces
# (docker-compose.yml says what the container needs for that). procps (free, uptime) and systemd (journalctl,
# systemctl): every program the shipped agents' shell allow-lists name is here (`yokebot doctor` names any that
# is missing; tests/test_container.py checks this list against agents/). EXTRA_PACKAGES: what MCP servers need, e.g.
# `--build-arg EXTRA_PACKAGES="nodejs npm git"` for servers started with npx. The user is in `adm`, the group
# that may read /var/log on Debian and Ubuntu hosts (mounted logs keep the host's numeric owner and group).
ARG EXTRA_PACKAGES=""
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap procps systemd ${EXTRA_PACKAGES} \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 --groups adm yokebot \
    && mkdir /data && chown yokebot /data

WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    YOKEBOT_DATABASE_URL=sqlite+aiosqlite:////data/yokebot.db YOKEBOT_AGENTS_DIR=/app/agents \
    YOKEBOT_HTTP_PORT=8080

COPY requirements.lock ./
RUN pip install --no-cache-dir -r requirements.lock

COPY pyproject.toml README.md alembic.ini ./
COPY bot ./bot
RUN pip install --no-cache-dir --no-deps .
COPY agents ./agents

USER yokebot
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('YOKEBOT_HTTP_PORT', '8080'), timeout=3)" || exit 1
CMD ["yokebot", "run"]
