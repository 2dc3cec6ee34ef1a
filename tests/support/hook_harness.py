"""A test-only hook entry: the real bootstrap and ``memself.hook.run``, with a scripted core.

Run as ``python -I -S tests/support/hook_harness.py --agent HOST --replies FILE``. FILE maps an event kind
(``session_start``, ``prompt_submit``, ``stop``) to HookReply fields plus optional ``sleep``
(seconds) and ``raise`` (bool); every event also appends its HookEvent as one JSON line to
``FILE.events``. Production code has no such switch: the scripted core is the run's ``core``.
The hard deadline is armed as the entry arms it; ``--no-deadline`` leaves only the run's
watchdog thread (what a platform without SIGALRM gets).
"""

import json
import os
import runpy
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENTRY = os.path.join(REPO_ROOT, "hooks", "entry.py")


def _replies_file(argv: list[str]) -> str:
    return argv[argv.index("--replies") + 1]


def main() -> None:
    # The entry's own bootstrap, so this exercises the same package lookup hosts get.
    runpy.run_path(ENTRY, run_name="memself_entry")["_bootstrap"]()
    from memself.hook.deadline import arm
    from memself.hook.inputs import agent_arg, read_stdin
    from memself.hook.run import RunContext, run
    from memself.hosts.base import HookReply

    if "--no-deadline" not in sys.argv:
        arm(agent_arg(sys.argv[1:]), sys.argv[1:])  # as the entry does

    replies_path = _replies_file(sys.argv)
    with open(replies_path, encoding="utf-8") as fh:
        replies = json.load(fh)

    def handler(event, now, paths):
        record = event._asdict()
        record["kind"] = event.kind.value
        record["now"] = now.isoformat()
        with open(replies_path + ".events", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        spec = dict(replies.get(event.kind.value, {}))
        if spec.pop("sleep", 0):
            time.sleep(float(replies[event.kind.value]["sleep"]))
        if spec.pop("raise", False):
            raise RuntimeError("scripted failure")
        if spec.pop("once", False) and _seen_before(replies_path, event.kind.value):
            return HookReply()
        return HookReply(**spec)

    run(read_stdin(), RunContext(agent_arg(sys.argv[1:]), core=handler))


def _seen_before(replies_path: str, kind: str) -> bool:
    with open(replies_path + ".events", encoding="utf-8") as fh:
        return sum(1 for line in fh if json.loads(line)["kind"] == kind) > 1


if __name__ == "__main__":
    try:
        main()
    finally:
        sys.stdout.flush()
        os._exit(0)
