"""Numbers for humans."""

_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"]


def ordinal(n):
    """1 -> '1st', 2 -> '2nd', 11 -> '11th', 23 -> '23rd'."""
    if 10 <= n % 100 <= 20:
        suffix = "th"
    elif n % 10 == 1:
        suffix = "st"
    elif n % 10 == 2:
        suffix = "nd"
    elif n % 10 == 3:
        suffix = "rd"
    else:
        suffix = "th"
    return f"{n}{suffix}"


def clamp(x, lo, hi):
    """``x`` limited to the closed interval [lo, hi]."""
    if lo > hi:
        raise ValueError("lo must not exceed hi")
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def human_size(n_bytes):
    """A byte count in binary units with one decimal: 1536 -> '1.5 KiB'."""
    if n_bytes < 0:
        raise ValueError("size must be non-negative")
    size = float(n_bytes)
    unit = 0
    while size >= 1024 and unit < len(_UNITS) - 1:
        size = size / 1024
        unit += 1
    if unit == 0:
        return f"{n_bytes} B"
    return f"{size:.1f} {_UNITS[unit]}"


def parse_ranges(spec):
    """'1,3-5,9' -> [1, 3, 4, 5, 9]; blanks are ignored, reversed ranges are errors."""
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-", 1))
            if lo > hi:
                raise ValueError(f"reversed range {part!r}")
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
    return out
