"""Human figures for the reassign commands' lines (decimal units: 1 MB = 10**6 B), pure, so
that the CLI and the pure plan modules print the same numbers the same way."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def human_rate(n: float | None) -> str:
    return "?" if n is None else f"{human_bytes(n)}/s"


def human_seconds(s: float | None) -> str:
    if s is None:
        return "?"
    return f"{s:.1f} s" if s < 100 else f"{s:,.0f} s"
