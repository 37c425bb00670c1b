pytest_plugins = ["tessera.testing.fixtures"]
