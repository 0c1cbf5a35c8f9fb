"""What runs the repository, not the router: Envoy config rendering, the local stack, the demo
upstreams and the generated deployment files. Nothing in the core imports from here."""
