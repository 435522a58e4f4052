"""The port of Kubernetes' resource.Quantity and CEL quantity library (tfps_operator/api/quantity.py)
that ``tfps validate`` evaluates the CRD's resource rules with (pure, no cluster).

The expectations are Kubernetes' own answers: the table below was printed by
``tests/api/quantity_oracle`` (k8s.io/apimachinery v0.37.2 ``resource.ParseQuantity``, ``AsInt64``,
``AsDec``), and :func:`test_agrees_with_apimachinery_itself` builds that oracle (Go, modules from the
module cache or the Go module proxy) and runs it on hundreds of strings. The API server end of it is
tests/api/test_agreement.py (resource rules on the real API server vs ``validate_job``).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import celpy
import pytest

from tfps_operator.api.models import QUANTITY_PATTERN
from tfps_operator.api.quantity import CEL_FUNCTIONS, QuantityError, parse

ORACLE = Path(__file__).parent / "quantity_oracle"

# (string, parses, Quantity.AsInt64 or None, exact value as apimachinery's AsDec prints it)
APIMACHINERY: list[tuple[str, bool, int | None, str]] = [
    ("0", True, 0, "0"),
    ("1", True, 1, "1"),
    ("2", True, 2, "2"),
    ("1000m", True, None, "1.000"),  # == 1, but a negative scale never converts: isInteger() is false
    ("1.0", True, None, "1.0"),
    ("1.", True, 1, "1"),
    (".5", True, None, "0.5"),
    ("500m", True, None, "0.500"),
    ("1k", True, 1000, "1000"),
    ("1.5k", True, 1500, "1500"),
    ("1Ki", True, 1024, "1024"),
    ("1.5Gi", True, None, "1610612736.000000000"),  # a fraction with a binary suffix: inf.Dec, no int64
    ("1Gi", True, 1073741824, "1073741824"),
    ("1024Mi", True, 1073741824, "1073741824"),
    ("1025Mi", True, 1074790400, "1074790400"),
    ("1e3", True, 1000, "1000"),
    ("1E3", True, 1000, "1000"),
    ("1e+3", True, 1000, "1000"),
    ("1e-3", True, None, "0.001"),
    ("1e-10", True, None, "0.000000001"),  # rounded up to nano units
    ("1.5n", True, None, "0.000000002"),
    ("1234567890123456789", True, None, "1234567890123456789.000000000"),
    ("9223372036854775807", True, None, "9223372036854775807.000000000"),
    ("9223372036854775808", True, None, "9223372036854775808.000000000"),
    ("9E", True, 9000000000000000000, "9000000000000000000"),
    ("10E", True, None, "10000000000000000000"),
    ("8Ei", True, None, "9223372036854775807"),  # binary quantities are capped at 2^63-1
    ("16Ei", True, None, "9223372036854775807"),
    ("+1", True, 1, "1"),
    ("00", True, 0, "0"),
    ("0.0", True, None, "0.0"),
    (".5Gi", True, None, "536870912.000000000"),
    ("1e999", True, None, "1" + "0" * 999),
    ("2.5e-3", True, None, "0.0025"),
    ("1001m", True, None, "1.001"),
    ("1000000000n", True, None, "1.000000000"),
    ("0.001k", True, 1, "1"),
    ("4.5Ki", True, None, "4608.000000000"),
    ("0.5Ki", True, None, "512.000000000"),
    ("Mi", True, 0, "0"),  # sic: an empty number is 0
    ("1K", False, None, ""),
    ("1ki", False, None, ""),
    ("lots", False, None, ""),
    ("", False, None, ""),
    ("1e1.5", False, None, ""),
    ("1.2.3", False, None, ""),
    ("1 Gi", False, None, ""),
    ("1e", False, None, ""),
]


@pytest.mark.parametrize(("text", "ok", "as_int64", "exact"), APIMACHINERY, ids=[c[0] or "empty" for c in APIMACHINERY])
def test_parse_matches_apimachinery(text: str, ok: bool, as_int64: int | None, exact: str) -> None:
    if not ok:
        with pytest.raises(QuantityError):
            parse(text)
        return
    q = parse(text)
    assert q.value == Fraction(Decimal(exact))
    assert q.as_int64 == as_int64


def test_the_crd_pattern_admits_only_what_apimachinery_parses() -> None:
    """The schema's pattern runs before the rules: anything it admits must parse (no rule errors)."""
    for text, ok, _, _ in APIMACHINERY:
        if re.match(QUANTITY_PATTERN, text):
            assert ok, f"{text!r} passes the CRD pattern but Kubernetes cannot parse it"
    assert not re.match(QUANTITY_PATTERN, "1e1.5")


