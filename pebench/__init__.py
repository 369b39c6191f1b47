"""pebench: how well does each positional encoding let a decoder LM read past its training context?"""

__version__ = "0.1.0"
