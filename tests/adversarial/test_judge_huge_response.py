"""A judge endpoint that answers with hundreds of MB (a plain JSON body or an SSE stream that
never ends) must not take the judge's memory with it: the judge stops reading at 1 MiB and the
job ends as "no memory" with a reason that says why."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from memself.judge import jobs
from memself.paths import DataPaths
from tests.support.judge_helpers import configure, start_job
from tests.support.judge_server import huge, running_judge

BODY_BYTES = 256 << 20
# The judge's interpreter with httpx imported sits near 40 MB; reading the body whole took it
# past 700 MB.
PEAK_RSS_LIMIT_KIB = 150 << 10
# Print the peak RSS of the one child the wrapper waited for (ru_maxrss is in KiB on Linux).
_PEAK_OF_CHILD = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], check=False)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def run_judge_measured(job_file: str) -> int:
    """Run the real detached judge (``memself side-run``) to its end; its peak RSS in KiB."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_OF_CHILD, sys.executable, "-m", "memself", "side-run", job_file],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return int(done.stdout.split()[-1])


@pytest.mark.parametrize("kind", ["json", "sse"])
def test_huge_judge_response_is_cut_at_one_mib(kind: str) -> None:
    assert resource.RUSAGE_CHILDREN  # Linux: the measurement below exists
    paths = DataPaths.default()
    with running_judge() as judge:
        configure(paths, judge.url)
        judge.script(huge(kind, BODY_BYTES))
        sid = start_job(paths, "记住：以后回答都用中文")
        peak_kib = run_judge_measured(str(jobs.job_path(paths, sid)))
        sent = judge.sent[0] if judge.sent else -1
    assert peak_kib < PEAK_RSS_LIMIT_KIB, f"judge peak RSS {peak_kib // 1024} MiB"
    job = jobs.load_job(paths, sid)
    assert job["status"] == jobs.NONE, job
    assert "1 MiB" in job["reason"], job["reason"]
    # The judge hung up: the server got out the first MiB plus what the socket buffers held.
    assert 0 < sent < 64 << 20, sent
