"""textkit: small text and number helpers (a fixture project for verigap's repo tasks)."""

from textkit.intervals import merge, overlaps, total_length
from textkit.numbers import clamp, human_size, ordinal, parse_ranges
from textkit.slug import slugify
from textkit.wrap import truncate, wrap

__all__ = ["merge", "overlaps", "total_length", "clamp", "human_size", "ordinal",
           "parse_ranges", "slugify", "truncate", "wrap"]
