"""``python -m services.toolhost``."""

from services.toolhost.app import main

main()
