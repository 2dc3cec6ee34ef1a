"""The hook path, from a host's stdin to the JSON it reads back.

- ``inputs``: what the hook process is given (``--agent``, ``--event``, bounded stdin, the data
  directory); a standard-library leaf.
- ``process``: the hook process: hand the raw event of a session start or prompt to the warm
  engine (the fast client), else run it here.
- ``run``: one hook run, wherever it happens (the hook process, ``memself hook``, the engine):
  payload -> host adapter -> core -> rendered answer, one log line.
- ``deadline``: the hook process's hard deadline, armed first of all from the command line's
  timeout; answers the host's "no answer" output when it passes. A standard-library leaf
  (``memself.hosts`` only for a command of an older install, before the alarm is set).

Imports go one way: ``process`` -> ``inputs``, ``deadline``, the engine's client side
(``protocol``, ``location``, ``transport``; ``client`` to start an engine), ``memself.hosts.base``
only for a command that names no event, and, for the local path only, ``run``; ``run`` ->
``inputs``, ``deadline``, ``memself.hosts``, ``memself.hook.core`` (which asks ``deadline`` how
long it may wait). The engine's service imports ``run``, never ``process``; nothing here imports
the engine's server side. Kept empty: the hook process imports this package first, and every
import costs it start-up time.
"""
