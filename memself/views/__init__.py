"""Every memory's "applies when" requests, asked of the judge endpoint in the background.

- ``state``: what the filler keeps on disk (today's spend, the batch in flight, failed attempts,
  the fingerprints that tell stale requests);
- ``budget``: the user's daily budget and the token estimate;
- ``batch``: which memories wait, their batches, what of an answer is kept;
- ``prompts``: what the endpoint reads;
- ``fill``: one run (``memself views fill``, and the detached run the daily maintenance starts);
- ``status``: coverage and budget for ``memself views status`` and ``doctor``;
- ``background``: the detached run and its start.
"""
