"""Train XGBoost on scikit-learn's bundled digits with a validation set, printing every round.

Deep trees and a high learning rate on 300 training rows: the validation loss turns up while the
training loss keeps falling. `python xgboost_digits.py`
"""

from __future__ import annotations

import xgboost as xgb
from sklearn.datasets import load_digits


def main() -> None:
    x, y = load_digits(return_X_y=True)
    train = xgb.DMatrix(x[:300], label=y[:300])
    val = xgb.DMatrix(x[1400:], label=y[1400:])
    params = {
        "objective": "multi:softprob",
        "num_class": 10,
        "eta": 0.5,
        "max_depth": 8,
        "min_child_weight": 0,
        "eval_metric": ["mlogloss", "merror"],
        "seed": 0,
        "nthread": 1,
    }
    xgb.train(params, train, num_boost_round=120, evals=[(train, "train"), (val, "eval")], verbose_eval=1)


if __name__ == "__main__":
    main()
