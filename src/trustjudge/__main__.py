"""``python -m trustjudge``: the same as the ``trustjudge`` command."""

from .cli import main

main()
