"""infercheck: validate inference-engine accuracy patches before they merge."""

__version__ = "0.1.0"
