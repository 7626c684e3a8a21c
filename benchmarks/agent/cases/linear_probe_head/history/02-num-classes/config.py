"""Run settings. NUM_CLASSES follows the label set of the dataset release."""

NUM_CLASSES = 6
STEPS = 300
LR = 1e-2
