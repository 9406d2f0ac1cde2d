"""trustjudge.audit."""
