"""The operator's API client gives up on an API server that stalls: a local TCP server that accepts
connections and never answers stands in for one."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import kopf
import pytest

from tfps_operator.kube.client import TIMEOUT_STATUS, ApiError, Kube
from tfps_operator.settings import from_args


class SilentServer:
    """Accepts every connection on 127.0.0.1 and reads, but never writes a byte."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent() -> SilentServer:
    server = SilentServer()
    yield server
    server.close()


def test_a_call_to_a_stalled_api_server_fails_after_the_total_timeout(silent: SilentServer) -> None:
    async def call() -> tuple[ApiError, float]:
        kube = await Kube.connect(
            lambda: kopf.ConnectionInfo(server=f"http://127.0.0.1:{silent.port}"), timeout=0.5, connect_timeout=0.5
        )
        started = time.monotonic()
        try:
            with pytest.raises(ApiError) as info:
                await kube.get("Pod", "default", "p")
            return info.value, time.monotonic() - started
        finally:
            await kube.close()

    error, took = asyncio.run(call())
    assert silent.accepted == 1  # it connected: the total limit, not the connect limit, ended it
    assert error.status == TIMEOUT_STATUS and error.reason == "Timeout"
    assert "GET Pod/p" in str(error) and "no answer within 0.5s" in str(error)
    assert took < 5, f"gave up after {took:.1f}s"


def test_every_write_is_bounded_too(silent: SilentServer) -> None:
    async def call() -> int:
        kube = await Kube.connect(lambda: kopf.ConnectionInfo(server=f"http://127.0.0.1:{silent.port}"), timeout=0.3)
        try:
            with pytest.raises(ApiError) as info:
                await kube.patch_status("default", "j", {"phase": "Running"}, "1")
            return info.value.status
        finally:
            await kube.close()

    assert asyncio.run(call()) == TIMEOUT_STATUS


def test_timeouts_are_settings_with_defaults() -> None:
    class Args:
        pass

    default = from_args(Args(), environ={})
    assert (default.api_timeout_seconds, default.api_connect_timeout_seconds) == (30.0, 5.0)
    tuned = from_args(Args(), environ={"TFPS_API_TIMEOUT_SECONDS": "12", "TFPS_API_CONNECT_TIMEOUT_SECONDS": "2"})
    assert (tuned.api_timeout_seconds, tuned.api_connect_timeout_seconds) == (12.0, 2.0)
    with pytest.raises(ValueError, match="TFPS_API_TIMEOUT_SECONDS"):
        from_args(Args(), environ={"TFPS_API_TIMEOUT_SECONDS": "0"})


def test_requests_share_a_bounded_pool_and_watches_have_their_own_connections(silent: SilentServer) -> None:
    async def call() -> int:
        kube = await Kube.connect(
            lambda: kopf.ConnectionInfo(server=f"http://127.0.0.1:{silent.port}"), timeout=10, max_connections=2
        )

        async def watch() -> None:
            async for _ in kube.watch("Pod", "default", "a=b", "1", 60):
                pass

        tasks = [asyncio.create_task(kube.get("Pod", "default", f"p{i}")) for i in range(5)]
        tasks += [asyncio.create_task(watch()), asyncio.create_task(watch())]
        try:
            deadline = time.monotonic() + 5
            while silent.accepted < 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # time for any connection beyond the bound to show up
            return silent.accepted
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await kube.close()

    # Five requests wait on two connections; each watch opens its own.
    assert asyncio.run(call()) == 4
