"""What the change is and whether it is verified: the diff and its scope policy, the checks in the clean room, failure fingerprints, per-test results, the stat cache."""
