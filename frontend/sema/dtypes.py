"""Element types (spec 3.1): one table, plus the arithmetic promotion rules of spec 3.6."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.Enum):
    FLOAT = "float"
    SINT = "sint"
    UINT = "uint"
    BOOL = "bool"


@dataclass(frozen=True, slots=True)
class ElemType:
    name: str
    bits: int
    kind: Kind
    torch: str | None  # attribute of the torch module, None when torch has no such type
    triton: str | None  # attribute of triton.language
    # floats only: exponent and mantissa bits, to decide lossless conversion
    exp_bits: int = 0
    man_bits: int = 0

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_int(self) -> bool:
        return self.kind in (Kind.SINT, Kind.UINT)

    @property
    def supported(self) -> bool:
        """True when the Triton backend can store this type in a torch tensor."""
        return self.torch is not None and self.triton is not None


def _f(name: str, bits: int, torch: str | None, triton: str | None, e: int, m: int) -> ElemType:
    return ElemType(name, bits, Kind.FLOAT, torch, triton, e, m)


_TABLE = (
    _f("f64", 64, "float64", "float64", 11, 52),
    _f("f32", 32, "float32", "float32", 8, 23),
    _f("tf32", 32, "float32", "float32", 8, 10),
    _f("f16", 16, "float16", "float16", 5, 10),
    _f("bf16", 16, "bfloat16", "bfloat16", 8, 7),
    _f("f8_e4m3", 8, "float8_e4m3fn", "float8e4nv", 4, 3),
    _f("f8_e5m2", 8, "float8_e5m2", "float8e5", 5, 2),
    _f("f8_ue8m0", 8, None, None, 8, 0),
    _f("f8_ue4m3", 8, None, None, 4, 3),
    _f("f6_e2m3", 6, None, None, 2, 3),
    _f("f6_e3m2", 6, None, None, 3, 2),
    _f("f4_e2m1", 4, None, None, 2, 1),
    ElemType("s64", 64, Kind.SINT, "int64", "int64"),
    ElemType("s32", 32, Kind.SINT, "int32", "int32"),
    ElemType("s16", 16, Kind.SINT, "int16", "int16"),
    ElemType("s8", 8, Kind.SINT, "int8", "int8"),
    ElemType("u64", 64, Kind.UINT, "uint64", "uint64"),
    ElemType("u32", 32, Kind.UINT, "uint32", "uint32"),
    ElemType("u16", 16, Kind.UINT, "uint16", "uint16"),
    ElemType("u8", 8, Kind.UINT, "uint8", "uint8"),
    ElemType("s6", 6, Kind.SINT, None, None),
    ElemType("u6", 6, Kind.UINT, None, None),
    ElemType("s4", 4, Kind.SINT, None, None),
    ElemType("u4", 4, Kind.UINT, None, None),
    ElemType("s2", 2, Kind.SINT, None, None),
    ElemType("u2", 2, Kind.UINT, None, None),
    ElemType("u1", 1, Kind.UINT, None, None),
    ElemType("bin1", 1, Kind.UINT, None, None),
    ElemType("bool", 1, Kind.BOOL, "bool", "int1"),
)

ELEM_TYPES: dict[str, ElemType] = {t.name: t for t in _TABLE}

# ``int`` is the 32-bit signed control scalar.
ELEM_TYPES["int"] = ElemType("int", 32, Kind.SINT, "int32", "int32")

F32 = ELEM_TYPES["f32"]
F16 = ELEM_TYPES["f16"]
F64 = ELEM_TYPES["f64"]
INT = ELEM_TYPES["int"]
S32 = ELEM_TYPES["s32"]
S64 = ELEM_TYPES["s64"]
BOOL = ELEM_TYPES["bool"]


def lookup(name: str) -> ElemType:
    return ELEM_TYPES[name]


# C and CUDA scalar type names that a quoted cast ``__to<"int">(e)`` may name, and the
# element type that holds the same values (a C cast of a float to an integer truncates,
# as every conversion here does)
_C_TYPES: dict[str, str] = {
    "bool": "bool", "char": "s8", "signed char": "s8", "unsigned char": "u8",
    "short": "s16", "unsigned short": "u16", "int": "s32", "signed": "s32",
    "unsigned": "u32", "unsigned int": "u32", "long long": "s64",
    "unsigned long long": "u64", "float": "f32", "double": "f64", "half": "f16",
    "__half": "f16", "__nv_bfloat16": "bf16", "size_t": "u64",
    **{f"{sign}int{bits}_t": f"{'u' if sign else 's'}{bits}"
       for sign in ("", "u") for bits in (8, 16, 32, 64)},
}


def c_type(name: str) -> ElemType | None:
    """The element type of a quoted C type name; None for other C++ types."""
    found = _C_TYPES.get(" ".join(name.split()))
    return None if found is None else ELEM_TYPES[found]


def cast_target(target: str, quoted: bool) -> ElemType | None:
    """What ``__to<target>(e)`` converts to (None: a C++ type with no element type)."""
    return c_type(target) if quoted else lookup(target)


def _holds(big: ElemType, small: ElemType) -> bool:
    """Whether every value of ``small`` is exactly representable in ``big``."""
    if big.kind is Kind.FLOAT and small.kind is Kind.FLOAT:
        return big.exp_bits >= small.exp_bits and big.man_bits >= small.man_bits
    if big.kind is Kind.FLOAT:
        return small.bits <= big.man_bits + 1
    if small.kind is Kind.FLOAT:
        return False
    if big.kind is small.kind:
        return big.bits >= small.bits
    if big.kind is Kind.SINT and small.kind in (Kind.UINT, Kind.BOOL):
        return big.bits > small.bits
    return small.kind is Kind.BOOL


def promote(a: ElemType, b: ElemType) -> ElemType | None:
    """Common type of a binary arithmetic operation (spec 3.6), None when there is none.

    Rule 1: two floats -> the one that holds the other (f16 with bf16 has none).
    Rule 2: a float with an integer -> the float.
    Rule 3: two integers -> the wider; signed/unsigned mix -> the one that can represent
            the other, else the wider unsigned.
    ``int`` counts as s32.
    """
    a = S32 if a.name == "int" else a
    b = S32 if b.name == "int" else b
    if a == b:
        return a
    if a.is_float and b.is_float:
        if _holds(a, b):
            return a
        if _holds(b, a):
            return b
        return None
    if a.is_float:
        return a
    if b.is_float:
        return b
    if _holds(a, b):
        return a
    if _holds(b, a):
        return b
    return a if a.bits >= b.bits else b


def is_lossy(src: ElemType, dst: ElemType) -> bool:
    """Whether converting ``src`` to ``dst`` may change a value (for the CQ0206 warning)."""
    if src.name == "int":
        src = S32
    if dst.name == "int":
        dst = S32
    return src != dst and not _holds(dst, src)


def exact_in(value: float, elem: ElemType) -> bool:
    """Whether the float ``value`` is exactly representable in the float type ``elem``."""
    import struct

    if not elem.is_float:
        return float(value).is_integer()
    if elem.bits >= 64:
        return True
    try:
        if elem.name == "f16":
            return bool(struct.unpack("<e", struct.pack("<e", value))[0] == value)
        single = struct.unpack("<f", struct.pack("<f", value))[0]
    except (OverflowError, struct.error):
        return False
    if single != value:
        return False
    if elem.bits == 32:
        return True
    bits = struct.unpack("<I", struct.pack("<f", single))[0]
    dropped = 23 - elem.man_bits  # mantissa bits a narrower type with f32's exponent drops
    return elem.exp_bits == 8 and bits & ((1 << dropped) - 1) == 0
