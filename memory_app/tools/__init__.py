"""Server tools of the memory features, one module per tool family (imported by the app config)."""
