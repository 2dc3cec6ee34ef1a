"""Whether what memself injects earns its place: rules kept or broken, recalled facts used or not.

- ``turns``: the small per-session files (what a turn was shown, a pending broken-rule notice),
  standard library only: the prompt hook reads the notice, the engine notes what it showed;
- ``start``: at Stop, hand the turn's answer to a detached check (standard library only);
- ``run``: the detached check: one judge request for the rules, a local decision for the facts;
- ``verdict``: the rule-check prompt and the reading of its answer;
- ``used``: the local fact-used decision;
- ``counts``: the counts kept on each memory and the advice they lead to;
- ``stats``: what ``memself stats`` and the page show.
"""
