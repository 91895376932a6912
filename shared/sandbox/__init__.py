"""Isolated execution runtime for untrusted Python (see launcher, limits, outcome).

Kept import-light on purpose: the sandbox zygote imports ``shared.sandbox.child``
with ``-I -S`` (no site-packages), so this package must not pull in third-party code.
"""
