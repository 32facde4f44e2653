# OpenEnv server image: the hospital_marl environment behind FastAPI.
# Installs only the `server` extra, which must not pull torch.
#
#   docker build -t hospital-marl .
#   docker run --rm -p 8000:8000 hospital-marl
#   docker run --rm -p 8000:8000 -e HOSPITAL_SCENARIO=surge -e HOSPITAL_MAX_SESSIONS=128 hospital-marl
#
# Settings: HOSPITAL_SCENARIO, HOSPITAL_MAX_SESSIONS, HOSPITAL_MAX_HTTP_SESSIONS,
# HOSPITAL_HTTP_SESSION_TTL, HOSPITAL_MAX_MESSAGE_BYTES, HOSPITAL_IDLE_TIMEOUT,
# HOSPITAL_MAX_WEB_SESSIONS, HOSPITAL_MAX_SESSIONS_PER_CLIENT, HOSPITAL_ALLOWED_HOSTS,
# HOSPITAL_ALLOWED_ORIGINS, HOSPITAL_TOKEN, ENABLE_WEB_INTERFACE (see server/settings.py). Open http://localhost:8000/web/ for the web view.
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# bubblewrap: the sandbox of `hospital-marl evaluate --isolated` (SPEC §13; it also needs the
# container to allow unprivileged user namespaces, else --isolated says so and stops).
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir ".[server]"

# Not root: nothing in the server needs it (uid 1000 is also what Hugging Face Spaces use).
RUN useradd --create-home --uid 1000 app
USER app

# The numba kernel's compiled code is cached on disk; site-packages is not writable
# by `app`, so the cache lives in its home, and is filled at build time (warm start).
ENV NUMBA_CACHE_DIR=/home/app/.cache/numba
RUN python -c "from hospital_marl.core.hospital import warm_up; warm_up()"

# Scenario of a reset that names none; a client may still pick another at reset.
# The web view at /web is on (OpenEnv's switch); ENABLE_WEB_INTERFACE=false turns it off.
ENV HOSPITAL_SCENARIO=normal_day
ENV ENABLE_WEB_INTERFACE=true
# Host names: loopback only by default (the DNS-rebinding guard), which is what
# `docker run -p 8000:8000` + http://localhost:8000 needs. Served under another name (a Space's
# URL, a lab host), name it: -e HOSPITAL_ALLOWED_HOSTS=lab.example.org. Reachable beyond your
# machine, set a token too: -e HOSPITAL_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')
# (every request, WebSockets included, must then carry it; see docs/server.md).
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import os, urllib.request as u; t = os.environ.get('HOSPITAL_TOKEN'); u.urlopen(u.Request('http://127.0.0.1:8000/health', headers={'Authorization': 'Bearer ' + t} if t else {}), timeout=4)" || exit 1

# `server` is the console script OpenEnv's tooling expects (server.app:main); it
# runs uvicorn with the WebSocket frame cap and session limits of server/settings.py.
# tests/server/test_deploy.py starts exactly this command (host and port swapped
# for a free loopback port) and checks /health, /reset and /step.
CMD ["server", "--host", "0.0.0.0", "--port", "8000"]
