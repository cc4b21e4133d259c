"""What the tests share: builders, clients and helpers; fixtures are in the conftest files."""
