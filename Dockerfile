FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    YOKEBOT_DATABASE_URL=sqlite+aiosqlite:////data/yokebot.db YOKEBOT_AGENTS_DIR=/app/agents
COPY pyproject.toml README.md alembic.ini ./
COPY bot ./bot
RUN pip install --no-cache-dir '.[tokenizer]' && useradd --create-home --uid 10001 yokebot && mkdir /data && chown yokebot /data
COPY agents ./agents
USER yokebot
VOLUME /data
EXPOSE 8080
HEALTHCHECK CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=3)" || exit 1
CMD ["yokebot", "run"]
