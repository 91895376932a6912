"""The result cache: which runs may be reused (pure rules), their keys, the L1/L2 stores, invalidation."""
