"""Heavy models: one loading place each, the bounded executor they run in, the registry."""
