"""hartrack: activity recognition and heart-rate estimation from wrist IMU signals."""

__version__ = "0.4.0"
