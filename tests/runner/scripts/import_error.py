"""A script importing a package its header does not list."""

import json  # noqa: F401

import surely_not_installed_module  # noqa: F401  # pyright: ignore[reportMissingImports]
