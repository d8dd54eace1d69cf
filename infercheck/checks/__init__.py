"""Pure functions over stored results: no engine imports here."""
