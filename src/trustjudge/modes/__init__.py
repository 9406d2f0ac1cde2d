"""trustjudge.modes."""
