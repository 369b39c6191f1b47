"""Helpers that know nothing above them: errors, registry, parsing, fsutil, stats, progress, style and the scheme
groups (no torch import)."""
