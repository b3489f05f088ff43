"""Tests of the script helpers, one module per helper area."""
