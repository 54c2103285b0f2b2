"""Thin command wrappers: parse, call the core, print JSON, return the exit code."""
