"""The state folder: the attempt folders (artifacts), their retention, cancellation."""
