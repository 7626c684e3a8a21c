"""Train a Keras 3 model (torch backend) on scikit-learn's bundled digits, with a real CSVLogger.

`fit(verbose=...)` prints Keras' own progress lines to stdout. Variants:
    --train-size 150 --hidden 512 --epochs 150   few samples, big model: overfits
    --optimizer sgd --lr 1e-6                    learning rate far too small: never learns

    KERAS_BACKEND=torch python keras_digits.py --out OUT.csv [options]
"""

from __future__ import annotations

import argparse

import keras
import numpy as np
from sklearn.datasets import load_digits


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--train-size", type=int, default=1400)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--verbose", type=int, default=2)
    a = p.parse_args()
    keras.utils.set_random_seed(0)
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(a.hidden, activation="relu"),
            keras.layers.Dense(a.hidden, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    opt = keras.optimizers.Adam(a.lr) if a.optimizer == "adam" else keras.optimizers.SGD(a.lr)
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(
        x[: a.train_size],
        y[: a.train_size],
        validation_data=(x[1400:], y[1400:]),
        epochs=a.epochs,
        batch_size=32,
        callbacks=[keras.callbacks.CSVLogger(a.out)],
        verbose=a.verbose,
    )


if __name__ == "__main__":
    main()
