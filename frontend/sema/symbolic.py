"""Symbolic integer algebra for shapes and bounds: ``+ - * / % cdiv`` over constants and
symbolic dimensions (parameter shape names such as ``M``).

A ``Sym`` is kept in a canonical form -- a constant plus a sum of ``coefficient *
monomial`` terms, a monomial being a sorted tuple of atoms -- so that equal expressions
compare equal (``2*M + M == 3*M``). Division, modulo and ``cdiv`` that cannot be
simplified become atoms themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

Monomial = tuple["Atom", ...]


@dataclass(frozen=True, slots=True)
class Atom:
    """A symbolic dimension (``op == "var"``, ``name`` set) or an opaque ``div``,
    ``mod`` or ``cdiv`` of two ``Sym``s."""

    op: str
    name: str = ""
    args: tuple[Sym, ...] = ()

    def sort_key(self) -> str:
        return self.render(str)

    def render(self, name_of: Callable[[str], str]) -> str:
        if self.op == "var":
            return name_of(self.name)
        a, b = (arg.render(name_of) for arg in self.args)
        if self.op == "div":
            return f"({a} // {b})"
        if self.op == "mod":
            return f"({a} % {b})"
        return f"(({a} + {b} - 1) // {b})"

    def source(self) -> str:
        if self.op == "var":
            return self.name
        a, b = (arg.source() for arg in self.args)
        if self.op == "cdiv":
            return f"cdiv({a}, {b})"
        return f"({a} {'/' if self.op == 'div' else '%'} {b})"

    def evaluate(self, env: Mapping[str, int]) -> int:
        if self.op == "var":
            return env[self.name]
        a, b = (arg.evaluate(env) for arg in self.args)
        if b == 0:
            raise ZeroDivisionError(self.source())
        if self.op == "div":
            return a // b
        if self.op == "mod":
            return a % b
        return -(-a // b)


@dataclass(frozen=True, slots=True)
class Sym:
    const: int = 0
    terms: tuple[tuple[Monomial, int], ...] = ()  # sorted, no zero coefficients

    # -- construction ---------------------------------------------------------------
    @staticmethod
    def of(value: int | Sym) -> Sym:
        return value if isinstance(value, Sym) else Sym(int(value))

    @staticmethod
    def var(name: str) -> Sym:
        return Sym(0, (((Atom("var", name),), 1),))

    @staticmethod
    def _atom(atom: Atom) -> Sym:
        return Sym(0, (((atom,), 1),))

    @staticmethod
    def _build(const: int, terms: dict[Monomial, int]) -> Sym:
        items = tuple(sorted(((m, c) for m, c in terms.items() if c != 0),
                             key=lambda mc: tuple(a.sort_key() for a in mc[0])))
        return Sym(const, items)

    # -- queries ----------------------------------------------------------------------
    @property
    def value(self) -> int | None:
        """The integer value when the expression is constant."""
        return self.const if not self.terms else None

    @property
    def is_const(self) -> bool:
        return not self.terms

    def free_vars(self) -> set[str]:
        names: set[str] = set()
        for mono, _ in self.terms:
            for atom in mono:
                if atom.op == "var":
                    names.add(atom.name)
                else:
                    for arg in atom.args:
                        names |= arg.free_vars()
        return names

    def evaluate(self, env: Mapping[str, int]) -> int:
        total = self.const
        for mono, coef in self.terms:
            prod = coef
            for atom in mono:
                prod *= atom.evaluate(env)
            total += prod
        return total

    # -- arithmetic ---------------------------------------------------------------------
    def __add__(self, other: int | Sym) -> Sym:
        other = Sym.of(other)
        terms = dict(self.terms)
        for mono, coef in other.terms:
            terms[mono] = terms.get(mono, 0) + coef
        return Sym._build(self.const + other.const, terms)

    __radd__ = __add__

    def __neg__(self) -> Sym:
        return Sym(-self.const, tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: int | Sym) -> Sym:
        return self + (-Sym.of(other))

    def __rsub__(self, other: int | Sym) -> Sym:
        return Sym.of(other) - self

    def __mul__(self, other: int | Sym) -> Sym:
        other = Sym.of(other)
        terms: dict[Monomial, int] = {}
        const = self.const * other.const

        def add(mono: Monomial, coef: int) -> None:
            key = tuple(sorted(mono, key=Atom.sort_key))
            terms[key] = terms.get(key, 0) + coef

        for mono, coef in self.terms:
            if other.const:
                add(mono, coef * other.const)
            for mono2, coef2 in other.terms:
                add(mono + mono2, coef * coef2)
        if self.const:
            for mono2, coef2 in other.terms:
                add(mono2, self.const * coef2)
        return Sym._build(const, terms)

    __rmul__ = __mul__

    def _divisible_by(self, divisor: int) -> bool:
        return self.const % divisor == 0 and all(c % divisor == 0 for _, c in self.terms)

    def _scaled_down(self, divisor: int) -> Sym:
        return Sym(self.const // divisor, tuple((m, c // divisor) for m, c in self.terms))

    def floordiv(self, other: int | Sym) -> Sym:
        return self._divide(other, "div", lambda a, d: a // d)

    def cdiv(self, other: int | Sym) -> Sym:
        return self._divide(other, "cdiv", lambda a, d: -(-a // d))

    def _divide(self, other: int | Sym, op: str, fold: Callable[[int, int], int]) -> Sym:
        """Shared rules of ``/`` and ``cdiv``: fold constants, divide exactly when every
        coefficient is divisible, ``x / x == 1``; otherwise an opaque atom."""
        other = Sym.of(other)
        if other.value is not None:
            d = other.value
            if d == 0:
                raise ZeroDivisionError(f"{op} by zero")
            if self.value is not None:
                return Sym(fold(self.value, d))
            if d > 0 and self._divisible_by(d):
                return self._scaled_down(d)
        if self == other:
            return Sym(1)
        quotient = self._exact_quotient(other)
        if quotient is not None:
            return quotient
        return Sym._atom(Atom(op, args=(self, other)))

    def mod(self, other: int | Sym) -> Sym:
        other = Sym.of(other)
        if other.value is not None:
            d = other.value
            if d == 0:
                raise ZeroDivisionError("modulo by zero")
            if self.value is not None:
                return Sym(self.value % d)
            if d > 0 and self._divisible_by(d):
                return Sym(0)
        if self == other or self._exact_quotient(other) is not None:
            return Sym(0)
        return Sym._atom(Atom("mod", args=(self, other)))

    def _exact_quotient(self, other: Sym) -> Sym | None:
        """``self / other`` when ``self`` is ``other`` times a constant."""
        if other.is_const or self.is_const or len(self.terms) != len(other.terms):
            return None
        if (self.const == 0) != (other.const == 0):
            return None
        ratio: int | None = None
        mine = dict(self.terms)
        for mono, coef in other.terms:
            if mono not in mine or mine[mono] % coef:
                return None
            r = mine[mono] // coef
            if ratio is None:
                ratio = r
            elif r != ratio:
                return None
        if ratio is None or (other.const and self.const != ratio * other.const):
            return None
        return Sym(ratio)

    # -- proofs -------------------------------------------------------------------------
    def provably_le(self, other: int | Sym) -> bool | None:
        """True/False when ``self <= other`` is decided, None when unknown.

        Symbolic dimensions are positive integers, so a difference whose terms all have
        the same sign decides the comparison too (``M + 2 > M``, ``2*M >= M + 1``)."""
        diff = Sym.of(other) - self
        if diff.value is not None:
            return diff.value >= 0
        if all(_positive(m) for m, _ in diff.terms):
            low = diff.const + sum(c for _, c in diff.terms)  # each monomial is >= 1
            if all(c > 0 for _, c in diff.terms) and low >= 0:
                return True
            if all(c < 0 for _, c in diff.terms) and low < 0:
                return False
        return None

    def provably_eq(self, other: int | Sym) -> bool | None:
        diff = self - Sym.of(other)
        if diff.value is not None:
            return diff.value == 0
        return None

    # -- rendering ----------------------------------------------------------------------
    def render(self, name_of: Callable[[str], str] = str) -> str:
        """Python/Triton expression text (``//``, ``%`` and cdiv as ``(a + b - 1) // b``)."""
        parts: list[str] = []
        for mono, coef in self.terms:
            text = " * ".join(a.render(name_of) for a in mono)
            parts.append(text if coef == 1 else f"{coef} * {text}")
        if self.const or not parts:
            parts.append(str(self.const))
        # a product is parenthesized too: the text may be the right operand of ``//``
        single = len(parts) == 1 and (not self.terms or len(self.terms[0][0]) == 1
                                      and self.terms[0][1] == 1)
        return parts[0] if single else "(" + " + ".join(parts) + ")"

    def source(self) -> str:
        """Croqtile-like text for messages (``cdiv(M, 64)``, ``M / 2``)."""
        parts: list[str] = []
        for mono, coef in self.terms:
            text = " * ".join(a.source() for a in mono)
            parts.append(text if coef == 1 else f"{coef} * {text}")
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts).replace("+ -", "- ")

    def __str__(self) -> str:
        return self.source()


def _positive(mono: Monomial) -> bool:
    """Whether a monomial is known positive (products of symbolic dims and cdivs of them)."""
    return all(a.op in ("var", "cdiv") for a in mono)


def shape_text(dims: tuple[Sym, ...] | list[Sym]) -> str:
    return "[" + ", ".join(d.source() for d in dims) + "]"
