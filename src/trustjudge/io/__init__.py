"""trustjudge.io."""
