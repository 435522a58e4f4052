"""Server-side request counts from the API server's audit log (Metadata level, one line per stage)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any


def offset(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def requests_of(path: Path, start: int, user: str) -> list[dict[str, Any]]:
    """Every request (deduplicated by auditID) that ``user`` sent, from byte ``start`` of the log on."""
    seen: dict[str, dict[str, Any]] = {}
    with open(path, "rb") as f:
        f.seek(start)
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line being written right now
            if (ev.get("user") or {}).get("username") != user:
                continue
            ref = ev.get("objectRef") or {}
            seen.setdefault(
                ev["auditID"],
                {
                    "t": _ts(ev["requestReceivedTimestamp"]),
                    "verb": ev.get("verb"),
                    "user_agent": ev.get("userAgent", ""),
                    "resource": "/".join(filter(None, (ref.get("resource"), ref.get("subresource"))))
                    or ev.get("requestURI", ""),
                    "code": (ev.get("responseStatus") or {}).get("code"),
                },
            )
    return list(seen.values())


def summarize(reqs: list[dict[str, Any]], since: float) -> dict[str, Any]:
    """Counts before and after ``since`` (the first job create), the latter split by verb and resource."""
    after = [r for r in reqs if r["t"] >= since]
    by = Counter(f"{r['verb']} {r['resource']}" for r in after)
    codes = Counter(str(r["code"]) for r in after)
    agents = Counter(r["user_agent"].split(" ")[0] for r in reqs)
    return {
        "startup": len(reqs) - len(after),
        "workload": len(after),
        "by_verb_resource": dict(by.most_common()),
        "codes": dict(codes),
        "user_agents": dict(agents),
    }
