"""trustjudge.serve."""
