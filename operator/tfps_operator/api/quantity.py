"""Kubernetes resource quantities, as the API server's CEL quantity library sees them.

The CRD's rules compare resource quantities with the Kubernetes CEL library
(``quantity('1Gi').compareTo(quantity('1024Mi')) == 0``, ``.isInteger()``; k8s.io/apiserver
``pkg/cel/library/quantity.go``, in CRD rules since Kubernetes 1.28). celpy has no such library, so
``tfps validate`` registers :data:`CEL_FUNCTIONS`, a port of what it needs:

* :func:`parse` follows ``resource.ParseQuantity`` (k8s.io/apimachinery ``pkg/api/resource``) line by
  line, including its two representations: a quantity that fits the int64 fast path is an
  ``int64Amount`` (value × 10^scale), any other one an ``inf.Dec`` rounded up to nano units (and capped
  at 2^63-1 for binary suffixes). The value is kept exactly as a :class:`~fractions.Fraction`.
* ``compareTo``/``isLessThan``/``isGreaterThan`` compare the exact values (``Quantity.Cmp``).
* ``isInteger``/``asInteger`` follow ``Quantity.AsInt64``, which depends on the representation:
  ``"2"``, ``2``, ``"1k"`` and ``"1Ki"`` are integers, but ``"1000m"``, ``"1.0"`` and ``"1.5Gi"`` are not
  (a negative scale or an ``inf.Dec`` never converts), whatever their value.

* ``add``/``sub`` follow ``Quantity.Add``/``Sub`` (an ``int`` operand is ``resource.NewQuantity``): the
  rules turn an integer on the wire into a quantity with ``quantity('0').add(v)``, because the API
  server's cost estimator cannot bound ``string(v)`` of an int-or-string value.

``asApproximateFloat`` is not ported: no rule uses it (a rule that did would fail in ``tfps validate``
with "undeclared reference"; tests/api/test_crd.py checks the functions the rules use).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import celpy
from celpy import celtypes

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
_MAX_INT64_FACTORS = 18
_NANO = -9
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS = set("eEinumkKMGTP")
_DIGITS = set("0123456789")
_MAX_EXPONENT = 9999


@dataclass(frozen=True)
class Quantity:
    """A parsed quantity: its exact value and its Go representation, an ``int64Amount`` of that
    ``scale`` (value = unscaled × 10^scale, unscaled an int64) or, with ``scale`` None, an ``inf.Dec``."""

    value: Fraction
    scale: int | None

    @property
    def unscaled(self) -> int:
        assert self.scale is not None
        u = self.value / Fraction(10) ** self.scale
        assert u.denominator == 1
        return u.numerator

    @property
    def as_int64(self) -> int | None:
        """``Quantity.AsInt64``: None for an ``inf.Dec`` or a negative scale, whatever the value."""
        return None if self.scale is None else _as_int64(self.unscaled, self.scale)

    def compare(self, other: Quantity) -> int:
        """``Quantity.Cmp``: exact."""
        return (self.value > other.value) - (self.value < other.value)

    def add(self, other: Quantity) -> Quantity:
        """``Quantity.Add``: ``int64Amount.Add`` when both are int64 amounts and nothing overflows,
        else an ``inf.Dec`` sum."""
        if self.scale is not None and other.scale is not None:
            a, b = (self.unscaled, self.scale), (other.unscaled, other.scale)
            if b[0] == 0:
                return self
            if a[0] == 0:
                return other
            if a[1] == b[1]:
                total: int | None = _int64(a[0] + b[0])
                scale = a[1]
            elif a[1] > b[1]:
                shifted = _int64(a[0] * 10 ** (a[1] - b[1]))
                total = None if shifted is None else _int64(shifted + b[0])
                scale = b[1]
            else:
                shifted = _int64(b[0] * 10 ** (b[1] - a[1]))
                total = None if shifted is None else _int64(a[0] + shifted)
                scale = a[1]
            if total is not None:
                return Quantity(Fraction(total) * Fraction(10) ** scale, scale)
        return Quantity(self.value + other.value, None)

    def negated(self) -> Quantity:
        return Quantity(-self.value, self.scale)


def _int64(v: int) -> int | None:
    return v if _INT64_MIN <= v <= _INT64_MAX else None


def from_int(v: int) -> Quantity:
    """``resource.NewQuantity(v, DecimalExponent)``, what ``add``/``sub`` with an int use."""
    if _int64(v) is None:
        raise ValueError("int out of int64 range")
    return Quantity(Fraction(v), 0)


class QuantityError(ValueError):
    """Not a quantity ``resource.ParseQuantity`` accepts."""


def _split(s: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, value, num, denom, suffix)."""
    positive, pos, end = True, 0, len(s)
    if pos < end and s[0] in "-+":
        positive = s[0] == "+"
        pos += 1
    while True:  # leading zeros
        if pos >= end:
            return positive, "0", "0", "", ""
        if s[pos] != "0":
            break
        pos += 1
    i = pos
    while i < end and s[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, s, s[pos:], "", ""
    num, pos = s[pos:i] or "0", i
    denom = ""
    if pos < end and s[pos] == ".":
        pos += 1
        i = pos
        while i < end and s[i] in _DIGITS:
            i += 1
        if i >= end:
            return positive, s, num, s[pos:], ""
        denom, pos = s[pos:i], i
    value, start = s[:pos], pos
    i = pos
    while i < end and s[i] in _SUFFIX_CHARS:
        i += 1
    if i >= end:
        return positive, value, num, denom, s[start:]
    pos = i
    if s[pos] in "-+":
        pos += 1
    i = pos
    while i < end and s[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, value, num, denom, s[start:]
    raise QuantityError(f"quantities must match the regular expression (not {s!r})")


def _suffix(suffix: str) -> tuple[int, int, str]:
    """``suffixHandler.interpret``: (base, exponent, format)."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], "DecimalSI"
    if suffix in _BINARY:
        return 2, _BINARY[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        exp = suffix[1:]
        digits = exp[1:] if exp[:1] in ("+", "-") else exp
        if digits and set(digits) <= _DIGITS and _INT64_MIN <= int(exp) <= _INT64_MAX:
            if abs(int(exp)) > _MAX_EXPONENT:  # Go keeps 10^exp symbolically; an exact Fraction would not fit
                raise QuantityError(f"exponent {exp} not supported here (the CRD pattern allows 3 digits)")
            e = int(exp) & 0xFFFFFFFF  # Go: int32(parsed)
            return 10, e - (1 << 32) if e >= 1 << 31 else e, "DecimalExponent"
    raise QuantityError(f"unable to parse quantity's suffix (in {suffix!r})")


def _as_int64(value: int, scale: int) -> int | None:
    """``int64Amount.AsInt64``."""
    if scale == 0:
        return value
    if scale < 0:
        return None
    out = value * 10**scale
    return out if _INT64_MIN <= out <= _INT64_MAX else None


def _round_up_nano(x: Fraction) -> Fraction:
    """``inf.Dec.Round(x, 9, RoundUp)`` on a non-negative value: away from zero at 10^-9."""
    scaled = x * 10**9
    whole = scaled.numerator // scaled.denominator
    if whole != scaled:
        whole += 1
    return Fraction(whole, 10**9)


def parse(s: str) -> Quantity:
    """``resource.ParseQuantity``. Raises :class:`QuantityError`."""
    if not isinstance(s, str):
        raise QuantityError(f"a quantity is a string, not {type(s).__name__}")
    if s == "":
        raise QuantityError("quantities must match the regular expression")
    if s == "0":
        return Quantity(Fraction(0), 0)
    positive, value, num, denom, suf = _split(s)
    base, exponent, fmt = _suffix(suf)
    scale, mantissa = 0, 1
    if fmt == "BinarySI":
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            # Go: 15 - len(num) - int32(float32(exponent)*3/10) - 1
            precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        else:
            precision = -1
    else:
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            shifted = int(num + denom)  # at most 18 digits: fits int64
            result = shifted * mantissa
            if _INT64_MIN <= result <= _INT64_MAX:
                result = result if positive else -result
                return Quantity(Fraction(result) * Fraction(10) ** scale, scale)
    # Slow path (inf.Dec): the exact value, rounded up to nano units, binary ones capped at int64.
    digits = value.lstrip("+-")
    whole, _, frac = digits.partition(".")
    if not (whole or frac) or not set(whole + frac) <= _DIGITS:
        raise QuantityError(f"unable to parse quantity's numeric part (in {s!r})")
    amount = Fraction(int(whole + frac or "0"), 10 ** len(frac))
    amount *= Fraction(10) ** exponent if base == 10 else 2**exponent
    if amount != 0:
        amount = _round_up_nano(amount)
    if fmt == "BinarySI" and amount > _INT64_MAX:
        amount = Fraction(_INT64_MAX)
    negative = value.startswith("-")
    return Quantity(-amount if negative else amount, None)


def is_quantity(s: Any) -> bool:
    try:
        parse(s)
    except QuantityError:
        return False
    return True


# --- the CEL library ------------------------------------------------------------------------------------


def _cel(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A CEL function: wrong types or a failed conversion are CEL errors (celpy lets a TypeError raised
    in a method escape instead)."""

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except (QuantityError, TypeError, ValueError) as e:
            return celpy.CELEvalError(f"{fn.__name__}: {e}", type(e), e.args)

    call.__name__ = fn.__name__
    return call


def _q(x: Any) -> Quantity:
    if not isinstance(x, Quantity):
        raise TypeError(f"no such overload: a Quantity is needed, not {type(x).__name__}")
    return x


def _str(x: Any) -> str:
    if not isinstance(x, str):  # celtypes.StringType is a str
        raise TypeError(f"no such overload: a string is needed, not {type(x).__name__}")
    return str(x)


@_cel
def quantity(s: Any) -> Quantity:
    return parse(_str(s))


@_cel
def isQuantity(s: Any) -> celtypes.BoolType:
    return celtypes.BoolType(is_quantity(_str(s)))


@_cel
def compareTo(a: Any, b: Any) -> celtypes.IntType:
    return celtypes.IntType(_q(a).compare(_q(b)))


@_cel
def isLessThan(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_q(a).compare(_q(b)) < 0)


@_cel
def isGreaterThan(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_q(a).compare(_q(b)) > 0)


@_cel
def isInteger(a: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_q(a).as_int64 is not None)


@_cel
def asInteger(a: Any) -> celtypes.IntType:
    v = _q(a).as_int64
    if v is None:
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(v)


def _operand(x: Any) -> Quantity:
    if isinstance(x, Quantity):
        return x
    if isinstance(x, int) and not isinstance(x, bool):  # celtypes.IntType is an int
        return from_int(int(x))
    raise TypeError(f"no such overload: a Quantity or an int is needed, not {type(x).__name__}")


@_cel
def add(a: Any, b: Any) -> Quantity:
    return _q(a).add(_operand(b))


@_cel
def sub(a: Any, b: Any) -> Quantity:
    """``Quantity.Sub``: ``int64Amount.Sub`` is an Add of the negated amount."""
    return _q(a).add(_operand(b).negated())


@_cel
def sign(a: Any) -> celtypes.IntType:
    v = _q(a).value
    return celtypes.IntType((v > 0) - (v < 0))


@_cel
def substring(s: Any, start: Any, end: Any = None) -> celtypes.StringType:
    """cel-go's strings extension (in the API server's CEL since 1.0): ``'hugepages-2Mi'.substring(10)``.
    Indexes count code points; out of range is an error."""
    text = _str(s)
    stop = len(text) if end is None else int(end)
    if not (0 <= int(start) <= stop <= len(text)):
        raise ValueError(f"substring: index out of range: {start}, {stop}")
    return celtypes.StringType(text[int(start) : stop])


CEL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in (
        quantity,
        isQuantity,
        compareTo,
        isLessThan,
        isGreaterThan,
        isInteger,
        asInteger,
        sign,
        add,
        sub,
        substring,
    )
}
"""The Kubernetes CEL quantity library functions (by CEL name) for ``celpy`` programs, and the one
function of cel-go's strings extension the rules use (``substring``)."""
