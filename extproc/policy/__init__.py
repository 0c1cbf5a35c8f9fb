"""The policy language: schema (pydantic), loading with diagnostics, and the decision engine."""
