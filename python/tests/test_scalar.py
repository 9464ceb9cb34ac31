"""Managed device scalars with Python operators, the C++ typing rules, programs, and a
randomized differential test against Python arithmetic."""

import cmath
import math
import random

import pytest

import sluice


def test_arithmetic_builds_expressions_and_eval_runs_them(ctx):
    with ctx:
        a = sluice.Managed(2.0)
        b = sluice.Managed(3.0)
        e = sluice.sqrt(a * a + b * b) - 1.0 / b
        assert isinstance(e, sluice.Expr) and e.dtype == "float64"
        before = sluice.scalar_stats()["launches"]
        r = sluice.eval(e)
        assert sluice.scalar_stats()["launches"] == before + 1  # one launch
        assert r.value() == pytest.approx(math.sqrt(13) - 1 / 3)
        assert float(r) == r.value()


def test_typing_rules_follow_cpp(ctx):
    with ctx:
        i = sluice.Managed(3, dtype="int32")
        f = sluice.Managed(1.5, dtype="float32")
        d = sluice.Managed(2.0)
        z = sluice.Managed(1 + 2j)
        assert (i + 1).dtype == "int32"  # an int constant takes the other operand's type
        assert (i * d).dtype == "float64"  # an integer with a float: the float
        assert (z * 2.0).dtype == "complex128"
        assert (i < 4).dtype == "int32" and sluice.eval(i < 4).value() == 1
        assert sluice.abs(z).dtype == "float64"
        with pytest.raises(TypeError, match="float constant"):
            i + 0.5
        with pytest.raises(TypeError, match="float and double"):
            f + d
        with pytest.raises(TypeError, match="no ordering"):
            z < d
        with pytest.raises(TypeError):
            sluice.sqrt(i)
        with pytest.raises(TypeError, match="imaginary"):
            sluice.cast(z, "float64")
        with pytest.raises(TypeError):
            d.assign(z)  # would drop the imaginary part
        assert sluice.eval(sluice.cast(i, "float64") / 2).value() == 1.5
        assert sluice.eval(i / 2).value() == 1  # integer division, as in C++
        assert sluice.eval(i / 0).value() == 0  # defined: 0
        with pytest.raises(ValueError):
            i + (1 << 40)  # does not fit int32


def test_complex_values(ctx):
    with ctx:
        z = sluice.Managed(3 + 4j)
        assert sluice.eval(abs(z)).value() == pytest.approx(5.0)
        assert sluice.eval(sluice.conj(z)).value() == 3 - 4j
        assert sluice.eval(sluice.real(z) + sluice.imag(z)).value() == 7.0
        assert complex(z) == 3 + 4j


def test_assign_copy_and_unassigned(ctx):
    with ctx:
        m = sluice.Managed(dtype="float64")
        assert not m.assigned
        with pytest.raises(sluice.Error, match="never assigned"):
            m.value()
        m.assign(sluice.Managed(4.0) * 2)
        assert m.assigned and m.value() == 8.0
        c = m.copy()
        m.assign(1.0)
        assert c.value() == 8.0 and m.value() == 1.0
        with pytest.raises(TypeError, match="value"):
            if m:
                pass


def test_programs_merge_and_rerun(ctx):
    with ctx:
        a = sluice.Managed(1.5)
        p = sluice.compile(a * a + a * a)
        assert p.info["merged"] > 0 and p.info["loads"] == 1
        assert "mul f64" in p.disassemble()
        assert p().value() == 4.5
        a.assign(2.0)
        out = sluice.Managed(dtype="float64")
        p.run(out)  # reads the value a holds now
        assert out.value() == 8.0
        with pytest.raises(TypeError):
            p.run(sluice.Managed(dtype="int32"))


def test_values_produced_on_one_context_feed_another(device):
    a = sluice.Context(device, name="a")
    b = sluice.Context(device, name="b")
    x = sluice.Managed(10.0, ctx=a)
    y = sluice.eval(x / 4.0, ctx=b)  # ordered by the tracker, no wait_for
    assert y.value() == 2.5


OPS = [
    ("+", lambda x, y: x + y),
    ("-", lambda x, y: x - y),
    ("*", lambda x, y: x * y),
    ("/", lambda x, y: x / y),
]


def test_random_expressions_against_python(ctx):
    """Random trees of + - * / over float64 Managed values and constants, evaluated on the
    device, against the same arithmetic in Python (IEEE double, operation by operation)."""
    rng = random.Random(7)
    with ctx:
        for _ in range(40):
            leaves = [rng.uniform(0.5, 2.0) for _ in range(4)]
            managed = [sluice.Managed(v) for v in leaves]

            def build(depth):
                if depth == 0 or rng.random() < 0.3:
                    k = rng.randrange(5)
                    if k == 4:
                        c = rng.uniform(0.5, 2.0)
                        return c, c
                    return managed[k], leaves[k]
                name, f = rng.choice(OPS)
                (le, lv), (re, rv) = build(depth - 1), build(depth - 1)
                return f(le, re), f(lv, rv)

            expr, want = build(4)
            if not isinstance(expr, (sluice.Expr, sluice.Managed)):
                continue
            got = sluice.eval(expr).value()
            assert got == want, (got, want)


def test_math_functions(ctx):
    with ctx:
        x = sluice.Managed(0.7)
        for f, g in [(sluice.exp, math.exp), (sluice.log, math.log), (sluice.sin, math.sin),
                     (sluice.cos, math.cos), (sluice.tan, math.tan), (sluice.sqrt, math.sqrt)]:
            assert sluice.eval(f(x)).value() == pytest.approx(g(0.7), rel=1e-15)
        assert sluice.eval(x ** 2).value() == pytest.approx(0.49)
        assert sluice.eval(sluice.minimum(x, 0.5)).value() == 0.5
        assert sluice.eval(sluice.maximum(x, 0.5)).value() == 0.7
        z = sluice.Managed(1j)
        assert sluice.eval(sluice.exp(z)).value() == pytest.approx(cmath.exp(1j))
