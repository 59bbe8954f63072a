"""The optuna strategy's study (issue 22): Optuna's TPE sampler over a search's flags,
stored in the campaign directory (``.optui/search-optuna.db``, SQLite; one study per
search id) so a search resumes after optui restarts with what the sampler learnt.

Blocking (SQLite through SQLAlchemy): the runner calls it from a worker thread. Each flag
is a categorical parameter over its values. A trial told back carries a constraint value
(0 feasible, 1 not) that the sampler reads (``Trial.set_constraint``; Optuna 4: its
``constraints_func``), so failed (``oom``...)
and SLA-breaking configurations teach it where not to look; a failed trial, which has no
score, is told the worst value (0 for a maximised objective). A proposal of a
configuration tried before is told that configuration's known result at once and never
run again. A trial left running by a killed optui is marked failed when the study reopens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from optui.core.search.spec import Point, SearchSpec, point_from_json
from optui.core.search.strategies import Trial

STUDY_FILE = "search-optuna.db"
_CONSTRAINT = "constraint"
_POINT = "point"
#: proposals in a row that were all tried before: the sampler has nothing new to say
MAX_KNOWN_PROPOSALS = 200


def _constraints(frozen) -> tuple[float, ...]:
    return tuple(frozen.user_attrs.get(_CONSTRAINT, (1.0,)))


class OptunaStudy:
    """One search's study (see module doc): ``directory``: the campaign's state directory;
    ``study_name``: the search id (``NAME.<n>``); the spec's flags, objective and seed."""

    def __init__(self, directory: Path, spec: SearchSpec, study_name: str) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self._spec = spec
        self.path = Path(directory) / STUDY_FILE
        budget = spec.budget or 20
        # Optuna 5 reads a trial's own constraints (Trial.set_constraint); 4 only a constraints_func
        self._own_constraints = hasattr(optuna.trial.Trial, "set_constraint")
        startup = max(2, min(10, budget // 3))
        if self._own_constraints:
            sampler = optuna.samplers.TPESampler(seed=spec.seed, n_startup_trials=startup)
        else:
            sampler = optuna.samplers.TPESampler(seed=spec.seed, n_startup_trials=startup, constraints_func=_constraints)
        self.study = optuna.create_study(storage=f"sqlite:///{self.path}", study_name=study_name, sampler=sampler,
                                         direction="maximize" if spec.goal.goal == "max" else "minimize",
                                         load_if_exists=True)
        self._distributions: dict[str, optuna.distributions.BaseDistribution] = {
            name: optuna.distributions.CategoricalDistribution(list(d.values))
                               for name, d in spec.flags.items()}
        self._asked: dict[Point, object] = {}  # point → its optuna Trial, until told
        running = optuna.trial.TrialState.RUNNING
        for frozen in self.study.get_trials(deepcopy=False, states=(running,)):  # a killed optui's
            with contextlib.suppress(Exception):
                self.study.tell(frozen.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)

    def told(self) -> int:
        """How many trials the study holds (finished ones)."""
        return len(self.study.get_trials(deepcopy=False))

    def ask(self, tried: Mapping[Point, Trial]) -> Point | None:
        """The sampler's next configuration not in ``tried`` (tried ones it proposes are
        told their known result); None when it keeps proposing known ones."""
        for _ in range(MAX_KNOWN_PROPOSALS):
            trial = self.study.ask(self._distributions)
            point: Point = tuple((name, trial.params[name]) for name in self._spec.flags)
            known = tried.get(point)
            if known is None:
                self._asked[point] = trial
                return point
            self._tell(trial, known)
        return None

    def tell(self, trial: Trial) -> None:
        """The result of a configuration :meth:`ask` proposed."""
        asked = self._asked.pop(trial.point, None)
        if asked is not None:
            self._tell(asked, trial)

    def _tell(self, asked, trial: Trial) -> None:
        if self._own_constraints:
            asked.set_constraint("feasible", 0.0 if trial.feasible else 1.0)
        else:
            asked.set_user_attr(_CONSTRAINT, (0.0,) if trial.feasible else (1.0,))
        asked.set_user_attr(_POINT, [list(p) for p in trial.point])
        score = trial.score
        if score is None:
            score = 0.0 if self._spec.goal.goal == "max" else 1e12
        self.study.tell(asked, score)

    def points(self) -> list[Point]:
        """The configurations told so far, in order (tests, resume checks)."""
        return [point_from_json(t.user_attrs[_POINT]) for t in self.study.get_trials(deepcopy=False)
                if _POINT in t.user_attrs]
