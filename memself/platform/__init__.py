"""What differs between Linux, macOS and Windows, in one place.

Every test of the operating system (``sys.platform``, ``fcntl``, ``msvcrt``, Unix sockets, peer
credentials, sessions and signals) lives in this package; the rest of memself asks it. Each module
has one job and imports only the standard library, so the hook path may use any of them.

``MEMSELF_FOREIGN_PLATFORM=1`` makes the layer take its Windows branches wherever the machine
allows it (loopback TCP with a token instead of Unix sockets, byte-range locks instead of
``flock``, no inherited locks, no sessions, no alarm signal), so that the test suite exercises
those branches on Linux; child processes inherit it through the environment.
"""
