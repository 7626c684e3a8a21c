"""Multi-process correctness (`check_distributed`) and hang analysis (`dump_stacks`)."""
