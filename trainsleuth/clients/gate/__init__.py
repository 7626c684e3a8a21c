"""The edit gate's shell analysis: `shell` parses and walks a command line; `rules` dispatches
each simple command to what the program writes (`builtins`, `interpreters`, `writers`, `git`)."""
