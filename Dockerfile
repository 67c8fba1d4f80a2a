# picobot gateway image. Not built on the development machines (no container
# engine runs there): tests/test_deploy.py checks it by parsing.
#   docker build -t picobot .
#   docker run -d --name picobot --stop-timeout 45 -v picobot-data:/data \
#       -p 127.0.0.1:19876:19876 -e OPENAI_API_KEY picobot
# --stop-timeout: longer than gateway.shutdown_timeout_secs (docker's default is 10 s).
# The config is /data/config.json (PICOBOT_HOME=/data); inside a container the
# gateway must listen on 0.0.0.0 (with gateway.auth_token set) to be reachable
# through the published port. See docs/OPERATIONS.md.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY . .
RUN python -m venv /opt/picobot/.venv \
 && /opt/picobot/.venv/bin/pip install .

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/picobot/.venv/bin:$PATH \
    PICOBOT_HOME=/data
# bubblewrap: the bash tool's sandbox (tools.bash.sandbox). It needs user
# namespaces inside the container; see docs/OPERATIONS.md ("In a container").
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 picobot \
 && useradd --system --uid 10001 --gid picobot --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin picobot \
 && mkdir -p /data \
 && chown picobot:picobot /data \
 && chmod 0700 /data
COPY --from=build /opt/picobot/.venv /opt/picobot/.venv
WORKDIR /data
USER picobot
VOLUME /data
EXPOSE 19876
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:19876/health', timeout=4).status == 200 else 1)"]
STOPSIGNAL SIGTERM
CMD ["picobot", "gateway"]
