"""The routes an install can take, one module each, with everything that differs about it:
download (the channel's vendor builds; the base in plan.py), preflight (CPU builds of the
same family), existing_torch (a torch stack the interpreter already has) and lock (exactly
the files of a lock or wheelhouse). shared.py builds the steps every route has.
"""
