"""The GPU-host runner: an HTTP API that runs approved training scripts as jobs (on this host or
on Ray), follows their progress and serves their trained models; the bot talks to it only through
`runner.client` and `runner.schemas`."""
