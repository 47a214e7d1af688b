from support.fixtures import *  # noqa: F401,F403
