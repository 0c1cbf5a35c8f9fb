"""Offline tools the CLI runs and the server never imports: classifier training, the SigLIP
parity harness, the image-labels probe, the routing evaluation and the `import-vsr` converter."""
