"""The side judge (旁路): job files, the detached judge, Stop follow-ups and memory_resolve.

Modules on the hook path (secrets, proposal_id, jobs, seal, runlock, start, followup, apply) and
``resolve`` import only the standard library; ``http`` (httpx) and ``worker`` run in the detached
judge process. What the model and the user read of it lives in ``memself.text.messages``.
"""
