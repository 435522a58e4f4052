"""A local Google Cloud Storage for tests: fake-gcs-server behind hack/lib/gcsproxy.py, on 127.0.0.1.

TensorFlow's GCS filesystem reaches it through ``HTTPS_PROXY`` (the proxy answers CONNECT and
terminates TLS with a test CA that ``hack/gcs-emulator ca`` makes; ``CURL_CA_BUNDLE`` trusts it) and
skips real authentication with ``GOOGLE_AUTH_TOKEN_FOR_TESTING``. Tests that start TensorFlow run
inside ``hack/netns-run`` (the TF tier does), so ``storage.googleapis.com`` resolves nowhere and no
request can leave the machine; every listener here binds 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HACK = REPO / "hack"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def emulator_binary() -> Path:
    """Build fake-gcs-server once per pinned version (cached under ~/.cache/tfps) and return its path."""
    proc = subprocess.run(
        ["nice", "-n", "19", str(HACK / "gcs-emulator"), "bin"], capture_output=True, text=True, timeout=1800
    )
    if proc.returncode != 0:
        raise RuntimeError(f"hack/gcs-emulator bin failed:\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


@dataclass
class GcsEmulator:
    """fake-gcs-server + the TLS proxy, started by :meth:`start`, stopped by :meth:`stop`."""

    workdir: Path
    proxy_host: str = "127.0.0.1"
    """Where the TLS proxy listens: loopback, or the real node's bridge address for its pods (the emulator
    itself always listens on 127.0.0.1, reached only through the proxy and the test's own API calls)."""
    emulator_port: int = 0
    proxy_port: int = 0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def ca(self) -> Path:
        return self.workdir / "ca.crt"

    @property
    def proxy_url(self) -> str:
        """``HTTPS_PROXY`` for TensorFlow's GCS client."""
        return f"http://{self.proxy_host}:{self.proxy_port}"

    def start(self) -> GcsEmulator:
        binary = emulator_binary()
        subprocess.run([str(HACK / "gcs-emulator"), "ca", str(self.workdir)], check=True, timeout=60)
        self.emulator_port = _free_port()
        log = open(self.workdir / "emulator.log", "wb")  # noqa: SIM115 (kept open for the process's life)
        self.procs.append(
            subprocess.Popen(
                [
                    str(binary),
                    "-scheme",
                    "http",
                    "-host",
                    "127.0.0.1",
                    "-port",
                    str(self.emulator_port),
                    "-backend",
                    "memory",
                    "-public-host",
                    "storage.googleapis.com",
                    "-log-level",
                    "warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        self._wait_emulator()
        proxy = subprocess.Popen(
            [
                sys.executable,
                str(HACK / "lib" / "gcsproxy.py"),
                "--listen",
                f"{self.proxy_host}:0",
                "--upstream",
                f"127.0.0.1:{self.emulator_port}",
                "--cert",
                str(self.workdir / "server.crt"),
                "--key",
                str(self.workdir / "server.key"),
            ],
            stdout=subprocess.PIPE,
            stderr=open(self.workdir / "proxy.log", "wb"),  # noqa: SIM115
        )
        self.procs.append(proxy)
        assert proxy.stdout is not None
        line = proxy.stdout.readline().decode().split()
        if len(line) != 2 or line[0] != "ready":
            self.stop()
            raise RuntimeError(f"gcsproxy did not start: {line!r}; see {self.workdir / 'proxy.log'}")
        self.proxy_port = int(line[1])
        return self

    def _wait_emulator(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self._api("GET", "/storage/v1/b")
                return
            except (OSError, urllib.error.URLError):
                if self.procs[0].poll() is not None:
                    break
                time.sleep(0.1)
        raise RuntimeError(f"fake-gcs-server did not come up; see {self.workdir / 'emulator.log'}")

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs.clear()

    def _api(self, method: str, path: str, body: dict[str, object] | None = None) -> object:
        """The emulator's JSON API directly (plain HTTP on 127.0.0.1, not through the proxy)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.emulator_port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"} if data else {},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def put(self, bucket: str, name: str, data: bytes) -> None:
        """Write one object directly in the emulator."""
        q = urllib.request.quote(name, safe="")
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.emulator_port}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={q}",
            data=data,
            method="POST",
            headers={"Content-Type": "application/octet-stream"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()

    def get(self, bucket: str, name: str) -> bytes:
        """Read one object directly from the emulator."""
        q = urllib.request.quote(name, safe="")
        url = f"http://127.0.0.1:{self.emulator_port}/storage/v1/b/{bucket}/o/{q}?alt=media"
        with urllib.request.urlopen(url, timeout=30) as resp:
            data: bytes = resp.read()
            return data

    def create_bucket(self, name: str) -> str:
        self._api("POST", "/storage/v1/b", {"name": name})
        return name

    def objects(self, bucket: str, prefix: str = "") -> dict[str, int]:
        """Object name -> size, for every object under ``prefix``."""
        return {name: int(item.get("size", 0)) for name, item in self.listing(bucket, prefix).items()}

    def listing(self, bucket: str, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Object name -> its metadata (size, generation, ...), for every object under ``prefix``: the JSON
        API's object listing, as a GCS client's ``list_blobs(prefix=...)`` pages through it."""
        out: dict[str, dict[str, Any]] = {}
        token = ""
        while True:
            q = f"/storage/v1/b/{bucket}/o?prefix={urllib.request.quote(prefix)}"
            if token:
                q += f"&pageToken={urllib.request.quote(token)}"
            page = self._api("GET", q)
            assert isinstance(page, dict)
            for item in page.get("items", []):
                out[item["name"]] = item
            token = page.get("nextPageToken", "")
            if not token:
                return out

    def env(self) -> dict[str, str]:
        """What a TensorFlow process needs to use this emulator as gs:// (merged over ``os.environ``).

        Only the upper-case ``HTTPS_PROXY`` is set: libcurl reads it, gRPC (TensorFlow's PS/worker
        channels) reads only lower-case proxy variables; ``NO_PROXY`` keeps loopback direct anyway."""
        env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
        env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
        env.update(
            HTTPS_PROXY=self.proxy_url,
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
            CURL_CA_BUNDLE=str(self.ca),
            GOOGLE_AUTH_TOKEN_FOR_TESTING="emulator",
            NO_GCE_CHECK="True",
        )
        return env
