"""A TF-free stand-in for `python -m tfps_trainer`, to test the local supervisor's rules in seconds.

It honours the same interface as the real trainer (TF_CONFIG, TFPS_JOB, TFPS_PROGRESS_HOST,
TFPS_TERMINATION_LOG): ps/worker hold their TF_CONFIG port until SIGTERM; the chief counts steps
(resuming from a "checkpoint" file under <root>/checkpoints), serves /status, and exits 0 at the
target step, failing if a PS stops answering. The real trainer is exercised by the @tf tests.
Env knobs: FAKE_STEP_S (seconds per step), FAKE_FAIL_ROLE/FAKE_FAIL_CODE (that role exits at once),
FAKE_FINAL_UNSEEN (the final save never shows on /status: the chief exits before the next poll).
"""

import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

cfg = json.loads(os.environ["TF_CONFIG"])
job = json.loads(os.environ["TFPS_JOB"])
role, index = cfg["task"]["type"], cfg["task"]["index"]
host, port = cfg["cluster"][role][index].rsplit(":", 1)


def fail(code: int, reason: str) -> None:
    Path(os.environ["TFPS_TERMINATION_LOG"]).write_text(reason + "\n")
    print(reason, file=sys.stderr, flush=True)
    sys.exit(code)


if os.environ.get("FAKE_FAIL_ROLE") == role:
    fail(int(os.environ.get("FAKE_FAIL_CODE", "1")), f"{role} told to fail")

server = socket.socket()
try:
    server.bind((host, int(port)))
except OSError as exc:
    fail(1, f"{role}-{index}: cannot bind {host}:{port}: {exc}")
server.listen()
print(f"{role}-{index} listening on {host}:{port}", flush=True)

ckpt_dir = Path(job["paths"]["root"]) / "checkpoints"
ckpt_dir.mkdir(parents=True, exist_ok=True)
ckpt_file = ckpt_dir / "fake-step"

if role == "evaluator":  # "evaluates" checkpoints until the final one, then exits 0
    while not (ckpt_file.exists() and ckpt_file.read_text() == str(job["steps"])):
        time.sleep(0.1)
    Path(os.environ["TFPS_TERMINATION_LOG"]).write_text(
        f"fake evaluator: evaluated final checkpoint step {job['steps']}\n"
    )
    sys.exit(0)
if role != "chief":
    while True:
        time.sleep(1)

state = {"step": int(ckpt_file.read_text()) if ckpt_file.exists() else 0, "ckpt": None}
state["ckpt"] = state["step"] or None
print(f"chief starting at step {state['step']}", flush=True)


class Status(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(
            {
                "step": state["step"],
                "loss": 1.0 / (1 + state["step"]),
                "steps_per_second": 20.0,
                "state": "training",
                "checkpoint": {"step": state["ckpt"], "path": str(ckpt_file), "time": None} if state["ckpt"] else None,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


http = ThreadingHTTPServer((os.environ["TFPS_PROGRESS_HOST"], job["progress_port"]), Status)
threading.Thread(target=http.serve_forever, daemon=True).start()


def save(seen: bool = True):
    ckpt_file.write_text(str(state["step"]))
    if seen:
        state["ckpt"] = state["step"]


def ps_up(timeout: float) -> bool:
    for addr in cfg["cluster"]["ps"]:
        h, p = addr.rsplit(":", 1)
        try:
            socket.create_connection((h, int(p)), timeout=timeout).close()
        except OSError:
            return False
    return True


deadline = time.monotonic() + 60  # like the real chief, wait for the PS to come up first
while not ps_up(1):
    if time.monotonic() > deadline:
        fail(1, "parameter servers never came up")
    time.sleep(0.2)

every = job["checkpoint"]["every_steps"] or 10
while state["step"] < job["steps"]:
    time.sleep(float(os.environ.get("FAKE_STEP_S", "0.05")))
    if not ps_up(1):
        fail(1, "lost a parameter server")
    state["step"] += 1
    if state["step"] % every == 0:
        save()
save(seen=not os.environ.get("FAKE_FINAL_UNSEEN"))
Path(os.environ["TFPS_TERMINATION_LOG"]).write_text(
    f"completed step {state['step']}/{job['steps']}; final checkpoint {ckpt_file}\n"
)
print(f"chief done at step {state['step']}", flush=True)
