"""The warm recall engine: one local process per data directory, reached over a private socket.

``client`` is on the hook path (standard library only, a few milliseconds); ``server`` and the
service it hosts may import anything.
"""
