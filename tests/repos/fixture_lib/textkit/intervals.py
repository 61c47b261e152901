"""Half-open integer intervals [start, end)."""


def overlaps(a, b):
    """Whether two half-open intervals share at least one point."""
    return a[0] < b[1] and b[0] < a[1]


def merge(intervals):
    """Sorted, non-overlapping intervals covering the same points; touching ones are joined."""
    out = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def total_length(intervals):
    """Number of points covered by the union of the intervals."""
    return sum(end - start for start, end in merge(intervals))
