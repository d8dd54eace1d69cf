"""Stage 1, intake: every input read and checked before anything runs (docs/design.md, "Pipeline").

The patch text is read here once and carried on; a bad patch, model, symptom, suite or app ends
the validate with one line (InfercheckError, exit 2) before any build or worker starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from infercheck.draw import IDENTITY, Draw
from infercheck.errors import InfercheckError
from infercheck.apps import load_apps
from infercheck.checks.noise_floor import FloorSettings
from infercheck.models import zoo
from infercheck.models.zoo import carries_general_text, trained_on_addition
from infercheck.names import SymptomKind
from infercheck.neighbours import choose_apps, installed_code_map_hits
from infercheck.options import ValidateOptions
from infercheck.patch.intake import PatchFile, read_patch
from infercheck.paths import SUITES_DIR
from infercheck.prompts import ADDITION_SETS, needs_general_tokenizer
from infercheck.records import PatchInfo
from infercheck.specs import App, Suite, SymptomSpec
from infercheck.suites import load_symptom, select_suites
from infercheck.yamlio import read_yaml

CI_CONFIG = (".github/", ".buildkite/", ".gitlab-ci", ".circleci/", "tox.ini", "noxfile.py")


@dataclass
class Intake:
    opts: ValidateOptions
    patch: PatchFile  # the candidate, read once
    base_patches: list[PatchFile]
    model_dir: Path
    symptom: SymptomSpec | None
    profile: dict[str, float]  # parity tolerances of the run's dtype (suites/tolerances.yaml)
    signals: dict[str, float]  # workaround-signal settings (suites/signals.yaml)
    suites: list[Suite]
    apps: list[App]
    app_reasons: dict[str, str] = field(default_factory=dict)  # app name -> why it was selected
    floor: FloorSettings | None = None  # parity thresholds from a noise floor (suites/noise_floor.yaml)

    @property
    def model_name(self) -> str:
        return self.model_dir.name

    @property
    def draw(self) -> Draw:
        """The run's prompt draw (draw.py); a run without a seed yet has the identity draw."""
        return Draw(IDENTITY if self.opts.seed is None else self.opts.seed)

    @property
    def judges(self) -> list[str]:
        return judge_edits(self.patch.classes)

    def patch_info(self) -> PatchInfo:
        return patch_record(self.opts.patch, self.patch)

    def base_patch_infos(self) -> list[PatchInfo]:
        return [patch_record(path, p) for path, p in zip(self.opts.base_patches, self.base_patches)]


def judge_edits(touched: dict[str, str]) -> list[str]:
    """Files of a patch (path -> class) that judge the engine rather than make it: its tests and CI
    config."""
    return [f for f, cls in touched.items() if cls == "tests" or f.startswith(CI_CONFIG)]


def patch_record(path: Path, patch: PatchFile) -> PatchInfo:
    return PatchInfo(str(path), Path(path).name, patch.text, patch.classes)


def tolerance_profile(dtype: str, path: Path = SUITES_DIR / "tolerances.yaml") -> dict[str, float]:
    profiles = read_yaml(path)
    if dtype not in profiles:
        raise InfercheckError(f"no tolerance profile for dtype {dtype!r} (known: {', '.join(profiles)})")
    return {k: float(v) for k, v in profiles[dtype].items()}


def signal_settings(path: Path = SUITES_DIR / "signals.yaml") -> dict[str, float]:
    return {k: float(v) for k, v in read_yaml(path).items()}


def intake(opts: ValidateOptions) -> Intake:
    patch = read_patch(Path(opts.patch))
    judges = judge_edits(patch.classes)
    if judges and opts.refuse_judge_edits:
        raise InfercheckError(f"patch edits its own judges (tests / CI config: {', '.join(judges[:3])}), "
                              f"refused (--refuse-judge-edits)")
    base_patches = [read_patch(Path(p)) for p in opts.base_patches]
    model_dir = zoo.model_dir(opts.model)
    symptom = load_symptom(opts.symptom) if opts.symptom else None
    if symptom is not None:
        check_symptom_fits(symptom, model_dir.name)
    suites = select_suites(model_dir.name, opts.suites)
    hits = installed_code_map_hits(patch.text, list(patch.files), opts.engine_src) if opts.apps is None else None
    apps, reasons = choose_apps(list(patch.files), opts.apps, symptom.app if symptom else None, hits)
    return Intake(opts, patch, base_patches, model_dir, symptom, tolerance_profile(opts.dtype), signal_settings(),
                  suites, apps, reasons, FloorSettings.load(opts.dtype))


def check_symptom_fits(symptom: SymptomSpec, model_name: str) -> None:
    """A symptom's prompts must reach the model as text it can carry, and an accuracy criterion on
    the addition sets judges the bundled models' task only (another model answers them at chance,
    before and after any fix); one clear error otherwise."""
    if needs_general_tokenizer(symptom.prompts) and not carries_general_text(model_name):
        raise InfercheckError(f"{symptom.path}: its prompts are general text, which the bundled model {model_name}'s "
                              f"character vocabulary cannot carry")
    if (symptom.kind == SymptomKind.ACCURACY and symptom.prompts.get("set") in ADDITION_SETS
            and not trained_on_addition(model_name)):
        raise InfercheckError(f"{symptom.path}: an accuracy criterion on the bundled addition prompts judges the "
                              f"bundled models only, not {model_name}; give --symptom with a parity criterion "
                              f"(e.g. on prompts: {{set: general-text}})")


SELECTION = "apps.json"  # in a run's inputs/: the apps and oracles it ran, with why


def save_selection(found: Intake, inputs_dir: Path) -> None:
    inputs_dir.mkdir(parents=True, exist_ok=True)
    (inputs_dir / SELECTION).write_text(json.dumps({a.name: found.app_reasons.get(a.name, "") for a in found.apps},
                                                   indent=1))


def with_stored_selection(found: Intake, inputs_dir: Path) -> Intake:
    """The intake with the apps the run chose (inputs/apps.json), where it recorded them: a neighbour
    map or code map changed since must not change what a regrade judges."""
    try:
        stored = json.loads((inputs_dir / SELECTION).read_text())
    except (OSError, ValueError):
        return found  # a run from before the selection was recorded
    known = load_apps()
    missing = [name for name in stored if name not in known]
    if missing:
        raise InfercheckError(f"the run ran app(s) that no longer exist: {', '.join(missing)}")
    return replace(found, apps=[known[name] for name in stored], app_reasons=dict(stored))
