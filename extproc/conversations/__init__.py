"""Conversations that stay on the model holding their state (`service`), kept in a store (`store`)."""
