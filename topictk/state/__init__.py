"""Model states as plain arrays with ``check_invariants()``, one module per family."""
