"""A local HTTPS proxy in front of fake-gcs-server, for TensorFlow's GCS filesystem (hack/gcs-emulator).

TensorFlow always asks for https://storage.googleapis.com and https://www.googleapis.com; its libcurl
honours HTTPS_PROXY. This proxy answers ``CONNECT host:443`` (any host), terminates TLS with the test
certificate ``hack/gcs-emulator ca`` made, and forwards each request as plain HTTP to the emulator on
127.0.0.1, rewriting two things on the way:

- ``Transfer-Encoding: identity`` (which TensorFlow sends on empty POST/PUT bodies) is dropped: the
  emulator answers it with 501;
- ``X-Forwarded-Proto: https`` is added: the emulator builds the resumable-upload ``Location`` from the
  request's scheme, and TensorFlow must come back through this proxy over https.

Usage: python gcsproxy.py --listen 127.0.0.1:PORT --upstream 127.0.0.1:PORT --cert CRT --key KEY
Prints ``ready <port>`` on stdout once listening (``--listen 127.0.0.1:0`` picks a free port).
Listens on loopback, or on the real node's bridge address (``TFPS_REALNODE_NODE_IP``, 10.213.0.1 by
default: a network hack/realnode/node creates, where that node's pods reach it); refuses any other
listen address. The upstream is loopback only.
"""

from __future__ import annotations

import argparse
import http.client
import ipaddress
import os
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BRIDGE_ADDRESS = os.environ.get("TFPS_REALNODE_NODE_IP", "10.213.0.1")
"""The real node's bridge address (hack/realnode/node): its pods reach the host there."""
_HOP = {"connection", "proxy-connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-authorization"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        if self.server.verbose:
            sys.stderr.write("gcsproxy: " + (format % args) + "\n")

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_CONNECT(self) -> None:
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.flush()
        tls = self.server.tls.wrap_socket(self.connection, server_side=True)
        self.connection = tls
        self.rfile = tls.makefile("rb", self.rbufsize)
        self.wfile = tls.makefile("wb", 0)
        self.close_connection = False
        while not self.close_connection:  # the tunnelled requests, one after the other
            self.handle_one_request()

    def _body(self) -> bytes:
        te = self.headers.get("Transfer-Encoding", "").lower()
        if "chunked" in te:
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _forward(self) -> None:
        body = self._body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["X-Forwarded-Proto"] = "https"
        if self.command in ("POST", "PUT", "PATCH") or body:
            headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(*self.server.upstream, timeout=600)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except OSError as exc:
            self.send_error(502, f"emulator unreachable: {exc}")
            return
        finally:
            conn.close()
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int], tls: ssl.SSLContext, verbose: bool):
        super().__init__(listen, _Handler)
        self.upstream, self.tls, self.verbose = upstream, tls, verbose


def _addr(text: str, what: str, also: str | None = None) -> tuple[str, int]:
    """``host:port`` whose host is loopback (or ``also``, when given); anything else is refused."""
    host, _, port = text.rpartition(":")
    addr = ipaddress.ip_address(host)
    if not addr.is_loopback and (also is None or addr != ipaddress.ip_address(also)):
        allowed = "loopback addresses" + (f" or {also} (the real node's bridge)" if also else "")
        raise SystemExit(f"gcsproxy: --{what} {text}: {allowed} only")
    return host, int(port)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--upstream", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--verbose", action="store_true")
    a = p.parse_args(argv)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(a.cert, a.key)
    server = _Server(_addr(a.listen, "listen", BRIDGE_ADDRESS), _addr(a.upstream, "upstream"), tls, a.verbose)
    print(f"ready {server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
