"""The state folder: the ledger, the report, retention of artifacts, what is running now, cancellation, the artifact folders."""
