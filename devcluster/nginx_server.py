"""A throwaway nginx load balancer, from Debian's `nginx-light` package.

`Balancer(upstream_ports).start()` writes a configuration into a temporary
directory and runs nginx in the foreground on 127.0.0.1 and a free port:
round-robin over the loopwire instances with no stickiness, WebSocket
upgrades passed through, responses not buffered (server-sent events flow as
they are made). It returns once nginx's own log says its workers started;
`stop()` ends it and removes the directory. Under root, the master process
binds and the workers run as `www-data`, as the package sets up.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from devcluster.foreground import Foreground
from devcluster.ports import free_port

NGINX = "/usr/sbin/nginx"
STARTED = "start worker process"
WORKER_USER = "www-data"

CONFIG = """\
{user}worker_processes 1;
pid {dir}/nginx.pid;
error_log stderr notice;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ''      close;
    }}
    upstream loopwire {{
{servers}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size {body_limit};
        location / {{
            proxy_pass http://loopwire;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
            proxy_next_upstream error timeout;
        }}
    }}
}}
"""


def unavailable_reason() -> str | None:
    if not Path(NGINX).exists():
        return "nginx is not installed (`make test` installs it when run as root)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(WORKER_USER)
        except KeyError:
            return f"running as root and there is no `{WORKER_USER}` user for nginx"
    return None


def config(
    directory: Path, port: int, upstreams: Sequence[int], body_limit: str = "64m"
) -> str:
    """The configuration text: round-robin over `upstreams` (ports)."""
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in upstreams)
    user = f"user {WORKER_USER};\n" if os.geteuid() == 0 else ""
    return CONFIG.format(
        user=user, dir=directory, port=port, servers=servers, body_limit=body_limit
    )


class Balancer(Foreground):
    name = "nginx"

    def __init__(self, upstreams: Sequence[int], *, port: int | None = None) -> None:
        super().__init__()
        self.upstreams = list(upstreams)
        self.port = port or 0
        self._dir: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def start(self) -> Balancer:
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        self._dir = Path(tempfile.mkdtemp(prefix="loopwire-nginx-"))
        self._dir.chmod(0o755)
        self.port = self.port or free_port()
        path = self._dir / "nginx.conf"
        path.write_text(config(self._dir, self.port, self.upstreams))
        command = [NGINX, "-p", str(self._dir), "-c", str(path), "-g", "daemon off;"]
        self.spawn(command, STARTED, self._dir)
        return self

    def stop(self) -> None:
        super().stop()  # SIGTERM: nginx's fast shutdown
        directory, self._dir = self._dir, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self) -> Balancer:
        return self.start()
