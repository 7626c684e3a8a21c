from hartrack.data.dataset import IMUDataset, Loaders, build_loaders, subject_split
from hartrack.data.synthetic import ACTIVITIES, make_recordings

__all__ = ["ACTIVITIES", "IMUDataset", "Loaders", "build_loaders", "make_recordings", "subject_split"]
