"""``python -m trustjudge.serve --write-openapi docs/openapi.json``: regenerate the committed OpenAPI schema."""

from ._openapi import main

main()
