"""Reading YAML spec files into records: one-line errors that name the file and the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import dacite
import yaml

from infercheck.errors import InfercheckError

T = TypeVar("T")


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping; a missing, unreadable or non-mapping file is a one-line InfercheckError."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise InfercheckError(f"file not found: {path}") from None
    except (OSError, yaml.YAMLError) as exc:
        raise InfercheckError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise InfercheckError(f"{path}: expected a YAML mapping")
    return data


def parse_record(cls: type[T], data: dict[str, Any], where: Path | str) -> T:
    """`data` as a `cls` dataclass, defaults filled in, unknown keys refused; an error names the file
    and the key (e.g. `suites/parity/x.yaml: wrong value type for field "max_tokens" ...`)."""
    config = dacite.Config(strict=True, cast=[tuple], type_hooks={float: _int_as_float})
    try:
        return dacite.from_dict(cls, data, config=config)
    except dacite.UnexpectedDataError as exc:
        raise InfercheckError(f"{where}: unknown key(s) {', '.join(sorted(map(repr, exc.keys)))}") from None
    except dacite.DaciteError as exc:
        raise InfercheckError(f"{where}: {str(exc).splitlines()[0]}") from None


def _int_as_float(value: Any) -> Any:
    """YAML writes `tolerance: 1` as an int; a float field takes it. Anything else stays as it is
    (and fails the type check with the field named)."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value
