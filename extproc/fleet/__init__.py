"""The fleet: what the router observes and scrapes of each model's server, for model selection."""