def _eval(expr: str, **vars: Any) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expr), functions=CEL_FUNCTIONS).evaluate(
        {k: celpy.json_to_cel(v) for k, v in vars.items()}
    )


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # the examples of k8s.io/apiserver pkg/cel/library/quantity.go
        ("quantity('200M').compareTo(quantity('0.2G'))", 0),
        ("quantity('50M').compareTo(quantity('50Mi'))", -1),
        ("quantity('50Mi').compareTo(quantity('50M'))", 1),
        ("quantity('150Mi').isGreaterThan(quantity('100Mi'))", True),
        ("quantity('50Mi').isGreaterThan(quantity('100Mi'))", False),
        ("quantity('50M').isLessThan(quantity('100M'))", True),
        ("quantity('100M').isLessThan(quantity('50M'))", False),
        ("quantity('50000000G').isInteger()", True),
        ("quantity('50k').isInteger()", True),
        ("quantity('9999999999999999999999999999999999999G').isInteger()", False),
        ("quantity('50k').asInteger() == 50000", True),
        ("isQuantity('1.3G')", True),
        ("isQuantity('1.3Gi')", True),
        ("isQuantity('1,3G')", False),
        ("isQuantity('10000k')", True),
        ("isQuantity('200K')", False),
        ("isQuantity('Three')", False),
        # what the CRD's resource rules rely on
        ("quantity('1').compareTo(quantity('1000m'))", 0),
        ("quantity('1Gi').compareTo(quantity('1024Mi'))", 0),
        ("quantity(string(v)).compareTo(quantity('2'))", 0),
        ("sign(quantity('0'))", 0),
        ("quantity('50k').add(quantity('20k')) == quantity('70k')", True),
        ("quantity('50k').add(20).compareTo(quantity('50020'))", 0),
        ("quantity('50k').sub(20000).compareTo(quantity('30k'))", 0),
        ("quantity('50k').add(20).sub(quantity('100k')).sub(-50000).compareTo(quantity('20'))", 0),
        # an int on the wire, as the rules turn it into a quantity
        ("quantity('0').add(v).isInteger()", True),
        ("quantity('0').add(v).compareTo(quantity('2000m'))", 0),
        # cel-go's strings extension
        ("'hugepages-2Mi'.substring(10)", "2Mi"),
        ("'abc'.substring(3)", ""),
        ("'abc'.substring(1, 2)", "b"),
    ],
)
def test_cel_library(expr: str, expected: Any) -> None:
    assert _eval(expr, v=2) == expected


def test_cel_errors_are_cel_errors_not_exceptions() -> None:
    for expr in (
        "quantity('lots')",
        "quantity('500m').asInteger()",
        "quantity(1)",
        "'x'.compareTo('y')",
        "'ab'.substring(3)",
    ):
        with pytest.raises(celpy.CELEvalError):
            _eval(expr)


def test_agrees_with_apimachinery_itself(tmp_path: Path) -> None:
    """400 random quantity strings (and the table's): parse result, AsInt64, exact value, and Cmp, Add
    and Sub of every pair, compared with k8s.io/apimachinery itself.

    The oracle is built like hack/cluster builds the control plane: the machine's Go, modules pinned by
    its go.sum from the module cache or the Go module proxy. Without Go, or when the build fails, the
    test fails: the machine image has Go (hack/cluster builds with it), and a skip would hide a lost
    oracle."""
    go = shutil.which("go")
    assert go is not None, "no Go toolchain on PATH: the apimachinery oracle (and hack/cluster) need one"
    env = {**os.environ, "GOFLAGS": "-mod=readonly -buildvcs=false", "GOTOOLCHAIN": "local"}
    build = subprocess.run(
        [go, "build", "-o", str(tmp_path / "oracle"), "."],
        cwd=ORACLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, f"the apimachinery oracle does not build:\n{build.stderr.strip()[-3000:]}"
    rnd = random.Random(20261202)
    nums = ["", "0", "1", "2", "10", "123", "999999", "1000", "7", "123456789012345678"]
    fracs = ["", ".", ".0", ".5", ".25", ".001", ".000000001", ".123456789123"]
    sufs = [
        "",
        "m",
        "u",
        "n",
        "k",
        "M",
        "G",
        "T",
        "P",
        "E",
        "Ki",
        "Mi",
        "Gi",
        "Ti",
        "Pi",
        "Ei",
        "e3",
        "e-3",
        "e0",
        "E-12",
        "e+2",
        "e18",
        "e-20",
        "K",
        "e1.5",
    ]
    texts = [t for t, *_ in APIMACHINERY] + [
        (rnd.choice(nums) + rnd.choice(fracs) or "1") + rnd.choice(sufs) for _ in range(400)
    ]
    texts = list(dict.fromkeys(texts))
    out = subprocess.run(
        [str(tmp_path / "oracle")], input="\n".join(texts) + "\n", capture_output=True, text=True, check=True
    ).stdout.splitlines()
    parsed: dict[str, Any] = {}
    compared = 0
    for line in out:
        if line.startswith("CMP "):
            _, cmp, a, b = line.split(" ")
            assert parsed[a].compare(parsed[b]) == int(cmp), (a, b)
            compared += 1
            continue
        if line.startswith(("ADD ", "SUB ")):
            op, as_int, dec, a, b = line.split(" ")
            q = parsed[a].add(parsed[b] if op == "ADD" else parsed[b].negated())
            assert (q.value, q.as_int64) == (Fraction(Decimal(dec)), None if as_int == "null" else int(as_int)), line
            continue
        go = json.loads(line)
        try:
            q = parse(go["s"])
        except QuantityError:
            assert not go["ok"], f"{go['s']!r}: Kubernetes parses it, the port does not"
            continue
        assert go["ok"], f"{go['s']!r}: the port parses it, Kubernetes does not"
        assert (q.value, q.as_int64) == (Fraction(Decimal(go["dec"])), go["int"]), go
        parsed[go["s"]] = q
    assert len(parsed) > 300 and compared == len(parsed) ** 2
