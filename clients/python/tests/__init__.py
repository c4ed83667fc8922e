"""Tests of the fence Python client, against real fence servers."""
