"""The turn engine: plain async Python. Nothing in this package imports Channels."""
