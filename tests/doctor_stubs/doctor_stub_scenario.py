"""Reads the scenario that tests/test_doctor.py wrote next to the stub packages."""

import json
import os
import sys

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doctor_stub_scenario.json")

with open(_PATH) as handle:
    SCENARIO = json.load(handle)


def event(what):
    """With "events" in the scenario (a file): one line, this process's kind (sealed: no site)
    and `what` (torch imported, its first CUDA call, its exit), for tests of the probes' order."""
    if SCENARIO.get("events"):
        with open(SCENARIO["events"], "a") as log:
            log.write(("sealed " if sys.flags.no_site else "started ") + what + "\n")

