"""``python -m services.toolhost``."""

from shared.offline import go_offline
from shared.wait_for import patch_wait_for

go_offline()  # before any import of a Hugging Face library: they read it once, at import
patch_wait_for()  # a cancelled task stops even mid Redis command (Python 3.11: shared/wait_for.py)

from services.toolhost.app import main  # noqa: E402

main()
