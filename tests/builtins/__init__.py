"""Tests of the built-in tools and hooks (issue 15)."""
