"""``python -m services.toolhost``."""

from shared.offline import go_offline

go_offline()  # before any import of a Hugging Face library: they read it once, at import

from services.toolhost.app import main  # noqa: E402

main()
