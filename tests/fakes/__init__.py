"""Test doubles for Slack: a recording Web API server and signed request builders."""
