"""Admin and analysis tools: perf tools, reassignment, PySpark analysis."""
