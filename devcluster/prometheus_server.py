"""A throwaway Prometheus server, from Debian's `prometheus` package.

`PrometheusServer(targets).start()` writes a configuration that scrapes the
given `host:port` targets every second (on `metrics_path`, with a bearer
token when one is given), runs Prometheus in the foreground on 127.0.0.1
and a free port, its database in a temporary directory, and returns once
its log says it is ready for web requests (no polling); `stop()` ends it
and removes the directory. Under root it runs as the `prometheus` system
user the package creates. `query()` asks its HTTP API for an instant vector.
Prometheus applies new scrape targets at most every 5 s, so the first
scrape comes some 5 s after `start()` returns; then one per interval.

`check_metrics()` runs `promtool check metrics` on an exposition.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devcluster.foreground import Foreground
from devcluster.ports import free_port

PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = Path("/usr/bin/promtool")
SERVER_USER = "prometheus"
READY = "Server is ready to receive web requests."
JOB = "loopwire"
QUERY_LIMIT_S = 10.0


def unavailable_reason() -> str | None:
    """Why a server cannot be started here (None: it can)."""
    if not PROMETHEUS.exists() or not PROMTOOL.exists():
        return "Prometheus is not installed (`make test` installs it when run as root)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return "running as root and there is no `prometheus` user to run it"
    return None


def check_metrics(text: str) -> tuple[int, str]:
    """`promtool check metrics` on an exposition in the text format: its
    exit status (0: no problem found) and what it printed."""
    result = subprocess.run(
        [str(PROMTOOL), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result.returncode, (result.stdout + result.stderr).strip()


class PrometheusServer(Foreground):
    name = "prometheus"

    def __init__(
        self,
        targets: Sequence[str],
        *,
        metrics_path: str = "/metrics",
        bearer_token: str | None = None,
        scrape_interval: str = "1s",
    ) -> None:
        super().__init__()
        self.targets = list(targets)
        self.metrics_path = metrics_path
        self.bearer_token = bearer_token
        self.scrape_interval = scrape_interval
        self.port = 0
        self._dir: Path | None = None
        self._as_user = False

    @property
    def url(self) -> str:
        """Its base URL, e.g. `http://127.0.0.1:54321`."""
        if not self.port:
            raise RuntimeError("prometheus is not started")
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PrometheusServer:
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        self._dir = Path(tempfile.mkdtemp(prefix="loopwire-prometheus-"))
        try:
            config = self._dir / "prometheus.yml"
            config.write_text(json.dumps(self._config(), indent=2))  # JSON is YAML
            command = [str(PROMETHEUS)]
            self._as_user = os.geteuid() == 0
            if self._as_user:
                self._own(pwd.getpwnam(SERVER_USER))
                command = ["runuser", "-u", SERVER_USER, "--", *command]
            self.port = free_port()
            command += [
                f"--config.file={config}",
                f"--storage.tsdb.path={self._dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=info",
            ]
            self.spawn(command, READY, self._dir)
        except BaseException:
            self.stop()
            raise
        return self

    def _config(self) -> dict[str, Any]:
        job: dict[str, Any] = {
            "job_name": JOB,
            "scrape_interval": self.scrape_interval,
            "scrape_timeout": self.scrape_interval,
            "metrics_path": self.metrics_path,
            "static_configs": [{"targets": self.targets}],
        }
        if self.bearer_token is not None:
            assert self._dir is not None
            token = self._dir / "token"
            token.write_text(self.bearer_token)
            token.chmod(0o600)
            job["authorization"] = {"type": "Bearer", "credentials_file": str(token)}
        return {
            "global": {"scrape_interval": self.scrape_interval},
            "scrape_configs": [job],
        }

    def _own(self, user: pwd.struct_passwd) -> None:
        """Hand the directory and what is in it to the server's user."""
        assert self._dir is not None
        for path in [self._dir, *self._dir.iterdir()]:
            os.chown(path, user.pw_uid, user.pw_gid)

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The result of an instant query (`/api/v1/query`, evaluated now):
        for a vector, one `{"metric": {labels}, "value": [time, "text"]}`
        per series."""
        address = f"{self.url}/api/v1/query?" + urllib.parse.urlencode(
            {"query": promql}
        )
        with urllib.request.urlopen(address, timeout=QUERY_LIMIT_S) as response:
            answer = json.load(response)
        if answer.get("status") != "success":
            raise RuntimeError(f"prometheus refused {promql!r}: {answer}")
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def stop(self) -> None:
        """The server ended (`end_server`), then the directory removed."""
        self.end_server()
        directory, self._dir = self._dir, None
        self.port = 0
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self.start()
