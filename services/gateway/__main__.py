"""`python -m services.gateway` serves the gateway."""

from services.gateway.app import main

main()
