"""The side judge (旁路): job files, the detached judge, Stop follow-ups and memory_resolve.

Modules on the hook path (secrets, session_id, jobs, start, followup, resolve) import only the
standard library; ``http`` (httpx) and ``judge`` run in the detached judge process.
"""
