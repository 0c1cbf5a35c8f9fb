"""Metrics, the decision log and its replay: how operators see why a request went where it went."""
