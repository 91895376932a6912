"""Privacy: personal data and secrets in what a run returns become tokens (docs/privacy.md)."""
