"""Unique strings planted in private test data: they must never reach any output."""

CANARY = "CANARY-5f0e2c9a-private"
