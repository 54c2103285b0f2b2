"""What a run may reach: bubblewrap (the one module that knows its flags), the policy of one run's sandbox, the allow-listed environments and redaction."""
