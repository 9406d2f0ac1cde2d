"""trustjudge.report."""
