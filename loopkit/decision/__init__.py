"""The decision: pure rules over the evidence and the task's history, failure classes, budgets, the ledger's records and their replay, lk-decide's world, checkpoints."""
