"""``python -m trustjudge.cli``: the same as the ``trustjudge`` command."""

from . import main

main()
