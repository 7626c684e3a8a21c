"""One reader per log format; each streams its input into a Collector."""
