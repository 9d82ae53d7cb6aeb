"""Loopback fakes of the platforms: real servers on 127.0.0.1 (ephemeral ports) that the real client
libraries talk to over real sockets. Each runs its own event loop in a thread, so sync tests, async
tests and subprocesses can all use it."""
