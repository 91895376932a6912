"""A claimed execution's run on the worker as explicit, ordered stages (``stages.STAGES``).

``runner.run_pipeline`` runs them and keeps the guarantees; each stage module owns one step
(or a few closely related ones, as ``cache``) and reads and writes a ``RunContext``.
"""
