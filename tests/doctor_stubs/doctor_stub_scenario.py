"""Reads the scenario that tests/test_doctor.py wrote next to the stub packages."""

import json
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doctor_stub_scenario.json")

with open(_PATH) as handle:
    SCENARIO = json.load(handle)
