"""The repository as a whole: docs links, the layering rule, installs, a node's imports."""
