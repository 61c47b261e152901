"""Word wrapping and truncation."""


def wrap(text, width):
    """Greedy word wrap: lines of at most ``width`` characters (longer words stand alone)."""
    if width < 1:
        raise ValueError("width must be at least 1")
    lines = []
    line = ""
    for word in text.split():
        if not line:
            line = word
        elif len(line) + 1 + len(word) <= width:
            line = line + " " + word
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines


def truncate(text, limit, ellipsis="..."):
    """``text`` cut to at most ``limit`` characters, marked with ``ellipsis`` when cut."""
    if len(text) <= limit:
        return text
    if limit <= len(ellipsis):
        return ellipsis[:limit]
    return text[: limit - len(ellipsis)].rstrip() + ellipsis
