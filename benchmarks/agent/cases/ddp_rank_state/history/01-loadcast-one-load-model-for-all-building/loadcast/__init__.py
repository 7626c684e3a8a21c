"""loadcast: hourly electricity load of buildings from weather, calendar and building size."""

__version__ = "0.1.0"
