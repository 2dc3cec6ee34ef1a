"""The warm recall engine: one local process per data directory, reached over a private socket.

Client side, standard library only and cheap (the hook process imports them): ``protocol`` (the
wire and every op), ``location`` (where an engine listens), ``transport`` (one
request and its reply), ``client`` (requests as dicts, start, status, stop), ``instance_lock``.
Server side, which may import anything: ``server`` and the service it hosts (``service``).
"""
