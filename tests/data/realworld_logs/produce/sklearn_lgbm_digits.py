"""Two classic non-deep-learning training logs on scikit-learn's bundled digits.

python sklearn_lgbm_digits.py mlp        MLPClassifier(verbose=True): "Iteration N, loss = X"
python sklearn_lgbm_digits.py lightgbm   lightgbm.train with a validation set, logged every round
"""

from __future__ import annotations

import sys

from sklearn.datasets import load_digits


def main() -> None:
    x, y = load_digits(return_X_y=True)
    if sys.argv[1] == "mlp":
        from sklearn.neural_network import MLPClassifier

        MLPClassifier(
            hidden_layer_sizes=(64,),
            max_iter=300,
            early_stopping=True,
            n_iter_no_change=20,
            verbose=True,
            random_state=0,
        ).fit(x / 16.0, y)
    else:
        import lightgbm as lgb

        train = lgb.Dataset(x[:1400], y[:1400])
        val = lgb.Dataset(x[1400:], y[1400:], reference=train)
        params = {
            "objective": "multiclass",
            "num_class": 10,
            "learning_rate": 0.3,
            "num_leaves": 63,
            "min_data_in_leaf": 2,
            "seed": 0,
            "num_threads": 1,
        }
        lgb.train(
            params, train, num_boost_round=150, valid_sets=[train, val], callbacks=[lgb.log_evaluation(1)]
        )


if __name__ == "__main__":
    main()
