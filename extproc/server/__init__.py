"""The Envoy-facing edge: the ext_proc gRPC servicer, its mutations and the server lifecycle."""
