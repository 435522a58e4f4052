"""A local loopback port forwarded to a pod's port through the API server (the kubelet's port-forward, as
``kubectl port-forward`` does): one port-forward stream per accepted connection."""

from __future__ import annotations

import select
import socket
import socketserver
import threading
from typing import Any


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        from kubernetes import client
        from kubernetes.stream import portforward

        srv = self.server
        # A client of its own: the library's portforward() swaps its ApiClient's request method while it
        # opens the stream, so a shared one would turn requests made meanwhile on other threads (the
        # caller's, another connection's) into port-forwards.
        api = client.ApiClient(srv.core.api_client.configuration)
        try:
            core = client.CoreV1Api(api)
            try:
                pf = portforward(
                    core.connect_get_namespaced_pod_portforward, srv.pod, srv.namespace, ports=str(srv.port)
                )
                remote = pf.socket(srv.port)
            except Exception as e:  # the API server or kubelet refused: the browser sees the connection close
                srv.errors.append(str(e))
                return
            remote.setblocking(True)
            try:
                _pump(self.request, remote)
            finally:
                remote.close()
                pf.close()
        finally:
            api.close()


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    peers = {a: b, b: a}
    while True:
        ready, _, _ = select.select(list(peers), [], [], 60)
        for s in ready:
            data = s.recv(65536)
            if not data:
                return
            peers[s].sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, core: Any, pod: str, namespace: str, port: int, local_port: int):
        self.core, self.pod, self.namespace, self.port = core, pod, namespace, port
        self.errors: list[str] = []
        super().__init__(("127.0.0.1", local_port), _Handler)


class PortForward:
    """``127.0.0.1:<local_port>`` (0: any free port, see :attr:`local_port`) forwarded to ``pod:port``,
    served on a daemon thread until :meth:`close`."""

    def __init__(self, core: Any, pod: str, namespace: str, port: int, local_port: int = 0):
        self._server = _Server(core, pod, namespace, port, local_port)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="port-forward")
        self._thread.start()

    @property
    def local_port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def errors(self) -> list[str]:
        """Why connections could not be forwarded (the API server's or kubelet's refusal)."""
        return self._server.errors

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> PortForward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
