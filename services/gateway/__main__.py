"""`python -m services.gateway` serves the gateway."""

from shared.offline import go_offline

go_offline()  # before any import of a Hugging Face library: they read it once, at import

from services.gateway.app import main  # noqa: E402

main()
