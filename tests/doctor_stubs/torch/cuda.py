"""Stub torch.cuda."""

import time

from doctor_stub_scenario import SCENARIO, event


class _Properties:
    total_memory = SCENARIO.get("total_memory", 0)


def is_available():
    event("cuda")
    if SCENARIO.get("hang"):
        time.sleep(3600)
    return bool(SCENARIO["cuda_available"])


def device_count():
    return SCENARIO["device_count"] if is_available() else 0


def get_arch_list():
    return list(SCENARIO["arch_list"]) if is_available() else []


def get_device_name(index=0):
    return SCENARIO["device_name"]


def get_device_capability(index=0):
    return tuple(SCENARIO["capability"])


def get_device_properties(index=0):
    return _Properties()


def synchronize():
    return None
