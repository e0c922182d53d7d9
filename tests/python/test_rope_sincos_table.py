"""kernels/rope_sincos_table.inc: the fused KV write's {sin, cos}(k·π/128) table claims to be correctly rounded
to fp32. Checked here against an independent oracle: 60-digit decimal Taylor series, with the nearest-float
test done in exact rational arithmetic against both fp32 neighbours (no double rounding)."""
from decimal import Decimal, getcontext
from fractions import Fraction
from pathlib import Path
import re

import numpy as np

TABLE = Path(__file__).resolve().parents[2] / "kernels" / "rope_sincos_table.inc"
PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")


def _sin_cos(x):
    getcontext().prec = 60
    term_s, term_c, s, c, n = x, Decimal(1), Decimal(0), Decimal(0), 0
    while term_s != 0 or term_c != 0:
        s, c = s + term_s, c + term_c
        term_s = -term_s * x * x / ((2 * n + 2) * (2 * n + 3))
        term_c = -term_c * x * x / ((2 * n + 1) * (2 * n + 2))
        n += 1
        if n > 200:
            break
    return Fraction(s), Fraction(c)


def _entries():
    pairs = re.findall(r"\{\s*([^,{}]+?)f\s*,\s*([^,{}]+?)f\s*\}", TABLE.read_text())
    return [(float.fromhex(a) if "0x" in a else float(a), float.fromhex(b) if "0x" in b else float(b)) for a, b in pairs]


def _is_nearest_fp32(value, exact):
    f = np.float32(value)
    assert float(f) == value, "table entry is not an fp32 value"
    down, up = np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))
    err = abs(exact - Fraction(float(f)))
    return err <= abs(exact - Fraction(float(down))) and err <= abs(exact - Fraction(float(up)))


def test_table_is_the_correctly_rounded_fp32_sin_cos_of_k_pi_over_128():
    entries = _entries()
    assert len(entries) == 256
    for k, (s, c) in enumerate(entries):
        exact_s, exact_c = _sin_cos(PI * k / 128)
        assert _is_nearest_fp32(s, exact_s), f"sin(k*pi/128) k={k}: {s!r}"
        assert _is_nearest_fp32(c, exact_c), f"cos(k*pi/128) k={k}: {c!r}"
