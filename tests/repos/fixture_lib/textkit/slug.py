"""URL slugs."""

import re
import unicodedata

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def slugify(text, sep="-", max_len=None):
    """Lower-case ASCII words of ``text`` joined by ``sep``, cut at a word boundary."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = [w for w in _SEPARATORS.split(ascii_text.lower()) if w]
    slug = sep.join(words)
    if max_len is not None and len(slug) > max_len:
        cut = slug[:max_len]
        if sep in cut and slug[max_len] != sep:
            cut = cut[: cut.rindex(sep)]
        slug = cut.strip(sep)
    return slug
