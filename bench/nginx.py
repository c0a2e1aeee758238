"""The neutral throughput server: Debian's nginx replaying a fixed SSE body on loopback.

No one here wrote it and one nginx worker on one core serves tens of thousands of small
streamed answers per second, far above any Python client. A POST to a static file is a
405 in nginx; `error_page 405 =200 $uri` turns it into the file. `/v1/chat/completions`
replays the body chosen by the first path segment (`/o64/v1/chat/completions` = 64 tokens),
so one server serves every output length; `/slow/...` drips the body at a fixed byte rate
(open streams for the memory measure), `/drip/...` at 1 KB/s (a 64-token answer lasts
~13 s: streams that stay open, then end, for tools that wait for every answer).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from net import wait_port

CONF = """
worker_processes {workers};
worker_rlimit_nofile 30000;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
daemon off;
events {{ worker_connections 20000; multi_accept on; }}
http {{
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  client_max_body_size 0;
  client_body_buffer_size 4m;
  client_body_temp_path {root}/body;
  proxy_temp_path {root}/proxy;
  fastcgi_temp_path {root}/fastcgi;
  uwsgi_temp_path {root}/uwsgi;
  scgi_temp_path {root}/scgi;
  sendfile on;
  tcp_nodelay on;
  types {{ }}
  default_type text/event-stream;
  server {{
    listen 127.0.0.1:{port} backlog=16384;
    root {root}/www;
    error_page 405 =200 $uri;
    location ~ /health$ {{ return 200 ""; }}
    location ~ /v1/models$ {{
      default_type application/json;
      return 200 '{{"object":"list","data":[{{"id":"bench-model","object":"model"}}]}}';
    }}
    location ~ ^/(o[0-9]+)/v1/chat/completions$ {{ try_files /$1.sse =404; }}
    # alias, not try_files: try_files redirects internally to /oN.sse, a location without
    # the limit, so the answer went out at once (measured: a /slow answer in 3.6 ms)
    location ~ ^/slow/(o[0-9]+)/v1/chat/completions$ {{
      limit_rate {slow_rate};
      alias {root}/www/$1.sse;
    }}
    location ~ ^/drip/(o[0-9]+)/v1/chat/completions$ {{
      limit_rate 1k;
      alias {root}/www/$1.sse;
    }}
  }}
}}
"""


class Nginx:
    """Start nginx pinned to `cpu` with its own config and document root; stop it by PID."""

    def __init__(
        self, root: Path, port: int, cpu: int | str, slow_rate_bytes: int = 64, workers: int = 1
    ) -> None:
        self.root, self.port, self.cpu = root, port, cpu  # cpu: one, or a taskset list
        self.slow_rate = slow_rate_bytes
        self.workers = workers
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = os.environ.get("GOLIVE_BENCH_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
        self.root.chmod(0o755)  # the worker runs as an unprivileged user when started as root
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        conf = self.root / "nginx.conf"
        conf.write_text(
            CONF.format(
                root=self.root, port=self.port, slow_rate=self.slow_rate, workers=self.workers
            )
        )
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(self.cpu), binary, "-c", str(conf), "-p", str(self.root)],
            stdout=subprocess.DEVNULL,
            stderr=(self.root / "stderr.log").open("wb"),
        )
        wait_port(self.port, self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        time.sleep(0.1)
