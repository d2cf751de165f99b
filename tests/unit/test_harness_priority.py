"""ft_harness.priority: a low-priority test session keeps its priority in the sessions it starts."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# In a session of its own with group nice 7, start a child in a new session, as the harness starts
# servers, and print the child's group nice before and after keep_group_priority.
CHILD = textwrap.dedent("""
    import subprocess, sys
    from pathlib import Path
    from ft_harness.priority import group_nice, keep_group_priority
    Path("/proc/self/autogroup").write_text("7")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        before = group_nice(child.pid)
        keep_group_priority(child.pid)
        print(group_nice(), before, group_nice(child.pid))
    finally:
        child.kill()
""")


def test_a_server_started_in_its_own_session_keeps_the_starting_sessions_group_priority():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, start_new_session=True,
                         check=True).stdout.split()
    assert out == ["7", "0", "7"]  # a new session is a new group at nice 0 until the harness says otherwise

