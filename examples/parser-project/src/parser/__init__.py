"""A tiny header parser (the example project for lk-plan)."""
