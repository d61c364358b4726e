"""The ledger's estimate of new content: weights per feature, refitted by
recursive least squares on the reported sizes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import repeat
from operator import add, mul, sub
from typing import Final

# Starting weights (tokens per unit of each feature): a least-squares fit over
# varied agent sessions (one tokenizer); refitted from the first report on.
_PRIOR: Final[tuple[float, ...]] = (
    2.8, 3.9, 1200.0,
    0.35, -0.24, 0.67, 0.42, 0.5,
    0.16, 0.56, 0.49,
)  # fmt: skip
_PRIOR_SPREAD: Final = 0.5
_PRIOR_FLOOR: Final = 0.05
"""Prior standard deviation of each weight: this share of it, at least the floor."""
_PRIOR_SCALE: Final = 0.3
"""Prior standard deviation of a common factor on all the weights."""
_WEIGHT_POWER: Final = 0.7
"""A report's weight in a refit is its predicted size to minus this power: between
weighing absolute errors (big new content dominates) and relative ones."""
_FORGET: Final = 0.98
"""Weight of the past in each refit: the content of a session drifts."""


class _Calibration:
    """Recursive least squares with forgetting for ``tokens ~ weights . features``.

    The covariance is kept as ``cov * factor`` so that forgetting is one multiplication
    of a scalar; the rows are updated by ``map`` at C speed (a report costs a few
    microseconds).
    """

    __slots__ = ("cov", "factor", "weights")

    def __init__(self, prior: Sequence[float]) -> None:
        self.weights = list(prior)
        self.factor = 1.0
        # The first reports mostly say how far off the prior is as a whole (a
        # common factor), before they say how to reshape it (each weight).
        self.cov = [[_PRIOR_SCALE**2 * wi * wj for wj in prior] for wi in prior]
        for i, w in enumerate(prior):
            self.cov[i][i] += max(_PRIOR_FLOOR, _PRIOR_SPREAD * abs(w)) ** 2

    def predict(self, features: Sequence[float]) -> float:
        """Tokens of content with these (summed) features."""
        return float(sum(map(mul, self.weights, features)))

    def observe(self, features: Sequence[float], tokens: float) -> None:
        """Refit on one observation: ``features`` summed over some content cost ``tokens``."""
        predicted = self.predict(features)
        scale = float(max(abs(predicted), 1.0) ** -_WEIGHT_POWER)
        x = [f * scale for f in features]
        cov = self.cov
        cx = [sum(map(mul, row, x)) for row in cov]
        den = _FORGET / self.factor + sum(map(mul, x, cx))
        if not den > 0.0 or not math.isfinite(den):
            return
        error = (tokens - predicted) * scale / den
        self.weights = list(map(add, self.weights, map(mul, cx, repeat(error))))
        self.cov = [
            list(map(sub, row, map(mul, cx, repeat(c / den))))
            for row, c in zip(cov, cx, strict=True)
        ]
        self.factor /= _FORGET
        if self.factor > 1e6:  # fold the factor back in before it grows too large
            self.cov = [[c * self.factor for c in row] for row in self.cov]
            self.factor = 1.0
