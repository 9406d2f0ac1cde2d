"""trustjudge.engine."""
