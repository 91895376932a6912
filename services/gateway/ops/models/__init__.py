"""Gateway-only request and response models, one module per family (the execution wire
contract stays in shared/executions/models.py: workers use it too)."""
